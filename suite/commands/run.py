"""``scorebench run``: run the cells of a profile and write one record per cell."""
from __future__ import annotations

import argparse

from . import positive_int


def _seeds(text: str) -> list[int]:
    """``3`` -> seeds 0, 1, 2; ``0,4,7`` -> those seeds; ``2-4`` -> 2, 3, 4."""
    try:
        if "," not in text and "-" not in text:
            count = int(text)
            if count < 1:
                raise ValueError
            return list(range(count))
        seeds: list[int] = []
        for part in (p.strip() for p in text.split(",") if p.strip()):
            lo, _, hi = part.partition("-")
            seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
        if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
            raise ValueError
        return seeds
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds {text!r}: give a count (3 = seeds 0,1,2), a list (0,4,7) or a range (2-4) "
            f"of distinct seeds >= 0") from None


def register(sub, common):
    p = sub.add_parser(
        "run", parents=[common], help="run the benchmark cells of a profile",
        description="Run every (task, scorer, seed) cell of a profile that has no record yet, "
                    "and write one JSON record per cell under the results directory.")
    add_run_arguments(p)
    p.set_defaults(func=run)


def add_run_arguments(p) -> None:
    """Every option of ``scorebench run`` (``scorebench nightly`` takes them all)."""
    from registry.settings import declared, default

    from ..executors import get_executor_class, list_executors
    from ..profiles import DEFAULT_PROFILE
    from ..scheduler import RERUN_CHOICES
    from ..tables import RunSettings

    p.add_argument("--profile", default=DEFAULT_PROFILE, metavar="NAME|FILE",
                   help=f"a shipped profile (smoke, cpu, gpu, paper; default {DEFAULT_PROFILE}) "
                        f"or a TOML file")
    p.add_argument("--tasks", metavar="a,b", help="tasks to run (names or wildcards); default: "
                                                  "the profile's")
    p.add_argument("--scorers", metavar="a,ssa*", help="scorers to run (names, aliases or "
                                                       "wildcards); default: the profile's")
    p.add_argument("--seeds", type=_seeds, metavar="N|a,b|a-b",
                   help="a count (seeds 0..N-1), a list or a range; default: the profile's")
    p.add_argument("--workers", type=positive_int, default=1, metavar="N",
                   help="cells run at once (1: in this process; more: worker processes, one GPU "
                        "each when GPUs exist)")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory (default ./results)")
    p.add_argument("--rerun", choices=RERUN_CHOICES,
                   help="run again cells that have a record: 'failed' (status error, oom or "
                        "timeout; nan/diverged are results) or 'all'")
    p.add_argument("--fail-fast", action="store_true",
                   help="stop after the first cell with status error, oom or timeout")
    p.add_argument("--executor", default="local", choices=list_executors(),
                   help="the engine that runs the cells (default local)")
    p.add_argument("--fast", choices=declared(RunSettings, "fast").allowed(), default=None,
                   help=f"the scorers' fast paths in training (default: the profile's [run] fast, "
                        f"{default(RunSettings, 'fast')} unless it says otherwise); not part of a "
                        f"cell's identity")
    p.add_argument("--no-tuning", action="store_true",
                   help="run every task at the profile's config, without the sweep of its "
                        "[tuning] (the reporting cells then name no chosen point)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the cells and whether they would run, estimate the time of "
                        "those that would (from records of the same config on this device "
                        "class, else a short calibration run), and stop")
    p.add_argument("--estimate-from", action="append", default=[], metavar="DIR",
                   help="a results directory whose records' wall times the dry run's estimate "
                        "uses besides those of --results (repeatable; e.g. leaderboard/records)")
    for name in list_executors():
        add = getattr(get_executor_class(name), "add_arguments", None)
        if add is not None:
            add(p)


def _dry_run(console, plan, store, rerun, workers: int = 1, declared: dict | None = None,
             estimate_from: tuple = (), converged_at: dict[str, int] | None = None) -> int:
    from rich.table import Table

    from leaderboard.loading.schema import stale_reason
    from ..scheduler import should_rerun
    from ..sweep import IF_UNLEARNED, dry_run_cells

    read: dict[str, dict | None] = {}

    def existing(cell):
        if cell.id not in read:
            read[cell.id] = store.existing(cell)
        return read[cell.id]

    def current(cell):
        record = existing(cell)
        keep = record is not None and not stale_reason(record) and not should_rerun(record, rerun)
        return record if keep else None

    cells = dry_run_cells(plan, current)
    to_run = {"sweep": [], "report": [], "if_unlearned": []}
    table = Table(title=f"{len(cells)} cells", show_edge=False)
    for c in ("cell", "task", "scorer", "seed", "role", "would"):
        table.add_column(c)
    for p, note in cells:
        record = existing(p.cell)
        if record is None:
            would = "skip (" + p.skip_reason + ")" if p.skip_reason else "run"
        elif stale_reason(record):
            would = f"run again (stale: {stale_reason(record).split(' (')[0]})"
        else:
            would = (f"run again (has {record['status']})" if should_rerun(record, rerun)
                     else f"keep ({record['status']})")
        if note.startswith("report, after"):
            would = "run"
        table.add_row(p.cell.id if not note.startswith("report, after") else "(not known yet)",
                      p.cell.task, p.cell.scorer, str(p.cell.seed), note or "report", would)
        if note == IF_UNLEARNED:
            to_run["if_unlearned"].append(p.cell)
        elif would.startswith("run"):
            to_run["sweep" if p.cell.is_sweep else "report"].append(p.cell)
    console.print(table)
    estimator = Estimator(console, store, estimate_from, [*to_run["sweep"], *to_run["report"]],
                          workers, declared, converged_at)
    if plan.tuning is not None:
        tuning = plan.tuning.tuning
        tuned = {task for task, _ in plan.tuning.tuned}
        bimodal = [t for t in tuning.bimodal if t in tuned]
        seeds = f"{len(tuning.seeds)} tuning seed(s) {list(tuning.seeds)}" + (
            f" ({', '.join(bimodal)}, bimodal: {len(tuning.bimodal_seeds)} seeds "
            f"{list(tuning.bimodal_seeds)})" if bimodal else "")
        console.print(f"tuning: {seeds}, grids "
                      + "; ".join(f"{t}: " + " x ".join(f"{k} {list(v)}" for k, v in g.items())
                                  for t, g in tuning.grids.items() if t in tuned)
                      + f"; each axis may grow by up to {tuning.max_extensions} step(s) past "
                        f"each edge (counted once the records ask for it"
                      + (", and where no screened seed reaches a bimodal task's target in the "
                         "cap's total" if tuning.unlearned_grows and bimodal else "") + ")")
        unlearned = (f" and {len(to_run['if_unlearned'])} more where no screened seed reaches "
                     f"its target (counted in the cap's total only)"
                     if to_run["if_unlearned"] else "")
        console.print(f"[bold]sweep cells[/]: {len(to_run['sweep'])} to run{unlearned}")
        estimator.print(to_run["sweep"], cap_only=to_run["if_unlearned"])
        console.print(f"[bold]reporting and untuned cells[/]: {len(to_run['report'])} to run")
    estimator.print(to_run["report"])
    return 0


class Estimator:
    """The dry run's estimate (:mod:`suite.estimate`) of cells to run on this device, from the
    records of ``store`` and of the directories ``estimate_from``, read once; the step costs
    (:class:`~suite.estimate.StepCost`) of the scorers of ``cells`` and of the few recorded
    scorers that place the line of time against step cost are benched once, on first use."""

    def __init__(self, console, store, estimate_from: tuple, cells, workers: int = 1,
                 declared: dict | None = None, converged_at: dict[str, int] | None = None):
        import itertools

        import scorers

        from leaderboard.loading.schema import RecordError

        from ..estimate import StepCost, anchor_scorers, device_class
        from ..runner import default_device, worker_threads
        from ..store import ResultStore

        self.console, self.workers, self.converged_at = console, workers, converged_at
        self.device = default_device()
        self.hw = device_class(self.device)
        self.declared = None if self.device.startswith("cuda") else declared
        self.threads = worker_threads(workers)
        stores = [store]
        for directory in estimate_from:
            try:
                stores.append(ResultStore(directory))
            except RecordError as e:
                raise SystemExit(f"scorebench: --estimate-from {directory}: {e}") from None
        self.records = list(itertools.chain.from_iterable(
            (r for _, r in s.records(validate=False)) for s in stores)) if cells else []
        registered = set(scorers.list_scorers())
        anchors = {backbone: names & registered
                   for backbone, names in anchor_scorers(self.records, self.hw, cells).items()}
        # On a CPU the ratios are timed on one thread: two threads on two cores shared with
        # other jobs took 3-20x longer to time the same steps, to no steadier ratios.
        self.step_cost = StepCost(self.device, registered & {c.scorer for c in cells},
                                  threads=self.threads if self.device.startswith("cuda") else 1,
                                  anchors=anchors)

    def print(self, cells, cap_only=()) -> None:
        """Per task: cells to run, expected time per cell and in total, and whence; ``cap_only``:
        cells counted in the cap's total alone (:func:`suite.estimate.estimate`)."""
        from rich.table import Table

        from ..estimate import StepCostError, duration, estimate

        console = self.console
        if not cells:
            console.print("no cell to run")
            return
        console.print(f"estimating on {self.hw} ({self.device}) ...")
        try:
            rows = estimate(cells, self.records, self.device, hardware_name=self.hw,
                            declared=self.declared, step_cost=self.step_cost,
                            threads=self.threads, converged_at=self.converged_at,
                            cap_only=cap_only)
        except StepCostError as e:
            raise SystemExit(f"scorebench: {e}") from None
        capped = any(r.at_cap is not None for r in rows)
        table = Table(title="expected time (the \"from\" column says whence)", show_edge=False)
        numbers = ("cells", "per cell", "total", *(("at the cap",) if capped else ()))
        for c in ("task", *numbers, "from"):
            table.add_column(c, justify="right" if c in numbers else "left")
        for r in rows:
            table.add_row(r.task, str(r.cells), duration(r.per_cell), duration(r.seconds),
                          *((duration(r.at_cap) if r.at_cap else "",) if capped else ()),
                          r.source)
        known = [r.seconds for r in rows if r.seconds is not None]
        total = sum(known)
        most = sum(r.at_cap or r.seconds for r in rows if r.seconds is not None)
        table.add_row("[bold]all", str(sum(r.cells for r in rows)), "",
                      f"[bold]{duration(total)}", *((duration(most),) if capped else ()),
                      "" if len(known) == len(rows) else "tasks without an estimate left out")
        console.print(table)
        workers = self.workers

        def wall(seconds: float) -> str:
            return (f"; about {duration(seconds / workers)} wall with {workers} workers"
                    if workers > 1 else "")
        console.print(f"total {duration(total)} of cell time ({total:.0f} s){wall(total)}")
        if capped:
            console.print(f"at most {duration(most)} of cell time{wall(most)}, if every scorer "
                          "without records of a task that trains to convergence runs its cells to "
                          "the cap (a scorer that never learns)")


def run(args) -> int:
    from rich.console import Console

    from ..jobs import open_store, plan_cells, run_profile

    console = Console()
    if not args.dry_run:
        return run_profile(args, console)
    profile, plan = plan_cells(args)
    store = open_store(args.results)
    converged_at = {task: table["softmax_converged_at"]
                    for task, table in profile.task_overrides.items()
                    if "softmax_converged_at" in table}
    return _dry_run(console, plan, store, args.rerun, args.workers, profile.estimate,
                    tuple(args.estimate_from), converged_at)
