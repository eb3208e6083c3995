"""Level, speed and reliability of the tasks trained until their validation metric converges
(``stop = "converged"``, tasks/stopping.py), reported apart.

The level is the headline metric at the best-validation checkpoint (the board's rows and
verdicts). Here, per task whose reporting records carry a stopping block with a ``target``, per
scorer:

- **reliability**: the seeds whose every model reached the target (``target_step`` set) over the
  seeds, with the exact (Clopper-Pearson) 95% interval of a binomial proportion;
- **speed**: the steps to the target (the first evaluation at or past it; the slowest model of a
  cell that trains several), the mean over the seeds that reached it with the modified Cox
  interval of a log-normal mean (:func:`~.stats.lognormal_mean_interval`, at most the cap), and
  how many did not: steps are positive and right-skewed (most seeds arrive together, a slow one
  much later), where a t interval's lower end can fall below zero;
- **stops**: how many seeds converged, how many reached the cap, and how many had not learned
  (passed ``learned_at``) by then; of those at the cap after learning, how many had no gain left:
  their best value within the rule's tolerance of the end of the validation metric's range (an
  accuracy of 1, a loss of 0), where no evaluation could count as a gain, so that only the wait
  the rule asks for after a best kept them training (a task's range comes from its declaration,
  ``ranges``; without one, none is counted);
- **convergence**: each seed's best step, where the rule found the best value it then stopped at
  or, with no gain left, could not have improved on (any other seed at the cap counts as slower
  than every seed that converged); the baseline's median seed is the measurement behind the cap,
  which the protocol holds to at least :data:`CAP_MULTIPLE` times it (:func:`cap_multiple`).

A scorer whose seeds split (some reach the target, some do not) is marked so: the mean of its
level is then a mean that no seed has.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest

from ..loading.choice import reached_target
from ..loading.records import LoadedRecords, Record
from .stats import ALPHA, lognormal_mean_interval


# The least cap, in multiples of the baseline's convergence step (tasks.icl_training.CAP_MULTIPLE).
CAP_MULTIPLE = 4


def unconverged(summary: dict) -> int:
    """A scorer's seeds (its ``scorer_summary``) that learned but that the cap stopped before the
    rule saw them converge (a gain within the last half of the run), with a gain still possible:
    their level at the cap may not be their converged one (a run that never learned trains to the
    cap too)."""
    return summary["cap"] - summary["not_learned"] - summary["no_gain_left"]


def no_gain_left(block: dict, direction: str, bounds: Sequence[float | None]) -> bool:
    """Whether a stopping block's best value is within its tolerance of the end of the metric's
    range ``bounds`` (low, high; None: unbounded) in ``direction``, so that no later evaluation
    could have improved on it by more than the tolerance."""
    best, low, high = block.get("best_value"), *bounds
    if best is None:
        return False
    if direction == "higher":
        return high is not None and high - best <= block["tolerance"]
    return low is not None and best - low <= block["tolerance"]


def reliability(reached: int, seeds: int, alpha: float = ALPHA) -> tuple[float, float, float]:
    """(fraction, low, high): the exact binomial interval of ``reached`` out of ``seeds``."""
    ci = binomtest(reached, seeds).proportion_ci(confidence_level=1 - alpha, method="exact")
    return reached / seeds, float(ci.low), float(ci.high)


def seed_outcome(record: Record, bounds: Sequence[float | None] | None = None) -> dict | None:
    """One reporting record's stop: reached, steps to the target, reason, learned, settled (every
    model converged, or learned with no gain left within ``bounds``, the validation metric's
    range) and the settle step (the latest of its models': a model's best step where it settled,
    0 where it never learned, infinite where the cap stopped it with a gain still possible);
    None without a target."""
    blocks = record.stopping
    reached = reached_target(blocks)
    if reached is None:
        return None
    direction = (record.validation or {}).get("direction")

    def settled(b: dict) -> bool:
        return b["reason"] == "converged" or (
            b["learned"] and bounds is not None and direction is not None
            and no_gain_left(b, direction, bounds))

    def settle_step(b: dict) -> float:
        return 0 if not b["learned"] else (b["best_step"] or 0) if settled(b) else np.inf

    return {"seed": record.seed, "reached": reached,
            "steps": max(b["target_step"] for b in blocks) if reached else None,
            "target": blocks[0]["target"], "cap": blocks[0]["cap"],
            "reason": "cap" if any(b["reason"] == "cap" for b in blocks) else "converged",
            "learned": all(b["learned"] for b in blocks),
            "settled": all(settled(b) for b in blocks),
            "settle_step": max(settle_step(b) for b in blocks),
            "stop_step": max(b["stop_step"] for b in blocks),
            "best_step": max(b["best_step"] or 0 for b in blocks)}


def scorer_summary(outcomes: list[dict]) -> dict:
    seeds, reached = len(outcomes), sum(o["reached"] for o in outcomes)
    rel, low, high = reliability(reached, seeds)
    steps = [o["steps"] for o in outcomes if o["reached"]]
    speed = None
    if steps:
        lo, hi = lognormal_mean_interval(steps, upper=max(o["cap"] for o in outcomes))
        speed = {"mean": float(np.mean(steps)), "lo": lo, "hi": hi, "seeds": len(steps)}
    return {"seeds": seeds, "reached": reached, "reliability": rel, "reliability_lo": low,
            "reliability_hi": high, "speed": speed, "not_reached": seeds - reached,
            "split": 0 < reached < seeds,
            "converged": sum(o["reason"] == "converged" for o in outcomes),
            "cap": sum(o["reason"] == "cap" for o in outcomes),
            "not_learned": sum(not o["learned"] for o in outcomes),
            "no_gain_left": sum(o["reason"] == "cap" and o["settled"] for o in outcomes),
            "stop_steps": sorted(o["stop_step"] for o in outcomes),
            "best_steps": sorted(o["best_step"] for o in outcomes),
            "median_converged": median_converged(outcomes),
            "median_settled": median_settled(outcomes)}


def summary(loaded: LoadedRecords, ranges: dict[str, list] | None = None) -> dict:
    """{task: {"target", "cap", "scorers": {label: scorer_summary}}} over the ``ok`` reporting
    records with a target, with ``"range"`` ([low, high], None for an unbounded end) where
    ``ranges`` declares the task's validation metric's; empty when no task has a target."""
    ranges = ranges or {}
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in loaded.records:
        outcome = seed_outcome(r, ranges.get(r.task)) if r.status == "ok" else None
        if outcome is not None:
            groups[r.task][r.scorer_label].append(outcome)
    out = {}
    for task, by_scorer in sorted(groups.items()):
        first = next(iter(by_scorer.values()))[0]
        out[task] = {"target": first["target"], "cap": first["cap"],
                     **({"range": list(ranges[task])} if task in ranges else {}),
                     "scorers": {label: scorer_summary(o) for label, o in sorted(by_scorer.items())}}
    return out


def median_converged(outcomes: list[dict]) -> float | None:
    """The median seed's best step, a seed that ran to the cap with a gain still possible
    counting as slower than every settled seed; None when the median seed is such a seed."""
    value = float(np.median([o["best_step"] if o["settled"] else np.inf for o in outcomes]))
    return None if np.isinf(value) or np.isnan(value) else value


def median_settled(outcomes: list[dict]) -> float | None:
    """The median seed's settle step, the step after which a longer run left its standing as it
    was (``seed_outcome``: its best step where it converged or had no gain left, 0 where it never
    learned, after every other seed where the cap stopped it with a gain still possible); of an
    even count, the later of the middle two, a step some seed has; None when that seed is one the
    cap stopped with a gain still possible."""
    ordered = sorted(o["settle_step"] for o in outcomes)
    value = float(ordered[len(ordered) // 2])
    return None if np.isinf(value) else value


def cap_multiple(task: dict, baseline: str) -> float | None:
    """The cap of a task's ``meta.convergence`` entry over its baseline's median convergence step
    (0 where that median seed ran to the cap); None without the baseline's records."""
    summary = task["scorers"].get(baseline)
    if summary is None or "median_converged" not in summary:
        return None
    converged = summary["median_converged"]
    return 0.0 if converged is None else task["cap"] / converged
