"""The paper's claims, judged: each claim of ``claims.toml`` against each profile of a release.

A claim names a scorer, a baseline, a task, a metric and the direction the paper says is better
for the scorer. At a profile where both ran the task with two or more common seeds, the effect is
the mean paired difference scorer - baseline over those seeds, its 95% interval the Student t
interval of the per-seed differences, and the test the paired t test; the p-values of the claims
judged at one profile are Holm-corrected together. Verdicts:

- ``supported``: adjusted p <= alpha, |effect| at least the metric's minimum effect, in the
  claimed direction;
- ``contradicted``: the same, in the other direction;
- ``not supported``: neither; ``detectable`` is the smallest difference the test detects with
  80% power there ("no difference larger than X");
- ``not run``: at this profile the scorer or the baseline has no row of the metric, or they
  share fewer than two seeds.

A release none of whose rows holds a claim's (task, metric) judges nothing (no claims list).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import stats

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
FIELDS = ("id", "text", "source", "scorer", "baseline", "task", "metric", "direction", "paper")
TEST = "paired t over seeds, Holm across the profile's claims"


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
        out.append(Claim(**{k: entry[k] for k in FIELDS},
                         beside=tuple(entry.get("beside", ()))))
    ids = [c.id for c in out]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: claim ids must be unique, got {sorted(ids)}")
    return out


def judge(rows: list[dict], claims: list[Claim], alpha: float = stats.ALPHA) -> list[dict]:
    """One entry per (claim, scorer: the claim's and those ``beside`` it, profile)."""
    index = {(r["profile"], r["task"], r["metric"], r["scorer"]): r for r in rows}
    present = {(r["task"], r["metric"]) for r in rows}
    if not any((c.task, c.metric) in present for c in claims):
        return []
    profiles = sorted({r["profile"] for r in rows})
    out = []
    for profile in profiles:
        judged = []
        for claim in claims:
            for scorer in (claim.scorer,) + claim.beside:
                entry = dict(id=claim.id, claim=claim.text, source=claim.source,
                             profile=profile, scorer=scorer, baseline=claim.baseline,
                             task=claim.task, metric=claim.metric, direction=claim.direction,
                             paper=claim.paper, verdict="not run",
                             effect=math.nan, ci_low=math.nan, ci_high=math.nan, p=math.nan,
                             p_raw=math.nan, test=TEST, n_seeds=0, detectable=math.nan,
                             min_effect=math.nan)
                a = index.get((profile, claim.task, claim.metric, scorer))
                b = index.get((profile, claim.task, claim.metric, claim.baseline))
                if a is not None and b is not None:
                    va = dict(zip(a["seeds"] or [], a["values"] or []))
                    vb = dict(zip(b["seeds"] or [], b["values"] or []))
                    common = sorted(set(va) & set(vb))
                    if len(common) >= 2:
                        x = np.array([va[k] for k in common])
                        y = np.array([vb[k] for k in common])
                        d = x - y
                        entry.update(effect=float(d.mean()), n_seeds=len(common),
                                     p_raw=stats.paired_t(x, y), min_effect=a["min_effect"])
                        entry["ci_low"], entry["ci_high"] = stats.t_interval(d, alpha)
                        entry["detectable"] = stats.detectable_difference(
                            float(d.std(ddof=1)), len(common), alpha)
                        judged.append(entry)
                out.append(entry)
        for entry, p in zip(judged, stats.holm([e["p_raw"] for e in judged])):
            entry["p"] = float(p)
            sign = 1.0 if entry["direction"] == "higher" else -1.0
            effect = entry["effect"]
            if p <= alpha and abs(effect) >= (entry["min_effect"] or 0.0):
                entry["verdict"] = "supported" if sign * effect > 0 else "contradicted"
            else:
                entry["verdict"] = "not supported"
    return out
