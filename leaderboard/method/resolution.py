"""The practical size of a verdict: the smallest difference from the baseline that the board names
better or worse, per (task, metric pattern) (fnmatch, first match wins), in the metric's units.

A significant difference smaller than this reads *within resolution*, not better or worse. The
sizes are stated, not fitted to the results:

- perplexities: 2% of the baseline's token perplexity (one factor-2 step of the tuning grid's
  learning rate moves softmax's validation perplexity by about 3.9% at the cpu profile, so half a
  grid step). The metrics that measure the same thing in other units take that same change in
  theirs: ln 1.02 nats for a cross-entropy or loss per token; for a per-byte or per-word metric,
  the change of its log that 2% token perplexity makes, ln 1.02 x ln(its perplexity) / ln(the
  token perplexity), with the baseline's own values of both (bits per byte: that times the
  baseline's bits per byte; byte and word perplexity: the baseline's times exp of it, minus 1).
  Without the token perplexity beside it, 2% of the metric itself;
- accuracies and sequence errors (fractions): 0.02, one item in fifty; Zorro (percent): 2 points;
- raw MSE: 5% of the baseline's; MSE over the zero predictor's: 0.02 (its span is 0 to 1);
- attention weight on a deviant: 10% of the baseline's; its entropy: 0.05 nats.

A record's own declared ``min_effect`` (relative to the baseline's mean) applies where it is
larger. A metric with no rule keeps the record's.
"""
from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass

PERPLEXITY_STEP = 0.02


@dataclass(frozen=True)
class Resolution:
    """``absolute`` in the metric's units, or ``relative`` times the baseline's mean."""

    absolute: float | None = None
    relative: float | None = None
    what: str = ""

    def size(self, baseline_mean: float) -> float:
        if self.absolute is not None:
            return self.absolute
        if self.relative is not None and math.isfinite(baseline_mean):
            return self.relative * abs(baseline_mean)
        return 0.0


_PPL = Resolution(relative=PERPLEXITY_STEP, what="2% perplexity (half a tuning-grid step)")
_NATS = Resolution(absolute=math.log1p(PERPLEXITY_STEP), what="ln 1.02 nats (2% perplexity)")
# Per-byte and per-word metrics: scaled from the token perplexity (see _scaled); alone, 2% of
# the metric itself.
_PPL_FAMILY = Resolution(relative=PERPLEXITY_STEP, what="2% of the metric (no token perplexity "
                                                         "beside it)")
_FRACTION = Resolution(absolute=0.02, what="0.02 (one item in fifty)")

RULES: tuple[tuple[str, str, Resolution], ...] = (
    ("icl_mqar", "accuracy*", _FRACTION),
    ("icl_linear", "mse_over_zero_*", Resolution(absolute=0.02,
                                                  what="0.02 of the zero predictor's MSE")),
    ("icl_linear", "mse_*", Resolution(relative=0.05, what="5% of the baseline's MSE")),
    ("icl_quantifiers", "*error*", _FRACTION),
    ("icl_quantifiers", "*accuracy*", _FRACTION),
    ("icl_quantifiers", "*weight*", Resolution(relative=0.10,
                                               what="10% of the baseline's weight")),
    ("icl_quantifiers", "*entropy*", Resolution(absolute=0.05, what="0.05 nats")),
    ("decoder_lm", "*bits_per_byte*", _PPL_FAMILY),
    ("decoder_lm", "*byte_perplexity*", _PPL_FAMILY),
    ("decoder_lm", "*word_perplexity*", _PPL_FAMILY),
    ("decoder_lm", "*perplexity*", _PPL),
    ("decoder_lm", "*cross_entropy*", _NATS),
    ("decoder_lm", "*_nll", _NATS),
    ("decoder_lm", "train_loss", _NATS),
    ("decoder_lm", "*acc*", _FRACTION),
    ("encoder_mlm", "zorro*", Resolution(absolute=2.0, what="2 accuracy points")),
    ("encoder_mlm", "*loss", _NATS),
)


# A per-byte or per-word metric and the token perplexity of the same evaluation.
_SCALED = re.compile(r"^(?P<prefix>.*)_(?P<kind>bits_per_byte|byte_perplexity|word_perplexity)"
                     r"(?P<suffix>.*)$")


def _scaled(metric: str, baseline_mean: float,
            baseline_means: dict[str, float]) -> tuple[float, str] | None:
    """The minimum effect of a per-byte or per-word metric: the change 2% token perplexity makes
    in it, from the baseline's own values (None without the token perplexity beside it)."""
    m = _SCALED.match(metric)
    if m is None or not math.isfinite(baseline_mean) or baseline_mean <= 0:
        return None
    token = baseline_means.get(f"{m['prefix']}_perplexity{m['suffix']}", math.nan)
    if not math.isfinite(token) or token <= 1:
        return None
    step = math.log1p(PERPLEXITY_STEP) / math.log(token)
    what = f"the change 2% of the token perplexity ({token:.4g}) makes"
    if m["kind"] == "bits_per_byte":
        return step * baseline_mean, what
    if baseline_mean <= 1:
        return None
    return math.expm1(step * math.log(baseline_mean)) * baseline_mean, what


def rule_for(task: str, metric: str) -> Resolution | None:
    for t, pattern, rule in RULES:
        if t == task and fnmatch.fnmatchcase(metric, pattern):
            return rule
    return None


def min_effect(task: str, metric: str, declared_relative: float, baseline_mean: float,
               baseline_means: dict[str, float] | None = None) -> tuple[float, str]:
    """The metric's minimum effect in its units and what it is: the larger of the rule's size and
    the record's declared ``min_effect`` (relative to the baseline's mean, absolute when that mean
    is 0 or unknown). ``baseline_means``: the baseline's mean of every metric of the task, for
    the metrics whose size comes from another's (per byte or per word from per token)."""
    if math.isnan(baseline_mean) or baseline_mean == 0:
        declared = declared_relative
    else:
        declared = declared_relative * abs(baseline_mean)
    rule = rule_for(task, metric)
    scaled = _scaled(metric, baseline_mean, baseline_means or {}) if rule is _PPL_FAMILY else None
    size, what = scaled or ((rule.size(baseline_mean), rule.what) if rule else (0.0, ""))
    if size <= declared:
        return declared, "the task's declared minimum effect"
    return size, what
