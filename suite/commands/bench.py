"""``scorebench bench scorers|train``: a shortcut to the cost track's tasks ``bench_scorers`` and
``bench_train`` (tasks/cost.py): their cells run through the harness's runner (profile ``bench``,
seed 0) and measure again each time; ``scorebench run --tasks bench_*`` runs them like any task."""
from __future__ import annotations

from registry.settings import declared, default
from tasks.bench import ScorerBenchConfig, TrainBenchConfig

from . import positive_int


def _common_options(p, config: type) -> None:
    p.add_argument("--scorers", default="*", metavar="a,ssa*",
                   help="scorers to measure (names, aliases or wildcards; default all)")
    p.add_argument("--repeats", type=positive_int, default=default(config, "repeats"), metavar="N",
                   help=f"timed repeats per variant; the median is reported (default "
                        f"{default(config, 'repeats')})")
    p.add_argument("--warmup", type=positive_int, default=default(config, "warmup"), metavar="N",
                   help=f"untimed runs first, where compilation happens (default "
                        f"{default(config, 'warmup')})")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--clock", choices=declared(config, "clock").allowed(),
                   default=default(config, "clock"),
                   help="wall time (default) or this process's CPU time (steadier on a "
                        "shared machine with one thread)")
    p.add_argument("--block-size", type=positive_int, default=None, metavar="N",
                   help="query rows per block of every form (default: each form's own; 64 for "
                        "the compiled, fused, dense and topk paths, 64 or 128 by row length "
                        "for blocked)")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory for the cost records (default ./results)")
    p.add_argument("--no-records", action="store_true", help="print the table only")


def _choices(key: str) -> tuple:
    return declared(ScorerBenchConfig, key).allowed()


def register(sub, common):
    p = sub.add_parser("bench", help="measure what each scorer costs (the cost track)",
                       description="Measure each scorer's cost as a ratio to softmax in the "
                                   "same run, print a table and write cost-track records.")
    what = p.add_subparsers(dest="bench", required=True, metavar="WHAT")
    s = what.add_parser("scorers", parents=[common], help="forward+backward of every attend",
                        description="Forward + backward time and peak memory of every scorer's "
                                    "attend, as shipped and through scorers.fast, as ratios to "
                                    "softmax through F.scaled_dot_product_attention.")
    s.add_argument("--shapes", default="8,8,128,32;4,8,512,64", metavar="B,H,L,D;...",
                   help="input shapes (default '8,8,128,32;4,8,512,64')")
    s.add_argument("--lengths", default=None, metavar="L1,L2,...",
                   help="a length sweep: every shape of --shapes at each of these lengths (its "
                        "L replaced), e.g. --shapes 1,8,0,64 --lengths 256,512,1024,2048; "
                        "prints time and memory against L with their log-log slopes and writes "
                        "a log-log plot (--plot)")
    s.add_argument("--plot", default=None, metavar="PNG",
                   help="where the length sweep's plot goes (default "
                        "RESULTS/bench_scorers/scaling.png)")
    s.add_argument("--mask", choices=_choices("mask"), default=default(ScorerBenchConfig, "mask"),
                   help=f"attention mask (default {default(ScorerBenchConfig, 'mask')})")
    s.add_argument("--dtype", choices=_choices("dtype"),
                   default=default(ScorerBenchConfig, "dtype"))
    s.add_argument("--fast", choices=_choices("fast_mode"),
                   default=default(ScorerBenchConfig, "fast_mode"),
                   help=f"fast-path mode measured next to attend (default "
                        f"{default(ScorerBenchConfig, 'fast_mode')}; off: attend only)")
    _common_options(s, ScorerBenchConfig)
    s.set_defaults(func=run_scorers)
    t = what.add_parser("train", parents=[common], help="training-step time of each backbone",
                        description="Training-step time (forward, backward, Adam) of each "
                                    "backbone per scorer, as a ratio to the softmax backbone.")
    backbones = ",".join(default(TrainBenchConfig, "backbones"))
    t.add_argument("--backbones", default=backbones, metavar="a,b",
                   help=f"backbones of tasks/models (default {backbones})")
    t.add_argument("--size", default=default(TrainBenchConfig, "size"),
                   choices=declared(TrainBenchConfig, "size").allowed(),
                   help="model and batch sizes (default small: seconds per step on a CPU; "
                        "tiny: a quick check that the bench runs)")
    t.add_argument("--fast", default=default(TrainBenchConfig, "fast_mode"),
                   choices=declared(TrainBenchConfig, "fast_mode").allowed(),
                   help="the backbones' scorer paths: auto (default) and off as training runs "
                        "them ([run] fast), or one mode of scorers.fast")
    _common_options(t, TrainBenchConfig)
    t.set_defaults(func=run_train)


def _device(args) -> str:
    import torch

    if args.device:
        try:
            device = torch.device(args.device)
        except RuntimeError:
            raise SystemExit(f"scorebench bench: --device {args.device!r} is not a torch device "
                             f"(cpu, cuda, cuda:1)") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit("scorebench bench: --device cuda but no GPU is visible")
        return str(device)
    return "cuda" if torch.cuda.is_available() else "cpu"


def _fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def run_bench_cells(task: str, overrides: dict, scorers_spec: str, *, results: str | None,
                    progress=None) -> list[dict]:
    """Run the cells of ``task`` (a cost-track task) for the scorers of ``scorers_spec`` through
    the harness's runner (profile ``bench``, seed 0), measuring again even where a record exists;
    write each record under ``results`` (None: write nothing). Returns the records."""
    from tasks.bench import PROFILE
    from ..cells import expand
    from ..profiles import Profile
    from ..runner import CellJob, run_cell
    from ..store import ResultStore

    profile = Profile(name=PROFILE, description="scorebench bench", files=["scorebench bench"],
                      tasks=[task], scorers=scorers_spec, seeds=[0], time_limit_s=None,
                      task_overrides={task: overrides}, fast="off")
    store = ResultStore(results) if results else None
    records = []
    for p in expand(profile):
        if progress:
            progress(f"{task}: {p.cell.scorer}")
        record = run_cell(CellJob(p.cell, p.skip_reason),
                          device=str(overrides.get("device", "cpu")))
        if store is not None:
            store.write(record)
        records.append(record)
    return records


def _options(args, **more) -> dict:
    return dict(repeats=args.repeats, warmup=args.warmup, device=_device(args),
                threads=args.threads or 0, clock=args.clock, fast_mode=args.fast,
                block_size=args.block_size, **more)


def _run(task: str, overrides: dict, args, console) -> list[dict]:
    from tasks import TaskError

    from ..profiles import ProfileError

    try:
        with console.status("measuring") as status:
            records = run_bench_cells(task, overrides, args.scorers,
                                      results=None if args.no_records else args.results,
                                      progress=lambda text: status.update(text))
    except (TaskError, ProfileError) as e:
        raise SystemExit(f"scorebench bench: {e}") from None
    if not args.no_records:
        console.print(f"wrote {len(records)} cost record(s) under {args.results}/")
    return records


def _footer(console, records, repeats: int) -> None:
    """The machine's load over the measurement, then each scorer's failure or note."""
    from ..runner import failure_reason

    loads = [r["extra"] for r in records if r["extra"]]
    if loads:
        fmt = lambda x: "/".join(f"{v:.2f}" for v in x) if x else "n/a"  # noqa: E731
        console.print(f"load average (1/5/15 min) before "
                      f"{fmt(loads[0].get('load_average_before'))}, after "
                      f"{fmt(loads[-1].get('load_average_after'))}; {repeats} repeats, median")
    for r in records:
        if r["status"] != "ok":
            console.print(f"[red]{r['cell']['scorer']}: {r['status']}: {failure_reason(r)}[/]")
        for note in r["extra"].get("notes", []):
            console.print(f"[yellow]{r['cell']['scorer']}: {note}[/]")


def run_scorers(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from tasks.bench import BenchError, parse_lengths, parse_shapes, sweep_shapes

    console = Console()
    try:
        shapes = parse_shapes(args.shapes.replace(",0,", ",1,")) if args.lengths else \
            parse_shapes(args.shapes)
        if args.lengths:
            shapes = sweep_shapes(shapes, parse_lengths(args.lengths))
        overrides = _options(args, shapes=[list(s) for s in shapes],
                             mask=args.mask, dtype=args.dtype)
    except BenchError as e:
        raise SystemExit(f"scorebench bench scorers: {e}") from None
    records = _run("bench_scorers", overrides, args, console)
    labels = ["x".join(str(d) for d in s) for s in overrides["shapes"]]
    table = Table(title=f"forward+backward, ratio to softmax SDPA ({overrides['device']}, "
                        f"{args.dtype}, mask {args.mask}, {args.clock} clock)")
    table.add_column("scorer")
    for label in labels:
        table.add_column(f"{label}\nattend ×")
        table.add_column("\nfast ×")
        table.add_column("\nmem ×")
    table.add_column("fast path")
    for r in records:
        m, paths = r["metrics"], r["extra"].get("paths", {})
        cells, path = [r["cell"]["scorer"]], ""
        for label in labels:
            cells += [_fmt(m.get(f"attend_ratio_{label}")), _fmt(m.get(f"fast_ratio_{label}")),
                      _fmt(m.get(f"peak_mem_ratio_{label}"))]
            p = paths.get(label, {})
            path = p.get("fast") or (f"({p['attend']})" if p.get("attend") else path)
        table.add_row(*cells, path)
    console.print(table)
    _footer(console, records, args.repeats)
    if args.lengths:
        _print_scaling(console, records, args)
    return 0


def _print_scaling(console, records, args) -> None:
    """Time and memory against L per scorer, their log-log slopes, and the plot."""
    from pathlib import Path

    from rich.table import Table

    from leaderboard.rendering.plots import loglog_slope, plot_scaling, scaling_series

    for (b, h, d), by_scorer in scaling_series(records).items():
        lengths = sorted({p[0] for points in by_scorer.values() for p in points})
        table = Table(title=f"cost against length (B={b}, H={h}, D={d}): ms / MB, and the "
                            f"log-log slope (1 = linear, 2 = quadratic)")
        table.add_column("scorer")
        for length in lengths:
            table.add_column(f"L={length}")
        table.add_column("time slope")
        table.add_column("memory slope")
        for name, points in sorted(by_scorer.items()):
            at = {p[0]: p for p in points}
            cells = [f"{at[x][1]:.1f} / {_fmt(at[x][2], 1)}" if x in at else "-"
                     for x in lengths]
            table.add_row(name, *cells,
                          _fmt(loglog_slope([(p[0], p[1]) for p in points])),
                          _fmt(loglog_slope([(p[0], p[2]) for p in points])))
        console.print(table)
    plot = Path(args.plot) if args.plot else Path(args.results) / "bench_scorers" / "scaling.png"
    for path in plot_scaling(records, plot):
        console.print(f"wrote {path}")


def run_train(args) -> int:
    import statistics

    from rich.console import Console
    from rich.table import Table

    console = Console()
    backbones = [b.strip() for b in args.backbones.split(",") if b.strip()]
    overrides = _options(args, backbones=backbones, size=args.size)
    records = _run("bench_train", overrides, args, console)
    table = Table(title=f"training step, ratio to softmax ({overrides['device']}, size "
                        f"{args.size}, fast {args.fast}, {args.clock} clock)")
    table.add_column("scorer")
    for bb in backbones:
        base = [statistics.median(r["extra"]["softmax_times_ms"][bb]) for r in records
                if r["extra"].get("softmax_times_ms", {}).get(bb)]
        ms = f"{statistics.median(base):.1f} ms" if base else "failed"
        table.add_column(f"{bb}\n(softmax {ms}) ×")
    table.add_column("path")
    for r in records:
        m = r["metrics"]
        paths = sorted(set(r["extra"].get("paths", {}).values()))
        table.add_row(r["cell"]["scorer"], *[_fmt(m.get(f"step_ratio_{bb}")) if
                                             f"step_ratio_{bb}" in m else "skip"
                                             for bb in backbones], ",".join(paths))
    console.print(table)
    _footer(console, records, args.repeats)
    return 0
