"""How long the cells of a run will take on this device, before running them.

Per cell, in this order:

1. **records**: the median cell time of existing ``ok`` records (:func:`cell_seconds`: the
   process CPU time of a single-threaded CPU cell, which another job or a pause on the host does
   not stretch, else the wall time of a cell that did not resume) with the same task, task
   version, config
   (the resolved config, so the same sizes; the keys the task declares tunable, its optimizer's
   settings, aside) and role on the same device class (the ``hardware`` string
   of a record's provenance: CPU model and core count, or the GPU's name); a tuning sweep's or
   reporting cell without records of its role is timed by the untuned cells' records (a sweep
   cell skips the reported evaluation, so they bound it from above);
   the records of the cell's scorer when there are some, else the line ``t = a + b·r`` through
   the recorded scorers' median times against their step costs ``r`` (below; :func:`cost_line`:
   ``a`` is what does not scale with attention, such as data and evaluation set-up) at the cell's
   scorer's step cost (where no recorded scorer has a step cost, the records cannot place the
   line, and the config is timed as one without records). A config that trains to convergence
   (``stop = "converged"``) is timed per trained step, since its scorers stop at different
   steps: the records' seconds per step (their own scorer's, else the line through the recorded
   scorers' at the cell's step cost) times the steps its own scorer's records trained
   (median), else the median of every recorded cell's; beside it, the total if every scorer
   without records of the config runs to the cap (a scorer that never learns: a MQAR cell at its
   cap costs several times softmax's converged one).
   The steps come from the config's records on any hardware (a step count does not depend on
   the machine, its seconds do): without records on this device, the calibration below times a
   step here and the records give the steps.
2. **the profile's estimate**: a profile sized for another device (``gpu``) may declare its
   expected seconds per cell in ``[estimate]``; a dry run on a CPU uses them for the tasks
   without records, labelled with that device (calibrating GPU-sized cells on a CPU would take
   hours and say nothing about the night on the GPU).
3. **calibration**: otherwise the task's config runs once with the softmax
   scorer at two short training lengths ``s`` and ``2s`` (``s`` = 5% of the steps, at most 50)
   and the cost is extrapolated to the full length ``S`` as

       t(S) = a + b·S,    b = (t(2s) - t(s)) / s,    a = t(s) - b·s

   (``a``: setup and evaluation, ``b``: seconds per training step). The line is fitted on the
   runs' process CPU time, which the load of other jobs on a shared machine barely moves, and
   converted to wall time by the ratio Σ wall / Σ CPU time of the calibration runs (on a
   machine whose load changes between two runs, a fit on wall times can make the per-step
   cost of a 50-step difference off by 10x). ``t(s)`` is the faster of two runs, one before and
   one after the ``2s`` run, so one-time costs of the first run in a process (imports,
   allocator, kernel selection) do not bend the line. Where a task's record times its training
   phase apart (``extra.cpu_time_s["train"]``, e.g. the encoder), the slope is fitted on that
   phase alone and the rest of the run (set-up, evaluation) joins ``a``, so an evaluation that
   takes longer in one run than in another does not bend the slope. The runs use the torch
   threads a cell of the run gets. A task without a step count (a Config field declared
   ``role="steps"``) runs once at full size. Curricula run at their final length throughout the
   calibration, so the estimate is an upper bound for them. A cell that stops when its
   validation metric converges (``stop = "converged"``) is timed at the step where the rule stops
   softmax (:func:`stop_after` its convergence as the profile measured it,
   ``softmax_converged_at``), the time at its cap beside it, until records of its config, on any
   hardware, give the lengths scorers really train: on the 2-core board, where half of the MQAR
   sweep cells train to the 22,000-step cap, softmax's stop at 8,200 steps made a new host's
   estimate half the records' cost. Another scorer's cell is that times the scorer's step cost (an
   upper bound where part of a cell does not scale with it).

**Step cost**: a scorer's training-step time over softmax's on its task's backbone (the ICL
model, the decoder or the encoder), measured once per dry run by ``bench_train`` at its small
size with the paths training takes, in process CPU time on a CPU (:class:`StepCost`; about a
second per scorer and backbone), for the scorers to run and, of the recorded ones, only the
fastest, middle and slowest per backbone (:func:`anchor_scorers`), which place the line as well
as all of them. The board's cells of one task differ mostly by this: 1.5-entmax by bisection
trains 5-10x slower than softmax on a CPU, stick-breaking 2.5x. Tasks on other tracks (probes,
cost) count 1. A scorer the bench cannot train is an error (:class:`StepCostError`).

The total of a task is the sum over its cells; with ``w`` workers the wall time is about
total / w (cells are independent).
"""
from __future__ import annotations

import functools
import math

import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from leaderboard.loading.schema import REPORT, Cell
from registry.settings import STEPS, keys_with_role

CALIBRATION_FRACTION = 0.05
CALIBRATION_MAX_STEPS = 50
OK = "ok"


@dataclass
class TaskEstimate:
    task: str
    cells: int
    seconds: float | None       # total over the cells; None: no estimate
    source: str                 # "records (n)", "calibration (...)", or why there is none
    at_cap: float | None = None  # the total if every scorer without records of a converged
                                 # config trains its cells to the cap; None: no such cell

    @property
    def per_cell(self) -> float | None:
        return None if self.seconds is None or not self.cells else self.seconds / self.cells


def device_class(device: str) -> str:
    """The class records are matched on: :func:`suite.provenance.hardware` of ``device``."""
    from .provenance import hardware

    return hardware(device)


def _config_key(task: str, task_version: int, config: dict, role: str = "report") -> tuple:
    """Records time cells of the same config and role (a sweep cell skips the reported
    evaluation, so it times no reporting cell). The keys the task declares tunable (the
    optimizer's settings, tasks.config) do not change what a cell costs and are left out, so
    records at one learning rate time cells at another."""
    from tasks import TaskError, get_task_class
    from tasks.config import tunable_keys

    from leaderboard.loading.schema import canonical_json

    try:
        free = set(tunable_keys(get_task_class(task).Config))
    except TaskError:          # a plugin task that is not loaded now
        free = set()
    kept = {k: v for k, v in config.items() if k not in free}
    return task, int(task_version), canonical_json(kept), role


def record_times(records: Iterable[dict], device: str) -> dict[tuple, dict[str, list[float]]]:
    """(task, version, config, role) -> scorer label -> cell times (:func:`cell_seconds`) of
    ``ok`` records on ``device``; of a config that trains to convergence, seconds per trained
    step."""
    return _recorded(records, device)[0]


def _recorded(records: Iterable[dict], device: str) -> tuple[dict, dict, dict]:
    """:func:`record_times`; the steps the records of converged configs trained, on any hardware
    (summed over a cell's models); and the most steps a cell of each converged config may train
    (its cap times the models it trains)."""
    times: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    steps: dict[tuple, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    caps: dict[tuple, int] = {}
    for r in records:
        if r.get("status") != OK:
            continue
        prov, extra, cell = r.get("provenance") or {}, r.get("extra") or {}, r["cell"]
        key = _config_key(cell["task"], cell["task_version"], cell["config"],
                          cell.get("role", "report"))
        label = _scorer_label(cell)
        converged = cell["config"].get("stop") == "converged"
        trained = trained_steps(extra) if converged else None
        if trained:
            steps[key][label].append(trained)
            cap = steps_of(cell["task"], cell["config"])
            if cap:
                caps[key] = max(caps.get(key, 0), cap[1] * len(_trained_models(extra)))
        if prov.get("hardware") != device or extra.get("resumed_from_checkpoint"):
            continue   # another machine's seconds, or a record that timed only the rest of a cell
        seconds = cell_seconds(prov)
        if seconds is None or (converged and not trained):
            continue
        times[key][label].append(seconds / trained if converged else seconds)
    return times, steps, caps


def cell_seconds(provenance: dict) -> float | None:
    """A record's cell time on an otherwise idle host. A single-threaded cell on a CPU is timed by
    its process CPU time (summed over the processes of a resumed cell): its wall time also counts
    whatever else the host ran meanwhile, another job or a pause, which stretched some MQAR cells
    of the board 2-20x. Any other cell is timed by its wall time, unless it resumed (its wall time
    spans the pause between its processes)."""
    cpu, wall = provenance.get("cpu_time_s"), provenance.get("wall_time_s")
    if (provenance.get("device") == "cpu" and provenance.get("threads") == 1
            and isinstance(cpu, (int, float)) and cpu > 0):
        return float(cpu)
    if provenance.get("resumed") or not isinstance(wall, (int, float)) or wall < 0:
        return None
    return float(wall)


def trained_steps(extra: dict) -> int | None:
    """The optimizer steps a record's models trained (``extra["train"]["steps"]``, or summed
    over a task's models, e.g. icl_quantifiers' one per quantifier)."""
    return sum(int(m["steps"]) for m in _trained_models(extra)) or None


def _trained_models(extra: dict) -> list[dict]:
    train = extra.get("train") or {}
    return [train] if "steps" in train else [m for m in train.values()
                                             if isinstance(m, dict) and "steps" in m]


def _scorer_label(cell) -> str:
    get = cell.get if isinstance(cell, dict) else lambda k: getattr(cell, k)
    kwargs = get("scorer_kwargs") or {}
    return get("scorer") + "".join(f",{k}={kwargs[k]}" for k in sorted(kwargs))


def steps_of(task: str, config: dict) -> tuple[str, int] | None:
    """The training-length key of a task config (the field its Config declares
    ``role="steps"``) and its value, if the task trains."""
    from tasks import TaskError, get_task_class

    try:
        keys = keys_with_role(get_task_class(task).Config, STEPS)
    except TaskError:          # a plugin task that is not loaded now
        return None
    return next(((key, int(config[key])) for key in keys if key in config), None)


def extrapolate(steps: int, short: int, t_short: float, t_double: float) -> float:
    """t(steps) from runs of ``short`` and ``2·short`` steps (module docstring); a slope <= 0 (the
    training steps cost less than the timing noise) gives the slower of the two runs."""
    fixed, slope = _line(short, t_short, t_double)
    return fixed + slope * steps


def _line(short: int, t_short: float, t_double: float) -> tuple[float, float]:
    """(fixed, per step) through t(short) and t(2·short); (slower run, 0) when the slope is <= 0."""
    slope = (t_double - t_short) / short
    if slope <= 0:
        return max(t_short, t_double), 0.0
    return max(t_short - slope * short, 0.0), slope


@dataclass
class Fit:
    """``t(steps) = fixed + per_step · steps`` of one config, and how it was measured."""

    fixed: float
    per_step: float
    steps_key: str | None
    steps: int
    how: str

    @property
    def seconds(self) -> float:
        return self.fixed + self.per_step * self.steps


def fit(cell: Cell, device: str, *, run: Callable[[Cell, str], Any] | None = None,
        scorer: str = "softmax", full: bool = False) -> Fit:
    """Time ``cell``'s config with ``scorer`` (module docstring): two short lengths, or one full
    cell when ``full`` or when the task has no step count. ``run(cell, device)`` returns the wall
    seconds, (wall, CPU) seconds, or (wall, CPU, CPU of the training phase or None)."""
    walls: list[float] = []
    cpus: list[float] = []
    trains: list[float | None] = []

    def timed(c: Cell) -> float:
        out = (run or _timed_run)(c, device)
        wall, cpu, train = (*out, None)[:3] if isinstance(out, tuple) else (out, out, None)
        walls.append(wall)
        cpus.append(cpu)
        trains.append(train)
        return cpu

    base = replace(cell, scorer=scorer, scorer_kwargs={}, seed=0)
    config = dict(base.config)
    found = steps_of(cell.task, config)
    if full or found is None or found[1] <= 0:
        timed(base)
        return Fit(walls[0], 0.0, found and found[0], found[1] if found else 0,
                   f"calibration: one full {scorer} cell")
    if "curriculum_end" in config and "curriculum_start" in config:
        config["curriculum_start"] = config["curriculum_end"]
    if config.get("stop") == "converged":     # short runs count steps; the estimate is to the cap
        config["stop"] = "steps"
    key, steps = found
    short = max(1, min(CALIBRATION_MAX_STEPS, int(steps * CALIBRATION_FRACTION)))
    if 2 * short >= steps:
        timed(replace(base, config=config))
        return Fit(walls[0], 0.0, key, steps,
                   f"calibration: one full {scorer} cell")
    first = timed(replace(base, config={**config, key: short}))
    t2 = timed(replace(base, config={**config, key: 2 * short}))
    t1 = min(first, timed(replace(base, config={**config, key: short})))
    if None in trains:
        fixed, slope = _line(short, t1, t2)
    else:
        fixed, slope = _line(short, min(trains[0], trains[2]), trains[1])
        fixed += min(cpu - train for cpu, train in zip(cpus, trains))
    wall_per_cpu = sum(walls) / sum(cpus) if sum(cpus) > 0 else 1.0
    return Fit(fixed * wall_per_cpu, slope * wall_per_cpu, key, steps,
               f"calibration: {scorer} at {short} and {2 * short} of {steps} {key}")


def calibrate(cell: Cell, device: str, *, run: Callable[[Cell, str], float] | None = None,
              threads: int = 0, converged_at: int | None = None) -> tuple[float, str]:
    """Seconds one cell of ``cell``'s task config takes on ``device``, and how it was found;
    ``threads``: the torch threads a cell of the run gets (0: torch's choice); ``converged_at``:
    the step at which softmax converges (the profile's ``softmax_converged_at``), where a cell
    with ``stop = "converged"`` is timed instead of at its cap."""
    result = fit(cell, device, run=run or (lambda c, d: _timed_run(c, d, threads)))
    if converged_at is None or cell.config.get("stop") != "converged" or not result.steps_key:
        return result.seconds, result.how
    early = replace(result, steps=min(stop_after(converged_at, cell.config), result.steps))
    return early.seconds, (f"{result.how}, timed at softmax's stop ({early.steps} steps, its best "
                           f"at {converged_at}; a cell at its cap: {duration(result.seconds)})")


def stop_after(best: int, config: dict) -> int:
    """The step at which the stopping rule of ``config`` (tasks/stopping.py) ends a run whose
    best evaluation is at step ``best`` and which gains nothing after it: ``patience``
    evaluations later, or, with ``patience_fraction`` f, once those evaluations are also f of all
    of them (f = 0.5: at twice its best step)."""
    every = config.get("eval_every", 100)
    fraction = config.get("patience_fraction", 0.0)
    evaluations = best // every
    wait = max(config.get("patience", 5), math.ceil(fraction * evaluations / (1 - fraction)))
    return (evaluations + wait) * every


def _timed_run(cell: Cell, device: str, threads: int = 0) -> tuple[float, float, float | None]:
    """Wall and process CPU seconds of one run of ``cell`` on ``threads`` torch threads (0: as
    set), and the CPU seconds of its training phase where the record says (its record is not
    kept). Beside a running board, on 2 threads, 50 encoder steps took 15.5-19.3 s of CPU time
    and 100 steps 28.7 s; on the 1 thread a cell of a 2-worker run gets, 4.8-6.1 s and 6.9 s."""
    import torch

    from .runner import CellJob, run_cell

    before = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="scorebench-calibrate-") as work:
        if threads:
            torch.set_num_threads(threads)
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            record = run_cell(CellJob(cell, workdir=work), device=device)
            seconds = time.perf_counter() - t0, time.process_time() - c0
        finally:
            torch.set_num_threads(before)
    if record["status"] != OK:
        raise RuntimeError(f"calibration run of {cell.task} ended {record['status']}: "
                           f"{record['message'][-300:]}")
    train = ((record.get("extra") or {}).get("cpu_time_s") or {}).get("train")
    return (*seconds, float(train) if isinstance(train, (int, float)) else None)


def cost_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of t = a + b·r through (step cost r, median cell seconds t) of the scorers with
    records: least squares with a, b >= 0 (b = 0: the cell time does not follow the step cost;
    a = 0: proportional). One distinct r: proportional, b = median t / r."""
    rs = [r for r, _ in points]
    ts = [t for _, t in points]
    if len(set(rs)) < 2:
        return 0.0, statistics.median(t / r for r, t in points)
    b, a = statistics.linear_regression(rs, ts)
    if b < 0:
        return statistics.median(ts), 0.0
    if a < 0:
        return 0.0, sum(r * t for r, t in points) / sum(r * r for r in rs)
    return a, b


def anchor_scorers(records: Iterable[dict], device: str,
                   cells: Iterable[Cell]) -> dict[str, set[str]]:
    """Per training backbone, the recorded scorers whose step costs place the line of time
    against step cost (:func:`cost_line`) for the configs of ``cells``: the fastest, the middle
    and the slowest of the scorers recorded at their default settings on ``device`` (of a config
    recorded only at other settings, its scorers by name: the bench times their defaults, which
    :func:`estimate` reads for them too), by their median cell time over the config's median,
    averaged over the backbone's configs, and softmax (the bench's baseline, timed anyway).
    These points span the records' range of step costs at a fraction of the bench time of every
    recorded scorer."""
    times = record_times(records, device)
    slowness: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    seen = set()
    for cell in cells:
        backbone = backbone_of(cell.task)
        key = _config_key(cell.task, cell.task_version, cell.config, cell.role)
        recorded = times.get(key) or times.get((*key[:3], REPORT)) or {}
        medians = ({label: statistics.median(ts) for label, ts in recorded.items()
                    if "," not in label}
                   or {label.split(",")[0]: statistics.median(ts)
                       for label, ts in recorded.items()})
        if backbone is None or key in seen or not medians:
            continue
        seen.add(key)
        typical = statistics.median(medians.values())
        for label, t in medians.items():
            slowness[backbone][label].append(t / typical if typical > 0 else 1.0)
    out = {}
    for backbone, ratios in slowness.items():
        ranked = sorted(ratios, key=lambda name: (statistics.fmean(ratios[name]), name))
        out[backbone] = {"softmax", ranked[0], ranked[len(ranked) // 2], ranked[-1]}
    return out


# The bench backbone a task's track trains (tasks/bench.py BACKBONES).
TRACK_BACKBONES = {"icl": "icl", "decoder": "decoder", "encoder": "encoder"}


def backbone_of(task: str) -> str | None:
    """The bench backbone of the task's track; None off the training tracks."""
    from tasks import get_task_class

    try:
        return TRACK_BACKBONES.get(get_task_class(task).track)
    except KeyError:
        return None


class StepCostError(RuntimeError):
    """The step-cost bench could not run a scorer it was asked to time."""


class StepCost:
    """``cost(task, scorer)``: the scorer's training-step time over softmax's on the backbone of
    the task's track (1.0 for softmax, for other tracks, and for a causal-only scorer on the
    bidirectional encoder, whose cells are skipped; None for a scorer not benched there),
    measured on first use for ``scorers`` and the backbone's ``anchors`` (:func:`anchor_scorers`)
    on that backbone in one interleaved ``bench_train`` (small size, ``repeats`` steps after one
    warm-up, training's paths, ``threads`` torch threads, 0: torch's choice; on a CPU in process
    CPU time, which the load of other jobs on a shared machine barely moves). A scorer the bench
    cannot run is a :class:`StepCostError` naming its error, not a cost."""

    def __init__(self, device: str, scorers: Iterable[str], *, repeats: int = 3,
                 threads: int = 0, anchors: dict[str, set[str]] | None = None):
        self.device = device
        self.scorers = sorted(set(scorers))
        self.anchors = anchors or {}
        self.repeats = repeats
        self.threads = threads
        self.ratios: dict[str, dict[str, float]] = {}
        self.errors: dict[str, dict[str, str]] = {}

    def __call__(self, task: str, scorer: str) -> float | None:
        import scorers
        from tasks.bench import BACKBONES

        backbone = backbone_of(task)
        if backbone is None or scorer == "softmax":
            return 1.0
        if scorer not in self.benched(backbone):
            return None
        if BACKBONES[backbone].bidirectional and scorers.get_scorer_class(scorer).causal_only:
            return 1.0
        if backbone not in self.ratios:
            self.ratios[backbone], self.errors[backbone] = self.measure(backbone)
        if scorer not in self.ratios[backbone]:
            from scorers.trial import is_builtin, source_of

            error = self.errors[backbone].get(scorer, "no step time")
            plugin = ("" if is_builtin(scorer) else
                      f"--plugin {source_of(scorers.get_scorer_class(scorer))[0]} ")
            raise StepCostError(f"the step-cost bench could not train scorer {scorer} on the "
                                f"{backbone} backbone ({error}), so its cells have no estimate; "
                                f"fix the scorer (`scorebench check {plugin}--scorers {scorer}` "
                                "runs the scorer checks on it) or leave it out of --scorers")
        return self.ratios[backbone][scorer]

    def benched(self, backbone: str) -> list[str]:
        return sorted({*self.scorers, *self.anchors.get(backbone, ())})

    def measure(self, backbone: str) -> tuple[dict[str, float], dict[str, str]]:
        """The step ratios of the scorers the bench ran on ``backbone``, and the errors of
        those it could not."""
        import torch

        from tasks.bench import TrainBenchConfig, bench_train, train_rows

        cuda = self.device.startswith("cuda")
        config = TrainBenchConfig(backbones=[backbone], repeats=self.repeats, warmup=1,
                                  device="cuda" if cuda else "cpu", threads=self.threads,
                                  clock="wall" if cuda else "cpu")
        before = torch.get_num_threads()
        try:
            result = bench_train(self.benched(backbone), config)
        finally:
            torch.set_num_threads(before)
        ratios, errors = {}, {}
        for r in train_rows(result):
            if r["step_ratio"] is not None and r["step_ratio"] > 0:
                ratios[r["scorer"]] = r["step_ratio"]
            else:
                errors[r["scorer"]] = r["error"] or "no step time"
        return ratios, errors


def estimate(cells: list[Cell], records: Iterable[dict], device: str, *,
             hardware_name: str | None = None,
             calibrator: Callable[[Cell, str], tuple[float, str]] | None = None,
             declared: dict | None = None,
             step_cost: Callable[[str, str], float] | None = None,
             threads: int = 0, converged_at: dict[str, int] | None = None,
             cap_only: Iterable[Cell] = (),
             fitter: Callable[[Cell, str], Fit] | None = None) -> list[TaskEstimate]:
    """Per task (in first-seen order), the cells to run and their expected total seconds.
    ``step_cost(task, scorer)``: the scorer's training-step cost over softmax's (:class:`StepCost`;
    None: every scorer costs what softmax costs). ``threads``: the torch threads of the default
    calibration's runs, as a cell of the run gets them (0: torch's choice). ``converged_at``:
    per task, the profile's ``softmax_converged_at`` (:func:`calibrate`). ``cap_only``: cells
    that run only where a scorer never learns (a grid grown past its rates where no seed reached
    the target): counted at the cap in ``at_cap``, neither in the total nor in ``cells``.
    ``fitter``: the calibration's line (:func:`fit`) of a converged config that has records on
    other hardware only, timed at the lengths they trained."""
    hw = hardware_name or device_class(device)
    times, trained, caps = _recorded(records, hw)
    fitter = fitter or (lambda c, d: fit(c, d, run=lambda c2, d2: _timed_run(c2, d2, threads)))
    calibrator = calibrator or (lambda c, d: calibrate(
        c, d, threads=threads, converged_at=(converged_at or {}).get(c.task)))
    scaled: set[str] = set()

    def cost(cell: Cell) -> float:
        if step_cost is None:
            return 1.0
        value = step_cost(cell.task, cell.scorer)
        if value != 1.0:
            scaled.add(cell.scorer)
        return value

    def unit(task: str, label: str) -> float | None:
        return 1.0 if step_cost is None else step_cost(task, label.split(",")[0])
    by_task: dict[str, list[Cell]] = defaultdict(list)
    cap_only = list(cap_only)
    only = {c.id for c in cap_only}
    for cell in [*cells, *cap_only]:
        by_task[cell.task].append(cell)
    out = []
    for task, group in by_task.items():
        counted = sum(c.id not in only for c in group)
        configs: dict[tuple, list[Cell]] = defaultdict(list)
        for cell in group:
            configs[_config_key(cell.task, cell.task_version, cell.config, cell.role)].append(cell)
        total, sources, beyond = 0.0, [], 0.0
        scaled.clear()
        for key, members in configs.items():
            found = key if key in times else (*key[:3], REPORT)
            known = times.get(found)

            @functools.cache
            def line() -> tuple[float, float] | None:   # benches the recorded scorers: on demand
                points = [(unit(task, label), statistics.median(ts))
                          for label, ts in known.items()]
                points = [(r, t) for r, t in points if r is not None]
                return cost_line(points) if points else None

            if known and not all(known.get(_scorer_label(c)) for c in members) and not line():
                known = None        # no recorded scorer has a step cost to place the others on
            if known:
                steps = trained.get(found)            # a converged config: times are per step

                def per_step(c: Cell) -> float:
                    own = known.get(_scorer_label(c))
                    return statistics.median(own) if own else line()[0] + line()[1] * cost(c)

                spent, more = _at_lengths(members, only, steps or {}, caps.get(found),
                                          lambda c, n: per_step(c) * n)
                total, beyond = total + spent, beyond + more
                sources.append(f"records ({sum(map(len, known.values()))} on {hw})" + (
                    f"; per trained step, at the recorded median of {_median_steps(steps):.0f}"
                    " steps where a scorer has none" if steps else ""))
                continue
            per_cell = (declared or {}).get("seconds_per_cell", {}).get(task)
            if per_cell is not None:
                total += per_cell * sum(c.id not in only for c in members)
                beyond += per_cell * sum(c.id in only for c in members)
                sources.append(f"profile's estimate for {declared['device']}, not measured here")
                continue
            lengths = key if trained.get(key) else (*key[:3], REPORT)
            elsewhere = trained.get(lengths)
            try:
                if elsewhere:
                    calibrated = fitter(members[0], device)
                else:
                    seconds, how = calibrator(members[0], device)
            except Exception as e:  # noqa: BLE001 - a failed calibration is reported, not fatal
                out.append(TaskEstimate(task, counted, None, f"no estimate: {e}"))
                break
            if elsewhere:
                models = caps.get(lengths, calibrated.steps) / calibrated.steps
                spent, more = _at_lengths(
                    members, only, elsewhere, calibrated.steps * models,
                    lambda c, n: (calibrated.fixed + calibrated.per_step * n / models) * cost(c))
                total, beyond = total + spent, beyond + more
                sources.append(f"{calibrated.how}, at the steps "
                               f"{sum(map(len, elsewhere.values()))} records trained on other "
                               f"hardware (a scorer without records at their median, "
                               f"{_median_steps(elsewhere) / models:.0f})")
                continue
            total += sum(seconds * cost(c) for c in members if c.id not in only)
            beyond += sum(seconds * cost(c) for c in members if c.id in only)
            sources.append(how)
        else:
            if scaled:
                sources.append(f"{len(scaled)} scorer(s) scaled by their step cost")
            out.append(TaskEstimate(task, counted, total,
                                    "; ".join(dict.fromkeys(sources)),
                                    total + beyond if beyond else None))
    return out


def _median_steps(lengths: dict[str, list[int]]) -> float:
    return statistics.median(n for ns in lengths.values() for n in ns)


def _at_lengths(members: list[Cell], only: set[str], lengths: dict[str, list[int]],
                cap: float | None, seconds_at: Callable[[Cell, float], float]
                ) -> tuple[float, float]:
    """(total, beyond the total at the cap) of one config's cells, ``seconds_at(cell, steps)``
    each: a cell at the median steps its scorer's records trained (``lengths``), else every
    record's (1 for a config that does not train to convergence, which has none); one in
    ``only`` at the cap (``cap``: None, at its length), in ``beyond`` alone; one whose scorer has
    no lengths adds the rest of the way to the cap to ``beyond``."""
    every = [n for ns in lengths.values() for n in ns] or [1]
    total = beyond = 0.0
    for c in members:
        own = lengths.get(_scorer_label(c))
        length = statistics.median(own or every)
        seconds = seconds_at(c, length)
        at_cap = seconds if cap is None else seconds_at(c, cap)
        if c.id in only:
            beyond += at_cap
        else:
            total += seconds
            if lengths and not own:
                beyond += max(at_cap - seconds, 0.0)
    return total, beyond


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
