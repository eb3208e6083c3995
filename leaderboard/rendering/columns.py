"""Every column a release shows, defined once: its header, what it means (the HTML header's
``title`` and the markdown release's column legend) and its format; and which rows a track's
table shows. A title names the statistic behind its column by the name
:data:`leaderboard.method.stats.METHODS` gives it, so the page, the markdown and the statistics
module say the same thing."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..method.board import ran
from ..method.stats import METHODS
from .text import missing


@dataclass(frozen=True)
class Field:
    """A results.json field as a column: its header, its header's ``title`` (what it means and
    which direction is better) and its format: ``ci`` (value and interval, from ``lo``/``hi``),
    ``num``, ``delta`` (signed), ``p``, ``int``, ``rank`` (from ``lo``/``hi``), ``text``.
    ``decimals`` fixes the decimal places; by default the page picks them per column from the
    values. ``methods``: the keys of :data:`~leaderboard.method.stats.METHODS` the title names."""

    key: str
    label: str
    title: str
    fmt: str = "num"
    lo: str | None = None
    hi: str | None = None
    decimals: int | None = None
    methods: tuple[str, ...] = ()


def _fields(*fields: Field) -> dict[str, Field]:
    return {f.key: f for f in fields}


# Row fields (results.json "rows") and overall fields ("overall"), one line each.
FIELDS = {
    "rows": _fields(
        Field("scorer", "scorer", "The attention scoring function (hover for its family and "
              "formula).", "text"),
        Field("mean", "mean [95% CI]", f"Mean over seeds and its 95% "
              f"{METHODS['seed_interval']} over the seed values (grey); the arrow after the "
              "metric says which direction is better. † = over surviving seeds only.", "ci",
              "ci_low", "ci_high", methods=("seed_interval",)),
    Field("normalized", "normalized", f"The mean on the metric's {METHODS['anchors']} (0 = "
          "floor, 1 = ceiling), unclipped: a value below 0 (worse than the trivial predictor or "
          "chance) or above 1 is shown as it is, with its mark.", "num", methods=("anchors",)),
    Field("ci_items_low", "items only", f"Given these trained models: the {METHODS['items_interval']}"
          " of the mean over seeds, one item draw shared by the seeds evaluated on the same items;"
          " how much the evaluation set alone moves the number.", "ci", "ci_items_low",
          "ci_items_high", methods=("items_interval",)),
        Field("n", "n", "Seeds whose cell finished ok with a value; more is better.", "int"),
        Field("delta_vs_baseline", "Δ vs {baseline}", "Mean paired difference to the baseline "
              "on shared seeds; better/worse: corrected p ≤ α in the metric's direction and at "
              "least the metric's minimum effect; within resolution: corrected p ≤ α but smaller "
              "than the minimum effect; tie: not significant and its 95% interval inside ± the "
              "minimum effect; n.s.: not significant.", "delta"),
        Field("p_vs_baseline_holm", "p (Holm)", f"p of the two-sided {METHODS['paired_test']} "
              f"vs the baseline on the per-seed differences, {METHODS['family_correction']}-"
              "corrected across a profile's headline metrics; smaller = stronger evidence of a "
              "difference; better or worse needs both it and p (BH) at most alpha.", "p",
              methods=("paired_test",)),
    Field("p_vs_baseline_bh", "p (BH)", f"p of the {METHODS['paired_test']} vs the baseline, "
          f"{METHODS['metric_correction']}-corrected across the scorers compared on one metric.",
          "p", methods=("paired_test",)),
        Field("p_signflip", "p sign-flip", f"p of the {METHODS['exact_test']} over per-seed "
              "differences (uncorrected); its smallest value is 2^(1-n), so at fewer than six seeds "
              "(0.0625 at five) it cannot reach α = 0.05 and is n/a.", "p",
              methods=("exact_test",)),
        Field("tier", "tier", "Tier 1 = not distinguishable from the best scorer of this metric "
              f"({METHODS['family_correction']}-corrected {METHODS['paired_test']}s against the "
              "leader, in score order); lower is better. n/a: fewer than two seeds.", "int",
              methods=("paired_test",)),
        Field("rank_low", "rank", "Interval of the scorer's rank from pairwise "
              f"{METHODS['paired_test']}s ({METHODS['family_correction']}-corrected): 1 + the "
              "scorers significantly better, to the count of scorers minus those significantly "
              "worse; 1 = best, lower is better.", "rank", "rank_low", "rank_high",
              methods=("paired_test",)),
        Field("failures", "failures", "Cells that diverged, went nan/oom/timeout/error or "
              "lacked the metric; 0 is best.", "text"),
        Field("provenance", "provenance", "Date, harness git commit and hardware of the "
              "records (click to expand).", "text"),
    ),
    "overall": _fields(
        Field("scorer", "scorer", "The attention scoring function (hover for its family and "
              "formula).", "text"),
        Field("poi", "P(better than {baseline}) [95% CI]", "The headline: the probability "
              "that a seed of this scorer beats a seed of the baseline by more than the metric's "
              "minimum effect (ties within it count half), per headline metric, averaged over "
              f"the task's metrics and then the tasks; 0.5 = as good as the baseline. Its 95% "
              f"{METHODS['overall_headline_interval']} (grey); higher is better.", "ci",
              "poi_low", "poi_high", methods=("overall_headline_interval",)),
        Field("score", "normalized score [95% CI]", "Beside the headline, how far from floor "
              f"to ceiling: the mean over tasks of the task's normalized headline value "
              f"({METHODS['anchors']}: 0 = the task's floor, chance or the trivial predictor; 1 = "
              "its ceiling, perfect), a task's mean over seeds clipped to [0, 1] as a mean, with "
              f"its 95% {METHODS['overall_interval']} clipped to [0, 1] (grey). It weighs how far "
              "a scorer is from the baseline, where the headline counts how often it is ahead; "
              "higher is better.", "ci", "ci_low", "ci_high",
              methods=("overall_interval", "anchors")),
        Field("tier", "tier", "Tier 1 = not statistically distinguishable from the best "
              f"headline ({METHODS['family_correction']}-corrected two-sided "
              f"{METHODS['overall_headline_interval']} tests of the headline's difference, "
              "step by step); lower is better.", "int",
              methods=("overall_headline_interval",)),
        Field("rank_low", "rank", "Interval of the scorer's rank from the same pairwise "
              f"tests of the headline ({METHODS['overall_headline_interval']}, "
              f"{METHODS['family_correction']}-corrected); "
              "1 = best, lower is better.", "rank", "rank_low", "rank_high",
              methods=("overall_headline_interval",)),
    Field("poi_tasks", "P(better) per task", "The headline's value on each task: the "
          "probability that a seed of this scorer beats one of the baseline's on that task.",
          "text"),
    Field("rank_without", "overall rank if a task is left out", "The scorer's rank by the "
          "headline recomputed with each task left out in turn (not a rank on that task): an "
          "overall that one task decides moves here.", "text"),
    Field("outside_anchors", "outside [0, 1]", "Tasks where the scorer's normalized score lies "
          f"outside its {METHODS['anchors']} (below the floor or above the ceiling), shown as they "
          "are, with their mark.", "text", methods=("anchors",)),
        Field("n_tasks", "tasks", "Quality tasks in the score; a task whose cells all failed "
              "counts 0, n/a tasks do not count; a headline metric the scorer cannot report "
              "(n/a, named) is left out of its task score.", "int"),
        Field("tier1_tasks", "tier-1 tasks", "Tasks (by headline metric) where the scorer is in "
              "tier 1; higher is better.", "int"),
        Field("n_failed", "failed cells", "Failed cells of all the scorer's cells, skipped ones "
              "counted (by failure kind); 0 is best.", "text"),
        Field("provenance", "provenance", "Date, harness git commit and hardware of the "
              "records (click to expand).", "text"),
    ),
}
# Claims (results.json "claims", when present): one paper claim tested on this release.
CLAIM_FIELDS = _fields(
    Field("id", "id", "Identifier of the claim.", "text"),
    Field("claim", "claim", "What the paper claims, in one sentence.", "text"),
    Field("verdict", "verdict", "supported: a significant effect of at least the claim's "
          "practical size in the claimed direction; contradicted: one the other way; not "
          "supported: neither; premise absent: the baseline does not show what makes the claim "
          "testable at this profile (the reason gives the measured value); uninformative: the "
          "baseline shows the metric cannot tell at this profile; degenerate: every seed of "
          "both gives the same value; not run: no records.",
          "text"),
    Field("effect", "effect [95% CI]", "Measured difference scorer − baseline on the metric, "
          f"with its 95% {METHODS['seed_interval']} over the per-seed differences (grey); its "
          "sign is read with the direction column.", "ci", "ci_low", "ci_high",
          methods=("seed_interval",)),
    Field("p", "p", f"p of the {METHODS['paired_test']} ({METHODS['family_correction']}-"
          "corrected); smaller = stronger evidence.", "p", methods=("paired_test",)),
    Field("detectable", "detectable", "Smallest difference the seeds run could detect "
          f"({METHODS['power']}, 80%); an effect below it is not evidence of no effect. "
          "Smaller is better.", "num", methods=("power",)),
    Field("n_seeds", "seeds", "Seeds in the test; more is better.", "int"),
    Field("reason", "why", "Why the verdict: what is missing (not run), why the metric cannot "
          "tell at this profile (uninformative), why there is nothing to test (degenerate), or "
          f"the difference detectable at the verdict's {METHODS['family_correction']}-corrected "
          "level (not supported).", "text"),
    Field("scorer", "scorer", "The scorer the claim is about.", "text"),
    Field("baseline", "baseline", "What the scorer is compared with.", "text"),
    Field("task", "task", "Task the claim is tested on.", "text"),
    Field("metric", "metric", "Metric compared.", "text"),
    Field("direction", "direction", "Which direction of the metric the claim says is better.",
          "text"),
    Field("test", "test", "Statistical test used.", "text"),
    Field("paper", "paper", "What the paper reports (value or reference).", "text"),
    Field("profile", "profile", "Suite profile the records come from.", "text"),
    Field("source", "source", "Where the claim is stated.", "text"),
)
# Columns only the markdown tables show.
MARKDOWN_FIELDS = _fields(
    Field("min_effect", "min effect", "The practical minimum effect the claim declared before "
          "any run; a significant effect smaller than this is not support.", "num"),
)


# A task run by at most this many scorers shows every metric in its track's table.
DETAIL_MAX_SCORERS = 4


def shown_rows(board, track: str) -> list[dict]:
    """A track's rows as shown: headline metrics, or every metric of a task without one or run by
    at most ``DETAIL_MAX_SCORERS`` scorers (e.g. the decoder's benchmarks, Zorro's paradigms)."""
    rows = [r for r in board.rows.to_dict(orient="records") if r["track"] == track]
    has_headline = {(r["profile"], r["task"]) for r in rows if r["headline"]}
    scorers: dict[tuple[str, str], set] = {}
    for r in rows:
        if ran(r):
            scorers.setdefault((r["profile"], r["task"]), set()).add(r["scorer"])
    return [r for r in rows if r["headline"] or (r["profile"], r["task"]) not in has_headline
            or len(scorers.get((r["profile"], r["task"]), ())) <= DETAIL_MAX_SCORERS]


def field(frame: str, key: str) -> Field:
    """The one definition of a column: of ``frame`` ("rows", "overall" or "claims"), else one
    only the markdown shows."""
    known = CLAIM_FIELDS if frame == "claims" else FIELDS[frame]
    return known[key] if key in known else MARKDOWN_FIELDS[key]


def labels(frame: str, keys: Iterable[str], baseline: str = "") -> list[str]:
    """The headers of ``keys`` as every view of the release names them."""
    return [field(frame, k).label.format(baseline=baseline) for k in keys]


def scorer_order(overall: list[dict], profile: str, rows: list[dict]) -> tuple[list[str], str]:
    """The scorers of a track's headline matrix (``rows``: the track's rows at ``profile``) and
    what orders them: the overall's order (tier, then score) where it has them all, else the
    first headline metric's mean, best first."""
    scorers = sorted({r["scorer"] for r in rows})
    ranked = [r["scorer"] for r in overall if r["profile"] == profile]
    if set(scorers) <= set(ranked):
        return [s for s in ranked if s in scorers], "overall order (tier, then score)"
    heads = [r for r in rows if r["headline"]] or rows
    first = (heads[0]["task"], heads[0]["metric"])
    sign = 1.0 if heads[0]["direction"] == "lower" else -1.0
    mean = {r["scorer"]: r["mean"] for r in heads if (r["task"], r["metric"]) == first}
    order = sorted(scorers, key=lambda s: (missing(mean.get(s)),
                                           0.0 if missing(mean.get(s)) else sign * mean[s],
                                           s))
    return order, f"{first[0]} · {first[1]}, best first"
