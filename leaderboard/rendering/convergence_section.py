"""Level, speed and reliability of the tasks trained to convergence (``meta["convergence"]``,
:mod:`leaderboard.method.convergence`) and whether each headline verdict against the baseline
holds at the neighbouring learning rates (``meta["neighbours"]``,
:mod:`leaderboard.method.neighbours`): the README's section and the texts the page shows too.

Per task, one row per scorer: the level (each headline metric at the best-validation
checkpoint, its mean with the front page's mark against the baseline, from the board's rows),
the speed (mean steps to the target over the seeds that reach it, with its interval, and how
many did not), the reliability (the fraction of seeds that reach the target, with its exact
binomial interval; a scorer whose seeds split says so), how the seeds stopped, and the
neighbouring-rate words beside each verdict."""
from __future__ import annotations

from ..method.convergence import CAP_MULTIPLE, cap_multiple, unconverged
from ..method.stats import METHODS
from .markdown_layout import block, fitted, wrap
from .summary import task_headlines
from .text import column_format, markdown_text, missing, steps, verdict_mark

# Each column of a task's table: its header and what it means (the page's header title).
COLUMNS = (
    ("scorer", "The attention scoring function."),
    ("level (best checkpoint)", "Each headline metric at the best-validation checkpoint, its "
     "mean over seeds and its mark against the baseline."),
    ("speed: steps to the target [95% CI]", "Steps to the target of the validation metric: the "
     f"mean over the seeds that reach it with the 95% {METHODS['speed_interval']} (steps are "
     "positive and right-skewed), and how many seeds do not; lower is faster."),
    ("reliability [exact 95% CI]", "The fraction of seeds that reach the target, with its exact "
     "(Clopper-Pearson) 95% interval; a scorer whose seeds split says so."),
    ("stops", "How the seeds stopped: converged, at the cap (of those that learned: with no "
              "gain left, their best value within the rule's tolerance of the metric's best "
              "possible value; or learned, not converged), not learned within the cap."),
    ("verdict's sign at the neighbouring rates", "Whether the sign of each verdict against the "
     "baseline (the direction of the mean difference on the tuning seeds, not its significance) "
     "holds at the scorer's neighbouring learning rates, and at the baseline's against the "
     "scorer's chosen rate; a chosen rate at an end of its grid has a neighbour on one side "
     "only."),
)
# The columns whose text carries a record's strings (scorer labels, metric names).
RECORD_TEXT = {"scorer", "level (best checkpoint)", "verdict's sign at the neighbouring rates"}


def speed_text(s: dict) -> str:
    speed = s["speed"]
    if speed is None:
        return f"none of {s['seeds']} reached it"
    text = steps(speed['mean'])
    if not missing(speed.get("lo")) and not missing(speed.get("hi")):
        text += f" [{steps(speed['lo'])}, {steps(speed['hi'])}]"
    if s["not_reached"]:
        text += f"; {s['not_reached']} of {s['seeds']} did not reach it"
    return text


def reliability_text(s: dict) -> str:
    split = (f"; seeds split: {s['reached']} of {s['seeds']} reach the target" if s["split"]
             else "")
    return f"{s['reliability']:.2f} [{s['reliability_lo']:.2f}, {s['reliability_hi']:.2f}]{split}"


def stops_text(s: dict) -> str:
    learned = [f"{n} of them {what}" for n, what in ((s["no_gain_left"], "with no gain left"),
                                                     (unconverged(s), "learned, not converged"))
               if n]
    cut = f" ({'; '.join(learned)})" if learned else ""
    never = f", {s['not_learned']} not learned within the cap" if s["not_learned"] else ""
    return f"{s['converged']} converged, {s['cap']} at the cap{cut}{never}"


def _headline_rows(board, task: str) -> dict[str, list[dict]]:
    """scorer -> the task's headline rows (its first profile), in the board's metric order."""
    heads = task_headlines(board)
    profile = next((p for p, t in sorted(heads) if t == task), None)
    out: dict[str, list[dict]] = {}
    for r in board.rows.to_dict(orient="records"):
        if r["task"] == task and r["profile"] == profile and r["headline"]:
            out.setdefault(r["scorer"], []).append(r)
    return out


def level_text(rows: list[dict], baseline: str, formats: dict) -> str:
    """Each headline metric's mean in its column's format (the track matrix's), with its mark."""
    parts = []
    for r in rows:
        value = "n/a" if not r["n"] else formats[r["metric"]](r["mean"])
        mark = "" if r["scorer"] == baseline or not r["n"] else f" {verdict_mark(r)}"
        parts.append(f"{r['metric']} {value}{mark}")
    return "; ".join(parts) or "n/a"


def neighbour_text(words: dict[str, str] | None) -> str:
    return "; ".join(f"{metric}: {w}" for metric, w in sorted((words or {}).items())) or "–"


def task_rows(board, task: str) -> list[list[str]]:
    """The cells of one task's table, one list per scorer (the columns of COLUMNS)."""
    meta = board.meta
    baseline = meta.get("baseline", "softmax")
    heads = _headline_rows(board, task)
    by_metric: dict[str, list[dict]] = {}
    for r in (r for rows in heads.values() for r in rows):
        by_metric.setdefault(r["metric"], []).append(r)
    formats = {m: column_format(rows, "mean", "ci_low", "ci_high") for m, rows in by_metric.items()}
    near = (meta.get("neighbours") or {}).get(task, {})
    return [[label, level_text(heads.get(label, []), baseline, formats), speed_text(s),
             reliability_text(s), stops_text(s), neighbour_text(near.get(label))]
            for label, s in sorted(meta["convergence"][task]["scorers"].items())]


def method_text(board) -> str:
    targets = "; ".join(f"{task}: target {c['target']:g}, cap {steps(c['cap'])} steps"
                        for task, c in sorted(board.meta["convergence"].items()))
    return ("The synthetic tasks train until their validation metric stops improving, or to a "
            f"cap ({targets}), and report the checkpoint with the best validation value. Three "
            "numbers per scorer, apart: the **level**, each headline metric at that checkpoint "
            "with its mark against the baseline (▲ / ▼ better / worse, · no verdict, – "
            "uninformative; the tests are the board's); the **speed**, the steps to the target "
            "of the validation metric, the mean over the seeds that reach it with the 95% "
            f"{METHODS['speed_interval']} (steps to a target are positive and right-skewed: "
            "most seeds arrive together, a slow one much later), and how many seeds do not; "
            "the **reliability**, the fraction of seeds "
            "that reach the target with its exact (Clopper-Pearson) 95% interval. A scorer "
            "whose seeds "
            "split reads so: its mean level is then a mean that no seed has. A seed the cap "
            "stopped after it learned but before the rule saw it converge may not have reached "
            "its level: where most of a scorer's seeds did, a verdict on its level is partly one "
            "on its speed. A seed whose best value was within the rule's tolerance of the "
            "metric's best possible value (an accuracy of 1, a loss of 0) had no gain left: "
            "only the rule's wait after a best kept it training. The stops column counts it at "
            "the cap; the cap's measurement and What changed count it as converged at its best "
            "step. Beside each verdict, whether its sign holds at the scorer's neighbouring "
            "learning rates (the sweep cells on the tuning seeds against the baseline at its "
            "chosen rate): \"holds at k/k neighbouring rates\" or \"rate-sensitive (holds at "
            "j/k)\", with why fewer than two were checked: the chosen rate ends its grid (no rate "
            "past it was run) or a neighbour had too few seeds (left out); then the same the "
            "other way, the baseline at its neighbouring rates against the scorer at its chosen "
            "one (\"at softmax's 2/2\"). A verdict holds only where it holds on both sides.")


def cap_text(board) -> str | None:
    """Per task, the cap against the baseline's convergence at its chosen rate (the protocol
    holds it to at least CAP_MULTIPLE times the baseline's median convergence step)."""
    baseline = board.meta.get("baseline", "softmax")
    parts = []
    for task, c in sorted(board.meta["convergence"].items()):
        multiple = cap_multiple(c, baseline)
        if multiple is None:
            continue
        s = c["scorers"][baseline]
        seeds = ", ".join(steps(step) for step in s["best_steps"])
        beyond = s["cap"] - s["no_gain_left"]
        at_cap = ((f"; {s['no_gain_left']} reached the cap with no gain left, counted at its "
                   "best step" if s["no_gain_left"] else "")
                  + (f"; {beyond} ran to the cap unconverged, counted as slower than every other "
                     "seed" if beyond else ""))
        measured = (f"the median seed ran to the cap, {steps(c['cap'])} steps, unconverged"
                    if not multiple else
                    f"the cap, {steps(c['cap'])} steps, is {multiple:.1f}x the median seed's "
                    f"{steps(s['median_converged'])}")
        short = (f", below the protocol's {CAP_MULTIPLE}x: a scorer that slow reads \"not "
                 "learned within the cap\", not \"slower\"" if multiple < CAP_MULTIPLE else "")
        parts.append(f"{task}: {measured}{short} (the best step of each seed: {seeds}{at_cap})")
    if not parts:
        return None
    return (f"The caps against {baseline}'s convergence, the step at which it reached the best "
            "value the rule then stopped it at (or one that left no gain), on its reporting "
            "seeds: " + "; ".join(parts) + ".")


def markdown(board) -> str:
    """The release's section on level, speed and reliability; empty without convergence."""
    if not board.meta.get("convergence"):
        return ""
    lines = ["## Level, speed and reliability", "", wrap(method_text(board)), ""]
    caps = cap_text(board)
    if caps:
        lines += [wrap(markdown_text(caps)), ""]
    headers = [h for h, _ in COLUMNS]
    for task in sorted(board.meta["convergence"]):
        body = [[markdown_text(c) if h in RECORD_TEXT else c for h, c in zip(headers, cells)]
                for cells in task_rows(board, task)]
        lines += [f"### {markdown_text(task)}", ""] + block(fitted(body, headers))
    return "\n".join(lines)
