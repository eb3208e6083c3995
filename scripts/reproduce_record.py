"""Retrain the first steps of recorded cells at this checkout and compare them, bit for bit, with
their records.

    python scripts/reproduce_record.py leaderboard/records/icl_mqar/ssa/79445ff8fedb0fec.json.gz
    python scripts/reproduce_record.py RECORD... --steps 300 --capability AVX2

For a record of a task trained to convergence (a stopping block with its dense validation
curve), the cell's run is started again at this checkout: the same config, seed, fast paths,
accumulation and thread count, on the CPU kernels of the record's ``provenance.cpu_capability``
(``--capability`` for records from before it was kept: those of the converged protocol's
re-run started before 2026-12-06 02:33 UTC ran on AVX2 kernels; a capability above this host's
cannot be reached). After ``--steps`` optimizer steps it ends, and every validation evaluation and
training-loss window up to there, and the first training loss, are compared with the record's.
Identical values say that the record's run is this checkout's run on its host; a difference
within a few hundred steps says the code or the kernels differ (chaotic training amplifies a
rounding difference: curves of one run on AVX2 and AVX512 kernels part by step 100-400). The
capability is not all of the kernels: MKL takes other paths on another vendor's CPU, so a record
made on an AMD EPYC with AVX512 differs on an Intel Xeon with AVX512 too (by step 220 on MQAR;
``MKL_ENABLE_INSTRUCTIONS`` does not bring them together). A difference on a machine of another
name than the record's ``provenance.hardware`` says so.

Each record runs in a process of its own, as ``ATEN_CPU_CAPABILITY`` is read when torch loads.
A record that cannot be checked (another task version, a GPU run, no stopping curve) is named
and the others go on. The exit status is 1 when a record differs or was not checked.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def training_blocks(record: dict) -> dict[str, dict]:
    """The record's training blocks by model, in training order: ``{"": block}`` for a task that
    trains one model, ``{"every": ..., "some": ...}`` for icl_quantifiers' two."""
    extra = record.get("extra") or {}
    train = extra.get("train") or {}
    if "stopping" in train:
        return {"": train}
    order = extra.get("quantifiers") or list(train)
    return {name: train[name] for name in order
            if isinstance(train.get(name), dict) and "stopping" in train[name]}


def _retrained(record: dict, steps: int) -> dict:
    """Per model, the first training loss, the loss windows and the evaluations of ``record``'s
    cell, retrained here for ``steps`` optimizer steps (each model stops there)."""
    import torch

    from leaderboard.loading.schema import Cell
    from suite.cells import config_object
    from suite.provenance import hardware
    from suite.runner import seed_everything
    from tasks import RunContext, create_task, icl_training

    prov = record["provenance"]
    torch.set_num_threads(int(prov.get("threads") or 1))
    cell = Cell.from_dict(record["cell"])
    task = create_task(cell.task)
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
    return {"capability": torch.backends.cpu.get_cpu_capability(), "hardware": hardware("cpu"),
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
        # the window that ends at the cut is partial unless the record has one there: at a
        # window's end, or where the recorded run stopped too
        mine = {"evaluation": [(s, v) for s, v in model["evaluations"] if s <= steps],
                "loss window": [(s, v) for s, v in model["losses"]
                                if s < steps or s in recorded["loss window"]]}
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
    if not counts["evaluation"]:
        return False, (f"NOT CHECKED: {what}: no evaluation up to step {steps:,}; raise --steps "
                       f"past the task's eval_every ({cell['config'].get('eval_every')})")
    if not differences:
        return True, (f"identical: {what}: {counts['evaluation']} evaluations, "
                      f"{counts['loss window']} loss windows and the first loss{models} up to "
                      f"step {steps:,}")
    step, kind, here, there = min(differences)
    total = sum(counts.values()) + len(blocks)
    recorded_on = record["provenance"].get("hardware")
    if not record["provenance"].get("cpu_capability"):
        hint = "; the record does not name its CPU kernels: try --capability AVX2 or AVX512"
    elif recorded_on != run["hardware"]:
        hint = (f"; the record ran on {recorded_on}, this host is {run['hardware']}: BLAS rounds "
                f"differently on another vendor's CPU of the same capability, so check it on "
                f"such a machine")
    else:
        hint = ""
    return False, (f"DIFFERS: {what}: {len(differences)} of {total} values, first the {kind} at "
                   f"step {step:,}: {here!r} here, {there!r} recorded{hint}")


class Unchecked(Exception):
    """A record this checkout cannot retrain as it ran."""


def load(path: Path) -> dict:
    """The record at ``path``, or :class:`Unchecked` saying why it cannot be retrained here."""
    with gzip.open(path, "rt") as f:
        record = json.load(f)
    if record.get("status") != "ok" or not any(
            "curve" in block["stopping"] for block in training_blocks(record).values()):
        raise Unchecked("not an ok record of a task trained to convergence (it needs a training "
                        "block with stopping.curve)")
    if record["provenance"].get("device") != "cpu":
        raise Unchecked(f"run on {record['provenance'].get('device')}; this script retrains CPU "
                        f"records only")
    import tasks

    cell = record["cell"]
    version = tasks.create_task(cell["task"]).version
    if int(version) != cell["task_version"]:
        raise Unchecked(f"{cell['task']} is version {version} at this checkout, the record "
                        f"{cell['task_version']}: check out a commit of that version")
    return record


def _check(path: Path, steps: int, capability: str | None) -> tuple[bool, str]:
    record = load(path)
    capability = record["provenance"].get("cpu_capability") or capability
    env = dict(os.environ)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability.lower()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run.json"
        child = subprocess.run([sys.executable, __file__, str(path), "--steps", str(steps),
                                "--child-out", str(out)], env=env, capture_output=True, text=True)
        if child.returncode != 0:
            raise Unchecked(f"the retraining failed:\n{child.stderr[-2000:]}")
        run = json.loads(out.read_text())
    if capability and run["capability"] != capability.upper():
        raise Unchecked(f"the record ran on {capability.upper()} kernels, which this host cannot "
                        f"run (it reached {run['capability']}); reproduce it on such a host")
    return compare(record, run, steps)


def reproduce(path: Path, steps: int, capability: str | None) -> bool:
    """Retrain ``path``'s record in a process on its capability; print and return the verdict."""
    try:
        same, line = _check(path, steps, capability)
    except Unchecked as e:
        same, line = False, f"NOT CHECKED: {e}"
    print(f"{path}: {line}", flush=True)
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, default=500,
                        help="optimizer steps to retrain and compare (default 500)")
    parser.add_argument("--capability", help="the CPU capability of records that do not state "
                        "theirs (AVX2, AVX512, DEFAULT); default: the host's")
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.child_out:
        args.child_out.write_text(json.dumps(_retrained(load(args.records[0]), args.steps)))
        return 0
    verdicts = [reproduce(path, args.steps, args.capability) for path in args.records]
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
