"""Markdown views of a :class:`~leaderboard.aggregate.Board` (tables by tabulate): the release
README and the root LEADERBOARD.md. Everything shown is read from the Board, nothing recomputed."""
from __future__ import annotations

import math
from typing import Any, Iterable

import pandas as pd
from tabulate import tabulate

from .records import TRACKS

TRACK_TITLES = {"icl": "In-context learning (ICL)", "decoder": "Decoder LM",
                "encoder": "Encoder LM", "probe": "Probes", "cost": "Cost"}
MESSAGE_WIDTH = 120

METHOD = """\
- **Rows** are (profile, task, metric, scorer). *n* counts the seeds whose cell finished `ok`
  with a value; mean and std are over those seeds. Headline metrics are shown here, and every
  metric of a task run by at most {detail} scorers; all of them are in `results.csv` /
  `results.json`.
- **95% CI**: percentile bootstrap ({n_boot} replicates), two-stage where per-item outcomes exist
  (resample seeds, then items within each drawn seed), over seeds otherwise. Needs n >= 2.
- **Δ vs {baseline}** is the mean paired difference on the seeds both ran; **p** is a paired
  two-stage bootstrap test on those seeds and their items (two-sided), Holm-corrected per scorer
  across the tasks and headline metrics of a profile. *better* / *worse* mark Holm p <= {alpha}
  in the metric's declared direction. **p sign-flip** is the exact sign-flip permutation test
  over the per-seed differences (not corrected): it assumes nothing about the seed distribution
  but cannot go below 2^(1-n) (0.25 at three seeds), so read a small bootstrap p with a large
  sign-flip p as "consistent on these seeds, too few seeds to generalize".
- **Tier**: among the scorers not yet placed, the best mean leads a tier; every other scorer is
  compared with the leader (paired bootstrap difference from one joint bootstrap that resamples
  the same seeds and items for all scorers), p-values Holm-corrected within the step; scorers
  with adjusted p > {alpha} share the leader's tier. Repeat with the rest. A scorer with fewer
  than two seeds gets no tier. **Rank** is the 95% interval of the scorer's rank in those
  bootstrap replicates (1 = best), over the replicates where every scorer drew one of its seeds.
- **Failures** (diverged / nan / oom / timeout / error, and `null` for a missing metric) are
  counted per row; a mean marked † is over the surviving seeds only.
- **Overall**: per profile, over the quality tasks (ICL, decoder, encoder, probes) that every
  scorer has records of (a task run by some scorers only is named under the table), each task's
  headline metrics are normalized (1 = best scorer mean, 0 = worst) and averaged; the score is
  the mean over the tasks the scorer ran (a task where all its cells failed counts 0; tasks it
  cannot run do not count). CI, rank and tier as above, from the same bootstrap replicates.
- **icl_mqar**: multi-query associative recall (Zoology): a decoder trained from scratch at one
  length recalls the value of each queried key; accuracy on a pairs x length grid that includes
  longer sequences and more pairs than trained (floor: guessing one of the context's values).
- **Length generalization** (`decoder_lm`): held-out perplexity in rolling windows of 1x, 2x and
  4x the training context over the same tokens, RoPE as trained (floor: the unigram perplexity);
  a scorer defined only up to its training length has no value beyond it.
- **Superseded** records (older task or scorer version than the newest seen) are listed, not
  used. Each row's date, harness git sha and hardware come from its records' provenance.
"""


def _isnan(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def num(x: Any) -> str:
    """4 significant digits; n/a for a missing value."""
    return "n/a" if _isnan(x) else f"{float(x):.4g}"


def pval(p: Any) -> str:
    if _isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def cell_text(text: Any) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    s = "" if _isnan(text) else str(text)
    return " ".join(s.split()).replace("|", "\\|")


def short_shas(shas: Iterable[str]) -> str:
    out = []
    for sha in shas or []:
        dirty = sha.endswith("-dirty")
        out.append(sha.removesuffix("-dirty")[:7] + ("+dirty" if dirty else ""))
    return ", ".join(out) or "unknown"


def joined(values: Iterable[str]) -> str:
    return "; ".join(values or []) or "unknown"


def failures_text(failures: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (failures or {}).items()) or "0"


def interval(lo: Any, hi: Any, integer: bool = False) -> str:
    if _isnan(lo) or _isnan(hi):
        return "n/a"
    if integer:
        return f"{int(lo)}" if lo == hi else f"{int(lo)}-{int(hi)}"
    return f"[{num(lo)}, {num(hi)}]"


def mean_text(row: dict) -> str:
    if not row["n"]:
        return "all failed" if row["n_failed"] + row["n_null"] else "skipped"
    text = num(row["mean"])
    if not _isnan(row["ci_low"]):
        text += " " + interval(row["ci_low"], row["ci_high"])
    return text + (" †" if row["survivors_only"] else "")


def tier_text(row: dict) -> str:
    return "n/a" if _isnan(row["tier"]) else str(row["tier"])


def score_text(row: dict) -> str:
    """An overall row's normalized score and its CI."""
    text = num(row["score"])
    if not _isnan(row["ci_low"]):
        text += " " + interval(row["ci_low"], row["ci_high"])
    return text


def tasks_text(row: dict) -> str:
    text = str(row["n_tasks"])
    if row["tasks_failed"]:
        text += f" ({row['tasks_failed']} all failed)"
    if row["tasks_skipped"]:
        text += f" (+{row['tasks_skipped']} n/a)"
    return text


def failed_text(row: dict) -> str:
    text = f"{row['n_failed']}/{row['n_cells']}"
    if row["failures"]:
        text += f" ({failures_text(row['failures'])})"
    return text


def delta_text(row: dict, baseline: str) -> str:
    if row["scorer"] == baseline:
        return "baseline"
    if _isnan(row["delta_vs_baseline"]):
        return "n/a"
    label = row["vs_baseline"]
    return f"{row['delta_vs_baseline']:+.4g}" + (f" ({label})" if label else "")


def _table(rows: list[list], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


DETAIL_MAX_SCORERS = 4


def shown_rows(board, track: str) -> list[dict]:
    """A track's rows as shown: headline metrics, or every metric of a task without one or run by
    at most ``DETAIL_MAX_SCORERS`` scorers (e.g. the decoder's benchmarks, Zorro's paradigms)."""
    rows = [r for r in _records(board.rows) if r["track"] == track]
    has_headline = {(r["profile"], r["task"]) for r in rows if r["headline"]}
    scorers: dict[tuple[str, str], set] = {}
    for r in rows:
        scorers.setdefault((r["profile"], r["task"]), set()).add(r["scorer"])
    return [r for r in rows if r["headline"] or (r["profile"], r["task"]) not in has_headline
            or len(scorers[(r["profile"], r["task"])]) <= DETAIL_MAX_SCORERS]


def track_table(board, track: str) -> str:
    rows = shown_rows(board, track)
    if not rows:
        return "No records for this track in this release."
    baseline = board.meta.get("baseline", "softmax")
    multi = len({r["profile"] for r in rows}) > 1
    headers = (["profile"] if multi else []) + [
        "task", "metric", "scorer", "mean [95% CI]", "n", f"Δ vs {baseline}", "p (Holm)",
        "p sign-flip", "tier", "rank", "failures", "date", "harness", "hardware"]
    body = []
    for r in rows:
        arrow = "↓" if r["direction"] == "lower" else "↑"
        body.append(([r["profile"]] if multi else []) + [
            cell_text(r["task"]), f"{cell_text(r['metric'])} {arrow}", cell_text(r["scorer"]),
            mean_text(r), str(r["n"]), delta_text(r, baseline), pval(r["p_vs_baseline_holm"]),
            pval(r["p_signflip"]), tier_text(r),
            interval(r["rank_low"], r["rank_high"], integer=True), failures_text(r["failures"]),
            r["date"], short_shas(r["git_sha"]), cell_text(joined(r["hardware"]))])
    return _table(body, headers)


def outside_overall(board) -> list[str]:
    """One line per (profile, quality task) that the overall leaves out: run by some scorers."""
    in_overall = {(r["profile"], r["task"]) for r in _records(board.task_scores)}
    ran: dict[tuple[str, str], set] = {}
    for r in _records(board.rows):
        if r["track"] != "cost":
            ran.setdefault((r["profile"], r["task"]), set()).add(r["scorer"])
    return [f"{task} ({profile}): run by {', '.join(sorted(scorers))} only, so shown in its "
            f"track and not in the overall" for (profile, task), scorers in sorted(ran.items())
            if (profile, task) not in in_overall and any(
                p == profile for p, _ in in_overall)]


def overall_table(board) -> str:
    rows = _records(board.overall)
    if not rows:
        return "No quality-track records in this release."
    multi = len({r["profile"] for r in rows}) > 1
    headers = (["profile"] if multi else []) + [
        "tier", "scorer", "score [95% CI]", "rank", "tasks", "tier-1 tasks", "failed cells",
        "date", "harness", "hardware"]
    body = []
    for r in rows:
        body.append(([r["profile"]] if multi else []) + [
            tier_text(r), cell_text(r["scorer"]), score_text(r),
            interval(r["rank_low"], r["rank_high"], integer=True), tasks_text(r),
            str(r["tier1_tasks"]), failed_text(r), r["date"], short_shas(r["git_sha"]),
            cell_text(joined(r["hardware"]))])
    return _table(body, headers)


def failed_cells_table(board) -> str:
    rows = _records(board.failed_cells)
    if not rows:
        return "Every cell finished `ok`."
    body = []
    for r in rows:
        message = cell_text(r["message"])
        if len(message) > MESSAGE_WIDTH:
            message = message[:MESSAGE_WIDTH - 1] + "…"
        body.append([r["profile"], cell_text(r["task"]), cell_text(r["scorer"]), str(r["seed"]),
                     cell_text(r["status"]), "" if _isnan(r["step"]) else str(r["step"]),
                     message, r["date"]])
    return _table(body, ["profile", "task", "scorer", "seed", "status", "step", "message", "date"])


def superseded_table(board) -> str:
    rows = _records(board.superseded)
    if not rows:
        return "None."
    return _table([[cell_text(r["task"]), str(r["task_version"]), cell_text(r["scorer"]),
                    str(r["scorer_version"]), r["profile"], str(r["n_cells"]),
                    cell_text(r["reason"])] for r in rows],
                  ["task", "task v", "scorer", "scorer v", "profile", "cells", "why"])


def problems_table(board) -> str:
    rows = _records(board.problems)
    if not rows:
        return "None."
    return _table([[cell_text(r["path"]), "skipped" if r["skipped"] else "partly used",
                    cell_text(r["reason"])] for r in rows], ["file", "effect", "reason"])


def header_lines(board) -> list[str]:
    m = board.meta
    return [
        f"- Records: {m['n_used']} used of {m['n_files']} files ({m['n_superseded']} superseded, "
        f"{m['n_problems']} problems listed below); profiles: {', '.join(m['profiles']) or 'none'}",
        f"- Dates: {m['date_first']} to {m['date_last']}",
        f"- Harness (git): {short_shas(m['git_sha'])}; "
        f"scorebench {', '.join(m['harness_version'])}",
        f"- Hardware: {cell_text(joined(m['hardware']))}",
        f"- Baseline for paired tests: `{m['baseline']}`; α = {m['alpha']}",
    ]


def plot_links(plots: list[str], prefix: str = "") -> list[str]:
    return [f"![{p.rsplit('/', 1)[-1].removesuffix('.png')}]({prefix}{p})" for p in plots]


def board_sections(board, plots: list[str], prefix: str = "", level: int = 2) -> list[str]:
    """The body shared by the release README and LEADERBOARD.md."""
    h = "#" * level
    outside = outside_overall(board)
    out = [f"{h} Overall", "", overall_table(board), ""]
    out += [f"- {line}" for line in outside] + ([""] if outside else [])
    for track in TRACKS:
        out += [f"{h} {TRACK_TITLES[track]}", "", track_table(board, track), ""]
    out += [f"{h} Failed and skipped cells", "", failed_cells_table(board), "",
            f"{h} Superseded records", "", superseded_table(board), "",
            f"{h} Records not used", "", problems_table(board), ""]
    if plots:
        out += [f"{h} Plots", ""] + [line for p in plot_links(plots, prefix) for line in (p, "")]
    return out


def release_readme(board, plots: list[str]) -> str:
    m = board.meta
    lines = [f"# scorebench leaderboard: {m['release']}", ""] + header_lines(board) + [""]
    lines += ["Files: `results.json` (everything below, and all metrics), `results.csv` (one row "
              "per profile, task, metric and scorer), `plots/`.", ""]
    lines += board_sections(board, plots)
    lines += ["## Method", "", method_text(m)]
    return "\n".join(lines).rstrip() + "\n"


def method_text(meta: dict) -> str:
    return METHOD.format(n_boot=meta["n_boot"], baseline=meta["baseline"], alpha=meta["alpha"],
                         detail=DETAIL_MAX_SCORERS)


def leaderboard_index(latest, latest_link: str, plots: list[str], plot_prefix: str,
                      releases: list[tuple[dict, str]]) -> str:
    """The root LEADERBOARD.md: the latest release in full, then every release with a link.
    ``releases`` holds (meta, link to its README) newest first."""
    m = latest.meta
    lines = ["# scorebench leaderboard", "",
             f"Latest release: **[{m['release']}]({latest_link})**", ""] + header_lines(latest)
    lines += [""] + board_sections(latest, plots, prefix=plot_prefix)
    body = [[f"[{cell_text(meta['release'])}]({link})",
             f"{meta['date_first']} to {meta['date_last']}",
             str(meta["n_used"]), ", ".join(meta["profiles"]), short_shas(meta["git_sha"]),
             cell_text(joined(meta["hardware"]))] for meta, link in releases]
    lines += ["## All releases", "",
              _table(body, ["release", "dates", "records", "profiles", "harness", "hardware"]), "",
              "## Method", "", method_text(m)]
    return "\n".join(lines).rstrip() + "\n"
