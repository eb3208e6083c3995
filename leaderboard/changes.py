"""What changed since an earlier release: per task, the verdicts vs the baseline and the tier
memberships that differ, and the rank correlation between the two releases' overalls.

Rows are matched by (profile, task, metric, scorer); only rows present in both releases are
compared, and the scorers or rows present in one only are counted apart. The rank correlation is
Spearman's rho (scipy) over the scorers with an overall score in both, per profile.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from scipy import stats as scipy_stats

Key = tuple[str, str, str, str]     # profile, task, metric, scorer


@dataclass
class TaskChanges:
    """One (profile, task): rows compared, and the (metric, scorer, before, after) that moved."""

    profile: str
    task: str
    compared: int = 0
    verdicts: list[tuple[str, str, str, str]] = field(default_factory=list)
    tiers: list[tuple[str, str, str, str]] = field(default_factory=list)
    only_now: int = 0
    only_before: int = 0


@dataclass
class OverallChange:
    """One profile's overalls: Spearman's rho over the scorers ranked in both releases."""

    profile: str
    scorers: list[str]
    rho: float | None
    only_now: list[str]
    only_before: list[str]


@dataclass
class Changes:
    against: str
    tasks: list[TaskChanges]
    overall: list[OverallChange]

    def to_dict(self) -> dict:
        return {"against": self.against,
                "tasks": [vars(t) | {"verdicts": [list(v) for v in t.verdicts],
                                     "tiers": [list(v) for v in t.tiers]} for t in self.tasks],
                "overall": [vars(o) for o in self.overall]}


def _key(row: dict) -> Key:
    return row["profile"], row["task"], row["metric"], row["scorer"]


def _tier(row: dict) -> str:
    return "-" if row.get("tier") is None else str(row["tier"])


def changes(rows: list[dict], overall: list[dict], earlier: dict, baseline: str) -> Changes:
    """The changes from the earlier release ``earlier`` (its results.json) to ``rows`` and
    ``overall`` (this release's); the baseline's own rows carry no verdict and are left out."""
    before = {_key(r): r for r in earlier["rows"]}
    now = {_key(r): r for r in rows}
    per_task: dict[tuple[str, str], TaskChanges] = {}

    def entry(key: Key) -> TaskChanges:
        return per_task.setdefault(key[:2], TaskChanges(*key[:2]))

    for key in sorted(set(now) | set(before)):
        if key[3] == baseline:
            continue
        item = entry(key)
        if key not in before:
            item.only_now += 1
            continue
        if key not in now:
            item.only_before += 1
            continue
        item.compared += 1
        a, b = before[key], now[key]
        if a["vs_baseline"] != b["vs_baseline"]:
            item.verdicts.append((key[2], key[3], a["vs_baseline"] or "-", b["vs_baseline"] or "-"))
        if _tier(a) != _tier(b):
            item.tiers.append((key[2], key[3], _tier(a), _tier(b)))
    return Changes(earlier["meta"]["release"], [per_task[k] for k in sorted(per_task)],
                   _overall_changes(overall, earlier["overall"]))


def _overall_changes(now: list[dict], before: list[dict]) -> list[OverallChange]:
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
        out.append(OverallChange(profile, common, rho, sorted(set(b) - set(a)),
                                 sorted(set(a) - set(b))))
    return out


def markdown(ch: Changes) -> str:
    """The release README's section on what changed since ``ch.against``."""
    lines = [f"## What changed since {ch.against}", "",
             f"Rows matched by task, metric and scorer in both releases; a verdict is the row's "
             f"comparison with the baseline, a tier its membership in the task's tiers.", "",
             "| profile | task | rows in both | verdicts changed | tiers changed | rows new | "
             "rows gone |", "|---|---|---|---|---|---|---|"]
    for t in ch.tasks:
        lines.append(f"| {t.profile} | {t.task} | {t.compared} | {len(t.verdicts)} | "
                     f"{len(t.tiers)} | {t.only_now} | {t.only_before} |")
    lines.append("")
    for o in ch.overall:
        rho = "not computed (fewer than 3 scorers in both)" if o.rho is None else f"{o.rho:.3f}"
        lines.append(f"Overall ({o.profile}): Spearman rank correlation {rho} over "
                     f"{len(o.scorers)} scorers in both"
                     + (f"; new: {', '.join(o.only_now)}" if o.only_now else "")
                     + (f"; gone: {', '.join(o.only_before)}" if o.only_before else "") + ".")
    changed = [(t, v) for t in ch.tasks for v in t.verdicts]
    if changed:
        lines += ["", "Verdicts that changed:", "", "| task | metric | scorer | before | now |",
                  "|---|---|---|---|---|"]
        lines += [f"| {t.task} | {m} | {s} | {a} | {b} |" for t, (m, s, a, b) in changed]
    return "\n".join(lines) + "\n"
