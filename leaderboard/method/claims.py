"""The paper's claims, judged: each claim of ``claims.toml`` against each profile of a release.

A claim names its primary scorer (the paper's own variant), scorers shown ``beside`` it, a
baseline, a task, a metric, the direction the paper says is better for the scorer, and a practical
minimum effect declared before any run (``min_effect`` in the metric's units, or
``min_effect_relative`` times the baseline's mean). At a profile where both ran the task with two
or more common seeds, the effect is the mean paired difference scorer - baseline over those seeds,
its 95% interval the Student t interval of the per-seed differences, and the test the paired t
test. The primary scorers' tests at one profile form one Holm family, the scorers beside them
another. Verdicts, in this order:

- ``not run``: at this profile the scorer or the baseline has no row of the metric, or they
  share fewer than two seeds;
- ``premise absent``: the claim declares what the baseline must show for it to be testable (its
  ``premise``) and the baseline's records at this profile do not clearly show it; the reason
  gives the premise and the measured value;
- ``uninformative``: the metric cannot tell scorers apart at this profile, by its rule
  (:mod:`leaderboard.method.informative`, decided from the baseline's records alone);
- ``degenerate``: every scorer's seeds give the same value, or both the scorer and the baseline
  are constant over their seeds: there is no spread to test (not a tie);
- ``supported``: Holm-adjusted p <= alpha and |effect| at least the claim's minimum effect, in
  the claimed direction; ``contradicted``: the same, in the other direction;
- ``not supported``: neither; ``detectable`` is the smallest difference the test detects with
  80% power at the level the verdict needs, alpha / m for a family of m tests (a raw p below it
  is significant under Holm whatever the other tests give), so "no difference larger than X"
  is read at the verdict's own level.

Uninformative, degenerate and not-run entries are not tests and are not in a Holm family. A release
none of whose rows holds a claim's (task, metric) judges nothing (no claims list).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import stats
from .informative import comparison_degenerate, metric_degenerate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
FIELDS = ("id", "text", "source", "scorer", "baseline", "task", "metric", "direction", "paper")
TEST = "paired t over seeds, Holm across the profile's claims (primary and beside apart)"
VERDICTS = ("supported", "contradicted", "not supported", "premise absent", "uninformative",
            "degenerate", "not run")


@dataclass(frozen=True)
class Premise:
    """What the baseline must show for a claim to be testable at a profile: its per-seed values of
    ``metric`` against a threshold, ``at_least`` / ``at_most`` a value or ``above`` / ``below``
    another metric of the task times ``factor``, clearly: the 95% t interval of the per-seed
    margin lies on the threshold's right side."""

    why: str
    metric: str = ""
    at_least: float | None = None
    at_most: float | None = None
    above: str = ""
    below: str = ""
    factor: float = 1.0

    KINDS = ("at_least", "at_most", "above", "below")

    def check(self, values: dict[int, float], reference: dict[int, float],
              alpha: float) -> tuple[bool, str]:
        """Whether it holds on the baseline's ``values`` (seed -> value of ``metric``) and
        ``reference`` (seed -> value of ``above`` / ``below``), and the measured text."""
        higher = self.at_least is not None or bool(self.above)
        if self.above or self.below:
            seeds = sorted(set(values) & set(reference))
            threshold = np.array([self.factor * reference[k] for k in seeds])
            needs = f"{self.factor:g} x {self.above or self.below}"
        else:
            seeds = sorted(values)
            bound = self.at_least if self.at_least is not None else self.at_most
            threshold = np.full(len(seeds), float(bound))
            needs = f"{bound:g}"
        if len(seeds) < 2:
            return False, f"{len(seeds)} baseline seed(s) to check it on; two are needed"
        x = np.array([values[k] for k in seeds])
        low, high = stats.t_interval(x - threshold, alpha)
        holds = low > 0 if higher else high < 0
        side = "at least" if higher else "at most"
        return bool(holds), (f"baseline {self.metric} {x.mean():.4g} against {side} {needs} "
                             f"({threshold.mean():.4g}); 95% interval of the margin "
                             f"[{low:.3g}, {high:.3g}]")


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str
    scorer: str
    baseline: str
    task: str
    metric: str
    direction: str
    paper: str
    beside: tuple[str, ...] = ()
    min_effect: float | None = None
    min_effect_relative: float | None = None
    premise: Premise | None = None

    def practical_effect(self, baseline_mean: float) -> float:
        """The claim's minimum effect in the metric's units (0 when none is declared)."""
        if self.min_effect is not None:
            return float(self.min_effect)
        if self.min_effect_relative is not None and math.isfinite(baseline_mean):
            return float(self.min_effect_relative) * abs(baseline_mean)
        return 0.0


def load_claims(path: str | Path = CLAIMS_FILE) -> list[Claim]:
    """The claims of a TOML file (``[[claim]]`` tables); a malformed entry raises naming it."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out = []
    for i, entry in enumerate(data.get("claim", [])):
        missing = [k for k in FIELDS if not isinstance(entry.get(k), str)]
        if missing:
            raise ValueError(f"{path}: claim #{i + 1} ({entry.get('id', '?')}) lacks text "
                             f"field(s) {missing}; every claim needs {', '.join(FIELDS)}")
        if entry["direction"] not in ("lower", "higher"):
            raise ValueError(f"{path}: claim {entry['id']}: direction must be 'lower' or "
                             f"'higher', got {entry['direction']!r}")
        effects = [k for k in ("min_effect", "min_effect_relative") if k in entry]
        if len(effects) != 1 or not isinstance(entry[effects[0]], (int, float)) \
                or isinstance(entry[effects[0]], bool) or entry[effects[0]] < 0:
            raise ValueError(f"{path}: claim {entry['id']}: declare exactly one practical "
                             "minimum effect, min_effect (>= 0, in the metric's units) or "
                             "min_effect_relative (>= 0, times the baseline's mean)")
        out.append(Claim(**{k: entry[k] for k in FIELDS},
                         beside=tuple(entry.get("beside", ())),
                         premise=_premise(path, entry),
                         **{effects[0]: float(entry[effects[0]])}))
    ids = [c.id for c in out]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: claim ids must be unique, got {sorted(ids)}")
    return out


def _premise(path, entry: dict) -> Premise | None:
    """The claim's ``[claim.premise]`` table; a malformed one raises naming the claim and key."""
    table = entry.get("premise")
    if table is None:
        return None
    where = f"{path}: claim {entry['id']}: premise"
    unknown = sorted(set(table) - {"why", "metric", "factor", *Premise.KINDS})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: why, metric, factor, "
                         f"{', '.join(Premise.KINDS)}")
    kinds = [k for k in Premise.KINDS if k in table]
    if len(kinds) != 1 or not isinstance(table.get("why"), str):
        raise ValueError(f"{where}: needs a text 'why' and exactly one of "
                         f"{', '.join(Premise.KINDS)}")
    kind = kinds[0]
    value = table[kind]
    if kind in ("above", "below") and not isinstance(value, str):
        raise ValueError(f"{where}: {kind} names a metric of the task, got {value!r}")
    if kind in ("at_least", "at_most") and (isinstance(value, bool)
                                            or not isinstance(value, (int, float))):
        raise ValueError(f"{where}: {kind} must be a number, got {value!r}")
    factor = table.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
        raise ValueError(f"{where}: factor must be a number > 0, got {factor!r}")
    return Premise(why=table["why"], metric=table.get("metric", entry["metric"]),
                   factor=float(factor),
                   **{kind: value if isinstance(value, str) else float(value)})


def judge(rows: list[dict], claims: list[Claim], alpha: float = stats.ALPHA) -> list[dict]:
    """One entry per (claim, scorer: the claim's and those ``beside`` it, profile)."""
    index = {(r["profile"], r["task"], r["metric"], r["scorer"]): r for r in rows}
    present = {(r["task"], r["metric"]) for r in rows}
    if not any((c.task, c.metric) in present for c in claims):
        return []
    series: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        series.setdefault((r["profile"], r["task"], r["metric"]), {})[r["scorer"]] = dict(
            zip(r["seeds"] or [], r["values"] or []))
    profiles = sorted({r["profile"] for r in rows})
    out = []
    for profile in profiles:
        families: dict[str, list[dict]] = {"primary": [], "beside": []}
        for claim in claims:
            for role, scorer in [("primary", claim.scorer)] + [("beside", s)
                                                                for s in claim.beside]:
                entry = _entry(claim, profile, scorer, role)
                out.append(entry)
                metric_series = series.get((profile, claim.task, claim.metric), {})
                if _measure(entry, claim, index, metric_series, alpha):
                    families[role].append(entry)
        for family in families.values():
            _decide(family, alpha)
    return out


def _entry(claim: Claim, profile: str, scorer: str, role: str) -> dict:
    """A claim's entry for one scorer at one profile, before anything is measured."""
    return dict(id=claim.id, claim=claim.text, source=claim.source, profile=profile,
                scorer=scorer, baseline=claim.baseline, task=claim.task, metric=claim.metric,
                direction=claim.direction, paper=claim.paper, verdict="not run", reason="",
                role=role, effect=math.nan, ci_low=math.nan, ci_high=math.nan, p=math.nan,
                p_raw=math.nan, test=TEST, n_seeds=0, detectable=math.nan,
                min_effect=math.nan, alpha_corrected=math.nan)


def _measure(entry: dict, claim: Claim, index: dict, series: dict[str, dict],
             alpha: float) -> bool:
    """Fill in the effect, its interval and the raw p of one entry; True when it is a test that
    enters its Holm family (not ``not run``, ``uninformative`` or ``degenerate``). ``series``:
    scorer -> seed -> value of every scorer of the claim's metric at the entry's profile."""
    scorer = entry["scorer"]
    a = index.get((entry["profile"], claim.task, claim.metric, scorer))
    b = index.get((entry["profile"], claim.task, claim.metric, claim.baseline))
    if a is None or b is None:
        entry["reason"] = (f"no {scorer if a is None else claim.baseline} records "
                           f"of {claim.task} / {claim.metric}")
        return False
    va = dict(zip(a["seeds"] or [], a["values"] or []))
    vb = dict(zip(b["seeds"] or [], b["values"] or []))
    common = sorted(set(va) & set(vb))
    if len(common) < 2:
        entry["reason"] = f"{len(common)} common seed(s); two are needed"
        return False
    x = np.array([va[k] for k in common])
    y = np.array([vb[k] for k in common])
    d = x - y
    entry.update(effect=float(d.mean()), n_seeds=len(common),
                 min_effect=claim.practical_effect(float(y.mean())))
    entry["ci_low"], entry["ci_high"] = stats.t_interval(d, alpha)
    if claim.premise is not None:
        holds, measured = _check_premise(claim, entry["profile"], index, alpha)
        if not holds:
            entry.update(verdict="premise absent",
                         reason=f"premise: {claim.premise.why}; measured: {measured}")
            return False
    if b.get("informative") is False or a.get("informative") is False:
        entry.update(verdict="uninformative",
                     reason=b.get("informative_reason") or a.get("informative_reason") or "")
        return False
    degenerate = (metric_degenerate(series)
                  or comparison_degenerate(x.tolist(), y.tolist(), scorer, claim.baseline))
    if degenerate:
        entry.update(verdict="degenerate", reason=degenerate)
        return False
    entry["p_raw"] = stats.paired_t(x, y)
    entry["sd"] = float(d.std(ddof=1))
    return True


def _check_premise(claim: Claim, profile: str, index: dict, alpha: float) -> tuple[bool, str]:
    """Whether the claim's premise holds on the baseline's rows at ``profile``."""
    premise = claim.premise

    def series(metric: str) -> dict[int, float]:
        row = index.get((profile, claim.task, metric, claim.baseline))
        return dict(zip(row["seeds"] or [], row["values"] or [])) if row else {}

    values = series(premise.metric)
    if not values:
        return False, f"no {claim.baseline} records of {claim.task} / {premise.metric}"
    other = premise.above or premise.below
    reference = series(other) if other else {}
    if other and not reference:
        return False, f"no {claim.baseline} records of {claim.task} / {other}"
    return premise.check(values, reference, alpha)


def _decide(family: list[dict], alpha: float) -> None:
    """Holm across one family of tests, then each entry's verdict (module docstring)."""
    level = alpha / len(family) if family else alpha
    for entry, p in zip(family, stats.holm([e["p_raw"] for e in family])):
        entry["p"] = float(p)
        entry["alpha_corrected"] = level
        entry["detectable"] = stats.detectable_difference(entry.pop("sd"), entry["n_seeds"],
                                                          level)
        sign = 1.0 if entry["direction"] == "higher" else -1.0
        effect = entry["effect"]
        if p <= alpha and abs(effect) >= entry["min_effect"]:
            entry["verdict"] = "supported" if sign * effect > 0 else "contradicted"
        else:
            entry["verdict"] = "not supported"
            entry["reason"] = (f"no difference larger than {entry['detectable']:.4g} "
                               f"detectable at level {level:.3g}")
            if p <= alpha:
                entry["reason"] = (f"significant, but |effect| {abs(effect):.4g} is below "
                                   f"the claim's minimum effect {entry['min_effect']:.4g}")
