"""Carry records over a change of a task's stopping rule that would not have changed their runs.

    python scripts/carry_over.py leaderboard/records --task icl_mqar --set patience_fraction=0.5
    python scripts/carry_over.py leaderboard/records --task icl_linear --set learned_at=0.25

The stopping rule (tasks/stopping.py) only decides when a run ends: up to its stop, a run under
another rule takes the same steps. So a record of ``--task`` from the version before the task's
current one (an older version changed more than the rule: a cap, the training), whose config
with the ``--set`` keys is one the task accepts, would come out the same under the new rule when
that rule, replayed on every evaluation the run recorded, ends every trained model where it
ended: at the same step with reason ``"converged"``, or not before the cap for a model that ran
to it (a model still on its plateau never stops before the cap under any patience). A new
``learned_at`` also moves what counts as learned: each stopping block's ``learned`` is replayed
under it. Such a record is written again under the new cell (the current task version, the new
config, its id), with the new settings in its stopping blocks and ``provenance.carried_over``
naming the record it came from; its provenance otherwise stays the run's own. Every other record
is left to run again.

Use it only where the task's version moved for the stopping rule alone: the training code the
records ran must be the current one. ``--dry-run`` lists what would carry over and why the
others do not.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tasks  # noqa: E402
from leaderboard.loading.choice import stopping_blocks  # noqa: E402
from leaderboard.loading.schema import cell_id  # noqa: E402
from suite.cells import config_object, resolve_config  # noqa: E402
from suite.store import ResultStore  # noqa: E402
from tasks.stopping import CAP, CONVERGED, Plateau, replay  # noqa: E402

# in the config and stopping blocks
RULE_KEYS = ("patience", "patience_fraction", "tolerance", "learned_at")


def _rule(block: dict, settings: dict, direction: str) -> Plateau:
    """The rule with ``settings`` (a ``learned_at`` it does not name: the block's own)."""
    return Plateau(direction, settings["patience"], settings["tolerance"],
                   learned_at=settings.get("learned_at", block.get("learned_at")),
                   target=block.get("target"),
                   patience_fraction=settings.get("patience_fraction", 0.0))


def replayed_stop(block: dict, settings: dict, direction: str, first_step: int) -> int | None:
    """Where the rule with ``settings`` stops the run of ``block`` (its recorded evaluations):
    the step, or None when it does not stop within them. ``first_step``: the first step at which
    training may stop (the curriculum's last length)."""
    return replay(_rule(block, settings, direction), block["curve"], first_step)


def learned(block: dict, settings: dict, direction: str) -> bool:
    """Whether the run of ``block`` learned under the rule with ``settings``, over all of its
    recorded evaluations (a new ``learned_at`` moves what counts as learned)."""
    rule = _rule(block, settings, direction)
    replay(rule, block["curve"], first_step=math.inf)
    return rule.learned


def same_run(block: dict, stop: int | None) -> bool:
    """Whether a model that stopped where ``block`` says would stop there under the new rule."""
    if block["reason"] == CONVERGED:
        return stop == block["stop_step"]
    return block["reason"] == CAP and stop is None


def moved_cell(cell: dict, task, sets: dict) -> dict:
    """``cell`` at the task's current version with the new settings: the cell a run under the new
    rule has, whether its record carries over or the cell runs again."""
    return {**cell, "task_version": task.version, "config": {**cell["config"], **sets}}


def carried(record: dict, task, sets: dict,
            renamed: dict[str, str] | None = None) -> tuple[dict | None, str]:
    """The record (of an older version of ``task``, trained to convergence) under the new rule,
    or None with the reason it does not carry over. ``renamed`` maps the previous version's cell
    ids to the new ones: the sweep cells a reporting record's tuning block lists move with them,
    so that the release still finds the cells its choice consulted."""
    cell = record["cell"]
    if record["status"] != "ok":
        return None, f"status {record['status']}"
    blocks = stopping_blocks(record.get("extra"))
    new_cell = moved_cell(cell, task, sets)
    config = new_cell["config"]
    if resolve_config(task, config) != config:
        return None, "the config with the new settings is not one the task runs"
    cfg = config_object(task, config)
    settings = {key: getattr(cfg, key) for key in RULE_KEYS}
    direction = (record.get("extra", {}).get("validation") or {}).get("direction", "higher")
    first = cfg.curriculum().last_growth() + 1
    for block in blocks:
        stop = replayed_stop(block, settings, direction, first)
        if not same_run(block, stop):
            return None, (f"stopped at {block['stop_step']} ({block['reason']}); the new rule "
                          f"{'runs past its last evaluation' if stop is None else f'stops at {stop}'}")
    new = copy.deepcopy(record)
    new["cell"] = new_cell
    new["cell_id"] = cell_id(new_cell)
    tuning = new.get("tuning") or {}
    if tuning.get("sweep_cells"):
        tuning["sweep_cells"] = sorted((renamed or {}).get(i, i) for i in tuning["sweep_cells"])
    for block in stopping_blocks(new["extra"]):
        block["learned"] = learned(block, settings, direction)
        for key in RULE_KEYS:   # as tasks.stopping.Plateau.block writes them
            if settings[key] is None or (key == "patience_fraction" and not settings[key]):
                block.pop(key, None)
            else:
                block[key] = settings[key]
    new["provenance"]["carried_over"] = {"from": record["cell_id"],
                                         "task_version": cell["task_version"], "set": sets}
    return new, "the new rule stops every model where it stopped"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results")
    parser.add_argument("--task", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a stopping setting of the new rule (repeatable): "
                             + ", ".join(RULE_KEYS))
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    sets = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key not in RULE_KEYS:
            parser.error(f"--set {item!r}: expected KEY=VALUE with KEY one of {list(RULE_KEYS)}")
        sets[key] = json.loads(value)
    task = tasks.create_task(args.task)
    store = ResultStore(args.results)
    previous = [record for record in map(store.load, sorted(
        Path(args.results, args.task).glob("*/*.json*")))
        if record["cell"]["task_version"] == task.version - 1]
    renamed = {r["cell_id"]: cell_id(moved_cell(r["cell"], task, sets)) for r in previous}
    moved = kept = 0
    for record in previous:
        if record["status"] == "skipped" or (
                record["status"] == "ok" and not stopping_blocks(record.get("extra"))):
            continue      # never run, or trained for a fixed step count
        new, why = carried(record, task, sets, renamed)
        cell = record["cell"]
        print(f"{cell['scorer']}\t{cell.get('role', 'report')}\tseed {cell['seed']}\t{record['cell_id']}\t"
              f"{'carried over' if new else 'runs again'}: {why}")
        if new is None:
            kept += 1
            continue
        moved += 1
        if not args.dry_run:
            store.write(new)
    print(f"{moved} record(s) {'would carry' if args.dry_run else 'carried'} over to "
          f"{args.task} v{task.version}, {kept} left to run again")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
