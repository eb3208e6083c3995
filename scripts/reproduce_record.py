"""Retrain the first steps of recorded cells at this checkout and compare them, bit for bit, with
their records.

    python scripts/reproduce_record.py leaderboard/records/icl_mqar/ssa/79445ff8fedb0fec.json.gz
    python scripts/reproduce_record.py RECORD... --steps 300 --capability AVX2

For a record of a task trained to convergence (a stopping block with its dense validation
curve), the cell's run is started again at this checkout: the same config, seed, fast paths,
accumulation and thread count, on the CPU kernels of the record's ``provenance.cpu_capability``
(``--capability`` for records from before it was kept; a capability above this host's cannot be
reached). After ``--steps`` optimizer steps it ends, and every validation evaluation and
training-loss window up to there, and the first training loss, are compared with the record's.
Identical values say that the record's run is this checkout's run on its host; a difference
within a few hundred steps says the code or the kernels differ (chaotic training amplifies a
rounding difference: curves of one run on AVX2 and AVX512 kernels part by step 100-400).

Each record runs in a process of its own, as ``ATEN_CPU_CAPABILITY`` is read when torch loads.
The exit status is 1 when a record differs.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def training_blocks(record: dict) -> dict[str, dict]:
    """The record's training blocks by model, in training order: ``{"": block}`` for a task that
    trains one model, ``{"every": ..., "some": ...}`` for icl_quantifiers' two."""
    train = record.get("extra", {}).get("train", {})
    if isinstance(train, dict) and "stopping" in train:
        return {"": train}
    return {name: block for name, block in train.items()
            if isinstance(block, dict) and "stopping" in block}


def _retrained(record: dict, steps: int) -> dict:
    """Per model, the first training loss, the loss windows and the evaluations of ``record``'s
    cell, retrained here for ``steps`` optimizer steps (each model stops there)."""
    import torch

    from leaderboard.loading.schema import Cell
    from suite.cells import config_object
    from suite.runner import seed_everything
    from tasks import RunContext, create_task, icl_training

    prov = record["provenance"]
    torch.set_num_threads(int(prov.get("threads") or 1))
    cell = Cell.from_dict(record["cell"])
    task = create_task(cell.task)
    if int(task.version) != cell.task_version:
        raise SystemExit(f"{cell.task} is version {task.version} at this checkout, the record "
                         f"{cell.task_version}: check out a commit of that version")
    runs: list[dict] = []
    init, stop_after = icl_training.LossLog.__init__, icl_training.BestState.stop_after

    def kept(log, *args, **kwargs):
        init(log, *args, **kwargs)
        runs.append({"log": log, "evaluations": []})

    def stopped(best, steps_done, model):
        seen = len(best.plateau.step)
        ends = stop_after(best, steps_done, model)
        if len(best.plateau.step) > seen:
            runs[-1]["evaluations"].append((steps_done, best.plateau.value[-1]))
        return ends or steps_done >= steps

    icl_training.LossLog.__init__, icl_training.BestState.stop_after = kept, stopped
    ctx = RunContext(device=torch.device("cpu"), workdir=None,
                     accumulation=int(prov.get("accumulation") or 1),
                     fast=prov.get("fast", "off"), sweep=cell.is_sweep)
    seed_everything(cell.seed)
    task.run(cell.scorer, dict(cell.scorer_kwargs), cell.seed, config_object(task, cell.config),
             ctx)
    return {"capability": torch.backends.cpu.get_cpu_capability(),
            "models": [{"first_loss": run["log"].first,
                        "losses": list(zip(run["log"].curve["step"], run["log"].curve["loss"])),
                        "evaluations": run["evaluations"]} for run in runs]}


def compare(record: dict, run: dict, steps: int) -> tuple[bool, str]:
    """Whether ``run`` (:func:`_retrained`) is ``record``'s run up to ``steps``, and a line that
    says so or names the first difference."""
    blocks = training_blocks(record)
    differences, counts = [], {"evaluation": 0, "loss window": 0}
    for (name, train), model in zip(blocks.items(), run["models"]):
        curve = train["stopping"]["curve"]
        recorded = {"evaluation": dict(zip(curve["step"], curve["value"])),
                    "loss window": dict(zip(train["loss_curve"]["step"],
                                            train["loss_curve"]["loss"]))}
        mine = {"evaluation": [(s, v) for s, v in model["evaluations"] if s <= steps],
                "loss window": [(s, v) for s, v in model["losses"] if s < steps]}
        for kind, pairs in mine.items():
            counts[kind] += len(pairs)
            differences += [(s, f"{name} {kind}".strip(), v, recorded[kind].get(s))
                            for s, v in pairs if recorded[kind].get(s) != v]
        if model["first_loss"] != train["first_loss"]:
            differences.append((0, f"{name} first loss".strip(), model["first_loss"],
                                train["first_loss"]))
    if len(run["models"]) != len(blocks):
        differences.append((0, "models trained", len(run["models"]), len(blocks)))
    cell = record["cell"]
    what = (f"{cell['task']} {cell['scorer']} lr {cell['config'].get('lr')} seed {cell['seed']} "
            f"(run by {str(record['provenance'].get('git_sha'))[:7]}), on {run['capability']}")
    models = f" of {len(blocks)} models" if len(blocks) > 1 else ""
    if not differences:
        return True, (f"identical: {what}: {counts['evaluation']} evaluations, "
                      f"{counts['loss window']} loss windows and the first loss{models} up to "
                      f"step {steps:,}")
    step, kind, here, there = min(differences)
    total = sum(counts.values()) + len(blocks)
    return False, (f"DIFFERS: {what}: {len(differences)} of {total} values, first the {kind} at "
                   f"step {step:,}: {here!r} here, {there!r} recorded")


def load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        record = json.load(f)
    if record.get("status") != "ok" or not any(
            "curve" in block["stopping"] for block in training_blocks(record).values()):
        raise SystemExit(f"{path}: not an ok record of a task trained to convergence (it needs "
                         f"a training block with stopping.curve); nothing to compare")
    return record


def reproduce(path: Path, steps: int, capability: str | None) -> bool:
    """Retrain ``path``'s record in a process on its capability; print and return the verdict."""
    record = load(path)
    capability = capability or record["provenance"].get("cpu_capability")
    env = dict(os.environ)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability.lower()
    child = subprocess.run([sys.executable, __file__, "--child", str(path), "--steps", str(steps)],
                           env=env, capture_output=True, text=True)
    if child.returncode != 0:
        raise SystemExit(f"{path}: the retraining failed:\n{child.stderr[-2000:]}")
    run = json.loads(child.stdout.strip().splitlines()[-1])
    if capability and run["capability"] != capability.upper():
        raise SystemExit(f"{path}: the record ran on {capability.upper()} kernels, which this host "
                         f"cannot run (it reached {run['capability']}); reproduce it on such a host")
    same, line = compare(record, run, steps)
    print(f"{path}: {line}")
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, default=500,
                        help="optimizer steps to retrain and compare (default 500)")
    parser.add_argument("--capability", help="the CPU capability of records that do not state "
                        "theirs (AVX2, AVX512, DEFAULT); default: the host's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.child:
        print(json.dumps(_retrained(load(args.records[0]), args.steps)))
        return 0
    verdicts = [reproduce(path, args.steps, args.capability) for path in args.records]
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
