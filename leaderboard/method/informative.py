"""Whether a metric can tell scorers apart at a profile, decided from the baseline's own records.

A metric is *informative* at a profile when the baseline (softmax) shows that the task was learned
there. The decision reads the baseline's records only, never the scorer being judged, so adding,
removing or changing another scorer's records cannot move it. Each rule is declared here, keyed by
task and metric (fnmatch patterns, first match wins):

- ``margin``: the baseline must be *clearly* above the floor (every headline metric with anchors
  is held to one: its rule's, else ``HEADLINE_MARGIN``; a baseline whose mean lies below the
  floor reads "the baseline is below the trivial predictor"). On the normalized scale
  z = (x - floor) / (ceiling - floor) (log x where the metric is log-scaled; each record's own
  anchors), the lower end of the baseline's 95% Student t interval over seeds must reach
  max(margin, d), where d is the difference a paired t test at the baseline's seed count detects
  with 80% power when two scorers' seeds scatter like the baseline's (sd of z times √2): a
  scorer that fell to the floor must be a detectable fall.
- ``learned``: the task's in-distribution metric, which must itself be informative (an
  out-of-distribution metric judges generalization only of something learned).
- ``floor``: a floor to use where the metric declares none (chance accuracy of a benchmark).
- ``stand_in``: a headline that takes this metric's place in the verdicts and the overall at a
  profile where this one is uninformative and the stand-in is informative.

An uninformative metric keeps its numbers but gets no better/worse, no tier or rank, and stays out
of the overall. A metric with no rule is judged as before (informative).

*Degenerate* is a property of the numbers, not of the rule: a metric is degenerate when each
scorer gives one value at all its seeds (zero spread), or when at every seed all scorers give the
same value (the data stream decides it, not the scorer); a comparison is degenerate when the
scorer and the baseline are both constant over their common seeds. Neither is a tie: a degenerate
metric gets no better/worse, tier or rank (it still enters the overall, where it moves no
scorer's standing that its anchors do not already fix).
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

import numpy as np

from . import stats

BASELINE_ONLY = "decided from the baseline's records only"
# The margin of a headline metric whose rule declares none: every headline metric of the overall
# must show the baseline clearly better than the trivial predictor.
HEADLINE_MARGIN = 0.1


@dataclass(frozen=True)
class Rule:
    """When a metric is informative; see the module docstring."""

    margin: float | None = None
    learned: str | None = None
    floor: float | None = None
    stand_in: str | None = None
    what: str = ""


# (task, metric pattern, rule); the first match wins. ``what`` names the floor in words.
RULES: tuple[tuple[str, str, Rule], ...] = (
    # Multi-query associative recall: well above guessing one of the context's values (1/pairs).
    ("icl_mqar", "accuracy_id", Rule(margin=0.5, what="guessing a context value (1/pairs)")),
    ("icl_mqar", "*", Rule(learned="accuracy_id")),
    # Linear regression in context: clearly better than the zero predictor.
    ("icl_linear", "mse_T9_id", Rule(margin=0.5, what="the zero predictor")),
    ("icl_linear", "mse_T41_sigma1", Rule(margin=0.5, what="the zero predictor")),
    ("icl_linear", "mse_T9_shifted", Rule(margin=0.1, learned="mse_T9_id",
                                          stand_in="mse_over_zero_shifted",
                                          what="the zero predictor")),
    ("icl_linear", "mse_T41_shifted", Rule(margin=0.1, learned="mse_T9_id",
                                           what="the zero predictor")),
    ("icl_linear", "mse_over_zero_id", Rule(margin=0.5, what="the zero predictor")),
    ("icl_linear", "mse_over_zero_*", Rule(margin=0.1, learned="mse_T9_id",
                                           what="the zero predictor")),
    # every / some: the sequence error in distribution against the constant answer (1/16).
    ("icl_quantifiers", "error_id", Rule(margin=0.5, what="the constant answer")),
    ("icl_quantifiers", "error_shifted", Rule(margin=0.1, learned="error_id",
                                              what="the constant answer")),
    ("icl_quantifiers", "*", Rule(learned="error_id")),
    # Decoder: held-out perplexity at the training context against the unigram perplexity.
    ("decoder_lm", "heldout_perplexity", Rule(margin=0.1, what="the unigram perplexity")),
    ("decoder_lm", "heldout_perplexity_1x", Rule(margin=0.1, what="the unigram perplexity")),
    ("decoder_lm", "arc_easy_acc*", Rule(margin=0.1, floor=0.2668, learned="heldout_perplexity",
                                         what="the majority answer")),
    ("decoder_lm", "arc_challenge_acc*", Rule(margin=0.1, floor=0.2654,
                                              learned="heldout_perplexity",
                                              what="the majority answer")),
    ("decoder_lm", "boolq_acc", Rule(margin=0.1, floor=0.6217, learned="heldout_perplexity",
                                     what="the majority answer")),
    ("decoder_lm", "piqa_acc*", Rule(margin=0.1, floor=0.5049, learned="heldout_perplexity",
                                     what="the majority answer")),
    ("decoder_lm", "winogrande_acc", Rule(margin=0.1, floor=0.5043, learned="heldout_perplexity",
                                          what="the majority answer")),
    ("decoder_lm", "hellaswag_acc*", Rule(margin=0.1, floor=0.2573, learned="heldout_perplexity",
                                          what="the majority answer")),
    ("decoder_lm", "*", Rule(learned="heldout_perplexity")),
    # Encoder: Zorro clearly above chance (50%); a paradigm judges only an encoder that learned.
    ("encoder_mlm", "zorro_overall", Rule(margin=0.1, what="chance (50%)")),
    ("encoder_mlm", "zorro.*", Rule(learned="zorro_overall")),
)


def rule_for(task: str, metric: str) -> Rule | None:
    for t, pattern, rule in RULES:
        if t == task and fnmatch.fnmatchcase(metric, pattern):
            return rule
    return None


def in_distribution_metric(task: str) -> str | None:
    """The metric whose informativeness says the task was learned (the first ``learned`` named
    in the task's rules)."""
    return next((rule.learned for t, _, rule in RULES if t == task and rule.learned), None)


@dataclass
class Decision:
    informative: bool | None     # None: no rule, or no baseline records to decide from
    reason: str


def clear_of_floor(z: list[float], margin: float, alpha: float = stats.ALPHA
                   ) -> tuple[bool, str]:
    """Whether normalized per-seed values ``z`` (0 = floor, 1 = ceiling) are clearly above the
    floor: the lower end of their 95% t interval reaches max(margin, d), d the difference a paired
    t test at len(z) seeds detects with 80% power for a spread of sd(z)·√2."""
    x = np.asarray([v for v in z if math.isfinite(v)], dtype=np.float64)
    if x.size < 2:
        return False, f"the baseline has {x.size} seed(s) with a value; two are needed to tell"
    low, _ = stats.t_interval(x, alpha)
    detectable = stats.detectable_difference(float(x.std(ddof=1)) * math.sqrt(2), x.size, alpha)
    need = max(margin, detectable)
    text = (f"baseline {x.mean():.3g} of the way from floor to ceiling, 95% lower bound "
            f"{low:.3g}; needs {need:.3g} (margin {margin:g}, detectable {detectable:.3g})")
    return bool(low >= need), text


def decide(task: str, metric: str, baseline_z: dict[str, list[float]],
           alpha: float = stats.ALPHA, headline: bool = False,
           _seen: frozenset = frozenset()) -> Decision:
    """The decision for (task, metric) at one profile from ``baseline_z``: metric -> the
    baseline's normalized per-seed values there (NaN where a record has no anchors). A headline
    metric whose rule declares no margin of its own is held to ``HEADLINE_MARGIN`` above its
    floor wherever it has anchors."""
    rule = rule_for(task, metric)
    if rule is None:
        return Decision(None, "")
    if rule.learned and rule.learned != metric and rule.learned not in _seen:
        learned = decide(task, rule.learned, baseline_z, alpha, False, _seen | {metric})
        if learned.informative is False:
            return Decision(False, f"the baseline did not learn {task} in distribution "
                                   f"({rule.learned}: {learned.reason})")
        if learned.informative is None and rule.margin is None:
            return learned
    margin = rule.margin
    z = baseline_z.get(metric)
    if margin is None and headline and z and any(math.isfinite(v) for v in z):
        margin = HEADLINE_MARGIN
    if margin is None:
        return Decision(True, f"in-distribution {rule.learned} shows the task was learned")
    if not z:
        return Decision(None, "no baseline records to decide from")
    if not any(math.isfinite(v) for v in z):
        return Decision(None, "the metric has no floor and ceiling to decide with")
    ok, text = clear_of_floor(z, margin, alpha)
    floor = f" above {rule.what}" if rule.what else " above the floor"
    if ok:
        return Decision(True, f"baseline clearly{floor}: {text}")
    if float(np.mean([v for v in z if math.isfinite(v)])) < 0:
        return Decision(False, f"the baseline is below the trivial predictor "
                               f"({rule.what or 'the floor'}): {text}")
    return Decision(False, f"baseline not clearly{floor}: {text}")


def did_not_learn(task: str, scorer_z: dict[str, list[float]], alpha: float = stats.ALPHA
                  ) -> str | None:
    """The in-distribution metric a scorer did not learn by the baseline's rule (its own records
    judged as the baseline's are), or None."""
    metric = in_distribution_metric(task)
    rule = rule_for(task, metric) if metric else None
    if rule is None or rule.margin is None or not scorer_z.get(metric):
        return None
    z = [v for v in scorer_z[metric] if math.isfinite(v)]
    if len(z) < 2:
        return None
    ok, _ = clear_of_floor(z, rule.margin, alpha)
    return None if ok else metric


# --------------------------------------------------------------------------- degenerate


def metric_degenerate(series: dict[str, dict[int, float]]) -> str:
    """Why a metric is degenerate ('' when it is not): ``series`` maps scorer -> seed -> value.
    Degenerate: two or more scorers, and either each scorer gives one value at all its seeds (no
    spread; one value for all of them is the extreme case), or at every seed shared by two or
    more scorers all of them give the same value."""
    filled = {s: v for s, v in series.items() if v}
    if len(filled) < 2:
        return ""
    every = [x for v in filled.values() for x in v.values()]
    if max(every) - min(every) <= stats.tolerance(*every):
        value = float(np.median(every))
        value = 0.0 if abs(value) <= stats.tolerance(value) else value
        return f"every scorer gives {value:.4g} at every seed"
    if all(len(v) >= 2 and _constant(list(v.values())) for v in filled.values()):
        return "every scorer gives one value at all its seeds: no spread to test"
    seeds = sorted({k for v in filled.values() for k in v})
    shared = [k for k in seeds if sum(k in v for v in filled.values()) >= 2]
    if shared and all(_constant([v[k] for v in filled.values() if k in v]) for k in shared):
        values = ", ".join(f"seed {k}: {next(v[k] for v in filled.values() if k in v):.4g}"
                           for k in shared)
        return (f"at each seed every scorer gives the same value ({values}): the seed's data, "
                "not the scorer, decides it")
    return ""


def comparison_degenerate(a: list[float], b: list[float], scorer: str, baseline: str) -> str:
    """Why the paired comparison of ``a`` (scorer) with ``b`` (baseline) over common seeds is
    degenerate ('' when it is not): both constant, so there is no spread to test."""
    if len(a) < 2 or not (_constant(a) and _constant(b)):
        return ""
    if abs(a[0] - b[0]) <= stats.tolerance(a[0], b[0]):
        return f"{scorer} and {baseline} both give {a[0]:.4g} at every common seed"
    return (f"{scorer} gives {a[0]:.4g} and {baseline} {b[0]:.4g} at every common seed: "
            "no spread to test")


def _constant(values: list[float]) -> bool:
    return not values or max(values) - min(values) <= stats.tolerance(*values)


# --------------------------------------------------------------------------- the overall


def leave_one_out_ranks(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, int]]:
    """scorer -> task -> the scorer's rank (1 = best, ties share the better rank) by the mean of
    its task scores with that task left out. ``scores``: scorer -> task -> task score."""
    tasks = sorted({t for v in scores.values() for t in v})
    out: dict[str, dict[str, int]] = {s: {} for s in scores}
    for left in tasks:
        means = {s: float(np.mean([x for t, x in v.items() if t != left]))
                 for s, v in scores.items() if any(t != left for t in v)}
        for s, m in means.items():
            out[s][left] = 1 + sum(1 for o in means.values() if o > m + stats.tolerance(o, m))
    return out


def spread_shares(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """task -> its share of the variance of the overall across scorers: the overall is
    S = mean_t x_t, so Var(S) = sum_t Cov(x_t / K, S) and task t's share is
    Cov(x_t / K, S) / Var(S) (the shares sum to 1; a task that runs against the overall is
    negative). Over the scorers that have every task; NaN when the overall does not vary."""
    tasks = sorted({t for v in scores.values() for t in v})
    full = [s for s, v in scores.items() if set(v) == set(tasks)]
    if len(full) < 2 or not tasks:
        return {t: math.nan for t in tasks}
    x = np.array([[scores[s][t] for t in tasks] for s in full], dtype=np.float64)
    total = x.mean(axis=1)
    var = float(np.var(total))
    if var <= stats.tolerance(float(np.max(np.abs(total)))) ** 2:
        return {t: math.nan for t in tasks}
    centred = total - total.mean()
    return {t: float(np.mean((x[:, j] - x[:, j].mean()) / len(tasks) * centred) / var)
            for j, t in enumerate(tasks)}
