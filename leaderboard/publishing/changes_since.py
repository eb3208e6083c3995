"""What changed since an earlier release: per task, the verdicts vs the baseline and the tier
memberships that differ, and the rank correlation between the two releases' overalls.

Rows are matched by (profile, task, metric, scorer); only rows present in both releases are
compared, and the scorers or rows present in one only are counted apart; each moved verdict and
tier names the rule of the method that moved it. The rank correlation is Spearman's rho (scipy)
over the scorers with an overall headline in both, per profile (the probability of improvement,
or the normalized score of a release from before it). The release README's section on it is
:func:`leaderboard.rendering.markdown.changes_section`.

A task trained to convergence now (``meta.convergence``) and for a fixed number of steps in the
earlier release (the last step of its learning curves there, the *budget*) adds to each moved
verdict whether it moved by **speed** or by **level** (:func:`speed_or_level`), from where the
scorer's and the baseline's median seeds settled (``median_settled``: the best step of a seed
that converged or had no gain left, none for one the cap stopped while it could still gain, and
step 0 for one that never learned): speed when either settled only after that budget, or never
within the cap (the earlier release read that run before it had reached its level); level when
both settled within it (a longer run did not change where either stands). Where either's chosen
learning rate differs from the earlier release's, it says so too: the verdict then moved with
the rate as well. Where the scorer or the baseline has no records of the task yet, it says so.
Its rule names the records too: every record of such a task was re-run, whatever rule of the
method moved with them.
"""
from __future__ import annotations

from collections import defaultdict

from scipy import stats as scipy_stats

from ..method.curves import budget
from ..method.stats import ALPHA, tolerance
from ..rendering.text import pval, steps

RECORDS = "the records or the test"
RETRAINED = "the records, re-trained to convergence since"

Key = tuple[str, str, str, str]     # profile, task, metric, scorer


def _key(row: dict) -> Key:
    return row["profile"], row["task"], row["metric"], row["scorer"]


def _tier(row: dict) -> str:
    return "-" if row.get("tier") is None else str(row["tier"])


def changes(rows: list[dict], overall: list[dict], earlier: dict, baseline: str,
            claims: list[dict] | None = None, convergence: dict | None = None,
            tuning: dict | None = None, alpha: float = ALPHA) -> dict:
    """The changes from the earlier release ``earlier`` (its results.json) to ``rows``,
    ``overall`` and ``claims`` (this release's), as results.json's ``meta.changes`` holds them:
    per (profile, task) the rows compared and the verdicts and tiers that moved as [metric,
    scorer, before, now, the rule that moved it] (and, on a task newly trained to convergence,
    :func:`speed_or_level` of ``convergence`` and ``tuning``, this release's ``meta.convergence``
    and ``meta.tuning``); per profile the overalls' rank correlation; the overall tiers and the
    claim verdicts that moved. The baseline's own rows are left out, and a task's rows are not
    compared where the baseline has no records of it now (counted as ``no_baseline_now``);
    ``alpha`` is the release's level, against which a corrected p crossed."""
    budgets = _budgets(earlier, convergence or {})
    before = {_key(r): r for r in earlier["rows"]}
    now = {_key(r): r for r in rows}
    judged_now = {key[:2] for key, r in now.items() if key[3] == baseline and r["n"]}
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
        if key[:2] not in judged_now:     # part-way through a re-run: nothing to compare with
            item["no_baseline_now"] = item.get("no_baseline_now", 0) + 1
            continue
        item["compared"] += 1
        a, b = before[key], now[key]
        if a["vs_baseline"] != b["vs_baseline"]:
            moved = [key[2], key[3], a["vs_baseline"] or "-", b["vs_baseline"] or "-",
                     verdict_rule(a, b, alpha)]
            if key[1] in budgets:
                moved[4] = retrained(moved[4])
                rates = {label: rate_change(earlier["meta"].get("tuning"), tuning, key[1],
                                            label) for label in (key[3], baseline)}
                moved.append(speed_or_level(convergence[key[1]], key[3], baseline,
                                            budgets[key[1]], rates))
            item["verdicts"].append(moved)
        if _tier(a) != _tier(b):
            rule = tier_rule(a, b)
            item["tiers"].append([key[2], key[3], _tier(a), _tier(b),
                                  retrained(rule) if key[1] in budgets else rule])
    return {"against": earlier["meta"]["release"], "tasks": [per_task[k] for k in sorted(per_task)],
            "overall": _overall_changes(overall, earlier["overall"]),
            "overall_tiers": _overall_tiers(overall, earlier["overall"]),
            "claims": _claim_changes(claims or [], earlier.get("claims") or [])}


def _budgets(earlier: dict, convergence: dict) -> dict[str, int]:
    """{task: the earlier release's step budget} for the tasks trained to convergence now and
    for a fixed number of steps then (its learning curves end at the budget)."""
    if earlier["meta"].get("convergence"):
        return {}
    curves = earlier["meta"].get("curves") or {}
    return {task: last for task in convergence if (last := budget(curves, task)) is not None}


def rate_change(before: dict | None, now: dict | None, task: str, label: str) -> str | None:
    """"lr 0.001 then, 0.0005 now" where a scorer's chosen point on ``task`` differs between two
    releases' ``meta.tuning``; None where it does not, or either names none."""
    def chosen(tuning: dict | None) -> dict | None:
        scorers = ((tuning or {}).get(task) or {}).get("scorers", {})
        return (scorers.get(label) or {}).get("chosen")

    def text(point: dict) -> str:
        return ", ".join(f"{key} {value:g}" for key, value in sorted(point.items()))

    then, current = chosen(before), chosen(now)
    if not then or not current or then == current:
        return None
    return f"{text(then)} then, {text(current)} now"


def speed_or_level(task: dict, scorer: str, baseline: str, budget: int,
                   rates: dict[str, str | None] | None = None) -> str:
    """Whether a verdict that moved on a task now trained to convergence moved by speed or by
    level (module docstring), with the median seeds' settling steps that decide it and, from
    ``rates`` ({label: :func:`rate_change`}), the chosen rates that changed."""
    missing = [label for label in (scorer, baseline) if label not in task["scorers"]]
    if missing:
        return f"not known yet: {' and '.join(missing)} has no records of the task"

    def settled(label: str) -> float | None:
        return task["scorers"][label]["median_settled"]

    def text(at: float | None) -> str:
        if at is None:
            return "was still gaining at the cap"
        return "never learned" if at == 0 else f"reached its best at step {steps(at)}"

    mine, base = settled(scorer), settled(baseline)
    late = any(at is None or at > budget for at in (mine, base))
    moved = [f"{label}: {change}" for label, change in sorted((rates or {}).items()) if change]
    rate = f"; chosen rate changed ({'; '.join(moved)})" if moved else ""
    return (f"{'speed' if late else 'level'}: the median seed {text(mine)} ({baseline}: "
            f"{text(base)}); the earlier budget was {steps(budget)} steps{rate}")


def _changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > tolerance(a, b)


def verdict_rule(a: dict, b: dict, alpha: float = ALPHA) -> str:
    """Which rule of the method moved a row's verdict from ``a`` (before) to ``b`` (now): a
    corrected p that crossed ``alpha`` while the raw p stayed the same is the correction's. A
    changed minimum effect moves a verdict only into or out of "within resolution" or "tie",
    which name it; between n.s., better and worse the test decides."""
    words = {a["vs_baseline"], b["vs_baseline"]}
    if a.get("informative") != b.get("informative") or "uninformative" in words:
        return "informative: every headline metric must clear its trivial predictor"
    if "degenerate" in words:
        return "degenerate: values that do not vary over seeds give no test"
    if "within resolution" in words:
        return "practical size: significant, but below the metric's minimum effect"
    if "tie" in words:
        return "tie: only where the interval of Δ lies inside ± the minimum effect"
    if _correction_moved(a, b, alpha):
        return ("multiple testing: the corrected p crossed α with the tests it is corrected "
                f"over (raw p {pval(a['p_vs_baseline'])} then, {pval(b['p_vs_baseline'])} now; "
                f"Holm p {pval(a['p_vs_baseline_holm'])} then, "
                f"{pval(b['p_vs_baseline_holm'])} now)")
    return RECORDS


def _correction_moved(a: dict, b: dict, alpha: float) -> bool:
    """Whether the verdict's corrected p (the larger of Holm's and BH's) crossed ``alpha`` while
    the raw p stayed the same (the same test on the same values, in a changed family)."""
    def corrected(r: dict) -> float | None:
        ps = [r.get(k) for k in ("p_vs_baseline_holm", "p_vs_baseline_bh")]
        return None if any(p is None for p in ps) else max(ps)

    raw = [r.get("p_vs_baseline") for r in (a, b)]
    fixed = [corrected(r) for r in (a, b)]
    if None in raw or None in fixed:
        return False
    return (fixed[0] <= alpha) != (fixed[1] <= alpha) and not _changed(*raw)


def retrained(rule: str) -> str:
    """The rule of a verdict on a task whose every record was re-run to convergence since: the
    records moved it, whatever rule of the method moved with them."""
    if rule == RECORDS:
        return RETRAINED
    return f"{rule}; and {RETRAINED}"


def tier_rule(a: dict, b: dict) -> str:
    """Which rule of the method moved a row's tier."""
    if a.get("informative") != b.get("informative"):
        return "informative: an uninformative metric has no tiers"
    if bool(a.get("degenerate")) != bool(b.get("degenerate")) and "-" in (_tier(a), _tier(b)):
        return "degenerate: a metric on which every scorer gives one value has no tiers"
    if _changed(a.get("min_effect"), b.get("min_effect")):
        return "practical size: differences below the minimum effect do not separate tiers"
    return RECORDS


def _overall_tiers(now: list[dict], before: list[dict]) -> list[list]:
    """[profile, scorer, tier before, tier now, why] for each scorer whose overall tier moved."""
    old = {(r["profile"], r["scorer"]): r for r in before}
    out = []
    for r in now:
        a = old.get((r["profile"], r["scorer"]))
        if a is None or _tier(a) == _tier(r):
            continue
        why = ("headline: tiers come from P(better than the baseline), which replaces the "
               "normalized score" if a.get("poi") is None and r.get("poi") is not None
               else RECORDS)
        out.append([r["profile"], r["scorer"], _tier(a), _tier(r), why])
    return out


def _claim_changes(now: list[dict], before: list[dict]) -> list[list]:
    """[profile, claim id, scorer, verdict before, verdict now, why] for each claim entry whose
    verdict moved or that is new."""
    old = {(c["profile"], c["id"], c["scorer"]): c for c in before}
    out = []
    for c in now:
        a = old.get((c["profile"], c["id"], c["scorer"]))
        if a is not None and a["verdict"] == c["verdict"]:
            continue
        if a is None:
            why = "new entry: every SSA claim reports both parametrizations"
        elif c["verdict"] == "not run":
            why = f"not run: {c.get('reason') or 'no records to test it on'}"
        elif a["metric"] != c["metric"]:
            why = f"judged on {c['metric']} (was {a['metric']})"
        elif c["verdict"] == "premise absent":
            why = "premise: the baseline does not show what makes the claim testable"
        elif "uninformative" in (a["verdict"], c["verdict"]):
            why = "informative: every headline metric must clear its trivial predictor"
        else:
            why = RECORDS
        out.append([c["profile"], c["id"], c["scorer"], "-" if a is None else a["verdict"],
                    c["verdict"], why])
    return out


def _overall_changes(now: list[dict], before: list[dict]) -> list[dict]:
    scores: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: {"now": {}, "before": {}})
    for side, rows in (("now", now), ("before", before)):
        for r in rows:
            headline = r["poi"] if r.get("poi") is not None else r.get("score")
            if headline is not None:
                scores[r["profile"]][side][r["scorer"]] = headline
    out = []
    for profile in sorted(scores):
        a, b = scores[profile]["before"], scores[profile]["now"]
        common = sorted(set(a) & set(b))
        rho = (float(scipy_stats.spearmanr([a[s] for s in common], [b[s] for s in common])[0])
               if len(common) >= 3 else None)
        out.append({"profile": profile, "scorers": common, "rho": rho,
                    "only_now": sorted(set(b) - set(a)), "only_before": sorted(set(a) - set(b))})
    return out
