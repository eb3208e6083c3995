"""What changed since an earlier release: per task, the verdicts vs the baseline and the tier
memberships that differ, and the rank correlation between the two releases' overalls.

Rows are matched by (profile, task, metric, scorer); only rows present in both releases are
compared, and the scorers or rows present in one only are counted apart. The rank correlation is
Spearman's rho (scipy) over the scorers with an overall score in both, per profile.
"""
from __future__ import annotations

from collections import defaultdict

from scipy import stats as scipy_stats

Key = tuple[str, str, str, str]     # profile, task, metric, scorer


def _key(row: dict) -> Key:
    return row["profile"], row["task"], row["metric"], row["scorer"]


def _tier(row: dict) -> str:
    return "-" if row.get("tier") is None else str(row["tier"])


def changes(rows: list[dict], overall: list[dict], earlier: dict, baseline: str) -> dict:
    """The changes from the earlier release ``earlier`` (its results.json) to ``rows`` and
    ``overall`` (this release's), as results.json's ``meta.changes`` holds them: per (profile,
    task) the rows compared and the verdicts and tiers that moved as [metric, scorer, before,
    now]; per profile the overalls' rank correlation. The baseline's own rows are left out."""
    before = {_key(r): r for r in earlier["rows"]}
    now = {_key(r): r for r in rows}
    per_task: dict[tuple[str, str], dict] = {}
    for key in sorted(set(now) | set(before)):
        if key[3] == baseline:
            continue
        item = per_task.setdefault(key[:2], {"profile": key[0], "task": key[1], "compared": 0,
                                             "verdicts": [], "tiers": [], "only_now": 0,
                                             "only_before": 0})
        if key not in before or key not in now:
            item["only_now" if key in now else "only_before"] += 1
            continue
        item["compared"] += 1
        a, b = before[key], now[key]
        if a["vs_baseline"] != b["vs_baseline"]:
            item["verdicts"].append([key[2], key[3], a["vs_baseline"] or "-",
                                     b["vs_baseline"] or "-"])
        if _tier(a) != _tier(b):
            item["tiers"].append([key[2], key[3], _tier(a), _tier(b)])
    return {"against": earlier["meta"]["release"], "tasks": [per_task[k] for k in sorted(per_task)],
            "overall": _overall_changes(overall, earlier["overall"])}


def _overall_changes(now: list[dict], before: list[dict]) -> list[dict]:
    scores: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: {"now": {}, "before": {}})
    for side, rows in (("now", now), ("before", before)):
        for r in rows:
            if r.get("score") is not None:
                scores[r["profile"]][side][r["scorer"]] = r["score"]
    out = []
    for profile in sorted(scores):
        a, b = scores[profile]["before"], scores[profile]["now"]
        common = sorted(set(a) & set(b))
        rho = (float(scipy_stats.spearmanr([a[s] for s in common], [b[s] for s in common])[0])
               if len(common) >= 3 else None)
        out.append({"profile": profile, "scorers": common, "rho": rho,
                    "only_now": sorted(set(b) - set(a)), "only_before": sorted(set(a) - set(b))})
    return out


def markdown(ch: dict) -> str:
    """The release README's section on what changed since ``ch["against"]``."""
    lines = [f"## What changed since {ch['against']}", "",
             "Rows matched by profile, task, metric and scorer in both releases; a verdict is the "
             "row's comparison with the baseline, a tier its membership in the task's tiers.", "",
             "| profile | task | rows in both | verdicts changed | tiers changed | rows new | "
             "rows gone |", "|---|---|---|---|---|---|---|"]
    for t in ch["tasks"]:
        lines.append(f"| {t['profile']} | {t['task']} | {t['compared']} | {len(t['verdicts'])} | "
                     f"{len(t['tiers'])} | {t['only_now']} | {t['only_before']} |")
    lines.append("")
    for o in ch["overall"]:
        rho = ("not computed (fewer than 3 scorers in both)" if o["rho"] is None
               else f"{o['rho']:.3f}")
        lines.append(f"Overall ({o['profile']}): Spearman rank correlation {rho} over "
                     f"{len(o['scorers'])} scorers in both"
                     + (f"; new: {', '.join(o['only_now'])}" if o["only_now"] else "")
                     + (f"; gone: {', '.join(o['only_before'])}" if o["only_before"] else "")
                     + ".")
    changed = [(t["task"], v) for t in ch["tasks"] for v in t["verdicts"]]
    if changed:
        lines += ["", "Verdicts that changed:", "", "| task | metric | scorer | before | now |",
                  "|---|---|---|---|---|"]
        lines += [f"| {task} | {m} | {s} | {a} | {b} |" for task, (m, s, a, b) in changed]
    return "\n".join(lines) + "\n"
