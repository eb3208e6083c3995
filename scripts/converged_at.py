"""Where the stopping rule would stop runs whose dense validation curves are recorded: the
measurement behind a profile's ``softmax_converged_at`` and its cap.

Run the task with ``stop = "converged"``, a long cap, a patience no run reaches and the
``eval_every`` of the protocol (the records then hold the curve of every evaluation), then replay
the rule (tasks/stopping.py) on those curves with the profile's settings:

    python scripts/converged_at.py RESULTS_DIR --task icl_mqar --patience 10 \\
        --patience-fraction 0.5 --tolerance 0.005 --learned-at 0.5 --target 0.9

Per record: the scorer, the seed, the learning rate, where the rule stops and why, the best step
and value, and the step at which the target was first reached; then, per scorer, the median stop
and the median best step. A run the rule has not stopped by its last recorded evaluation reads
"cap": train it longer to find its stop.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard.loading.records import load_records  # noqa: E402
from tasks.stopping import Plateau, replay  # noqa: E402


def replayed(block: dict, direction: str, args) -> tuple[Plateau, bool]:
    """The rule with the arguments' settings after the run of ``block``, and whether it stopped."""
    rule = Plateau.of(args, direction)
    return rule, replay(rule, block["curve"]) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results")
    parser.add_argument("--task", required=True)
    parser.add_argument("--patience", type=int, required=True)
    parser.add_argument("--patience-fraction", type=float, default=0.0)
    parser.add_argument("--tolerance", type=float, default=0.0)
    parser.add_argument("--learned-at", type=float)
    parser.add_argument("--target", type=float)
    args = parser.parse_args(argv)
    stops: dict[str, list[int]] = {}
    bests: dict[str, list[int]] = {}
    print("scorer\tseed\tlr\tstop\treason\tbest_step\tbest_value\ttarget_step")
    for r in sorted(load_records(args.results).records, key=lambda r: (r.scorer_label, r.seed)):
        if r.task != args.task or r.status != "ok" or not r.stopping:
            continue
        direction = (r.validation or {}).get("direction", "higher")
        runs = [replayed(b, direction, args) for b in r.stopping]
        rules = [rule for rule, _ in runs]
        stop = max(rule.step[-1] for rule in rules)
        reason = "converged" if all(stopped for _, stopped in runs) else "cap"
        stops.setdefault(r.scorer_label, []).append(stop)
        bests.setdefault(r.scorer_label, []).append(max(rule.best_step or 0 for rule in rules))
        target = [rule.target_step for rule in rules]
        print(f"{r.scorer_label}\t{r.seed}\t{r.config.get('lr'):g}\t{stop}\t{reason}\t"
              f"{max(rule.best_step or 0 for rule in rules)}\t"
              f"{' '.join(f'{rule.best_value:.4f}' for rule in rules)}\t"
              f"{None if None in target else max(target)}")
    for label, values in sorted(stops.items()):
        print(f"# {label}: median stop {statistics.median(values):g}, median best step "
              f"{statistics.median(bests[label]):g} over {len(values)} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
