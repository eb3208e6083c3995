"""``scorebench bench scorers|train``: the cost track (ratios to softmax, measured in one run)."""
from __future__ import annotations

import argparse


def _positive(text: str) -> int:
    try:
        n = int(text)
        if n >= 1:
            return n
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r}: give an integer >= 1")


def _common_options(p) -> None:
    p.add_argument("--scorers", default="*", metavar="a,ssa*",
                   help="scorers to measure (names, aliases or wildcards; default all)")
    p.add_argument("--repeats", type=_positive, default=5, metavar="N",
                   help="timed repeats per variant; the median is reported (default 5)")
    p.add_argument("--warmup", type=_positive, default=2, metavar="N",
                   help="untimed runs first, where compilation happens (default 2)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--threads", type=_positive, default=None, metavar="N",
                   help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall time (default) or this process's CPU time (steadier on a "
                        "shared machine with one thread)")
    p.add_argument("--block-size", type=_positive, default=64, metavar="N",
                   help="query rows per block of the compiled and fused paths (default 64)")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory for the cost records (default ./results)")
    p.add_argument("--no-records", action="store_true", help="print the table only")


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
    s.add_argument("--mask", choices=["causal", "none", "padding"], default="causal",
                   help="attention mask (default causal)")
    s.add_argument("--dtype", default="float32",
                   choices=["float32", "bfloat16", "float16", "float64"])
    s.add_argument("--fast", default="auto",
                   choices=["off", "auto", "compile", "fused", "flex", "topk"],
                   help="fast-path mode measured next to attend (default auto; off: attend only)")
    _common_options(s)
    s.set_defaults(func=run_scorers)
    t = what.add_parser("train", parents=[common], help="training-step time of each backbone",
                        description="Training-step time (forward, backward, Adam) of each "
                                    "backbone per scorer, as a ratio to the softmax backbone.")
    t.add_argument("--backbones", default="icl,decoder,encoder", metavar="a,b",
                   help="backbones of tasks/models (default icl,decoder,encoder)")
    t.add_argument("--size", default="small", choices=["tiny", "small", "paper"],
                   help="model and batch sizes (default small: seconds per step on a CPU; "
                        "tiny: a quick check that the bench runs)")
    t.add_argument("--fast", default="off",
                   choices=["off", "auto", "compile", "fused", "flex", "topk"],
                   help="run the backbones' scorers through scorers.fast (default off)")
    _common_options(t)
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


def _names(spec: str) -> list[str]:
    import scorers

    try:
        return scorers.resolve_scorers(spec)
    except scorers.ScorerError as e:
        raise SystemExit(f"scorebench bench: {e}") from None


def _load_line(before, after) -> str:
    fmt = lambda x: "/".join(f"{v:.2f}" for v in x) if x else "n/a"  # noqa: E731
    return f"load average (1/5/15 min) before {fmt(before)}, after {fmt(after)}"


def _fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _write(records, results: str, console) -> None:
    from ..store import ResultStore

    store = ResultStore(results)
    for record in records:
        store.write(record)
    console.print(f"wrote {len(records)} cost record(s) under {results}/")


def run_scorers(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..bench import BenchError, ScorerBenchConfig, bench_scorers, parse_shapes, scorer_records
    from ..bench import scorer_rows

    console = Console()
    try:
        config = ScorerBenchConfig(
            shapes=[list(s) for s in parse_shapes(args.shapes)], repeats=args.repeats,
            warmup=args.warmup, mask=args.mask, dtype=args.dtype, device=_device(args),
            threads=args.threads or 0, clock=args.clock, fast_mode=args.fast,
            block_size=args.block_size)
        config.check()
    except BenchError as e:
        raise SystemExit(f"scorebench bench scorers: {e}") from None
    names = _names(args.scorers)
    with console.status("measuring") as status:
        result = bench_scorers(names, config, progress=lambda text: status.update(text))
    rows = scorer_rows(result)
    labels = list(result.reference)
    table = Table(title=f"forward+backward, ratio to softmax SDPA ({config.device}, "
                        f"{config.dtype}, mask {config.mask}, {config.clock} clock)")
    table.add_column("scorer")
    for label in labels:
        ref = result.reference[label]
        ms = f"{ref.median * 1e3:.1f} ms" if ref.median else "failed"
        table.add_column(f"{label}\nattend ×")
        table.add_column(f"SDPA {ms}\nfast ×")
        table.add_column("\nmem ×")
    table.add_column("fast path")
    by = {(r["scorer"], r["shape"]): r for r in rows}
    for name in names:
        cells, path = [name], ""
        for label in labels:
            r = by.get((name, label))
            if r is None:
                cells += ["error", "", ""]
                continue
            cells += [_fmt(r["attend_ratio"]), _fmt(r["fast_ratio"]), _fmt(r["mem_ratio"])]
            path = r["fast_path"] or f"({r['attend_path']})"
        table.add_row(*cells, path)
    console.print(table)
    console.print(_load_line(result.load_before, result.load_after)
                  + f"; {config.repeats} repeats, median; {result.wall_time_s:.0f} s in all")
    for name, err in result.setup_errors.items():
        console.print(f"[red]{name}: {err}[/]")
    for r in rows:
        for variant, err in r["errors"].items():
            console.print(f"[red]{r['scorer']} {r['shape']} {variant}: {err}[/]")
    if not args.no_records:
        _write(scorer_records(result), args.results, console)
    return 0


def run_train(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..bench import BenchError, TrainBenchConfig, bench_train, train_records, train_rows

    console = Console()
    try:
        config = TrainBenchConfig(
            backbones=[b.strip() for b in args.backbones.split(",") if b.strip()],
            repeats=args.repeats, warmup=args.warmup, device=_device(args),
            threads=args.threads or 0, clock=args.clock, fast_mode=args.fast,
            block_size=args.block_size, size=args.size)
        config.check()
    except BenchError as e:
        raise SystemExit(f"scorebench bench train: {e}") from None
    names = _names(args.scorers)
    with console.status("measuring") as status:
        result = bench_train(names, config, progress=lambda text: status.update(text))
    rows = train_rows(result)
    table = Table(title=f"training step, ratio to softmax ({config.device}, size {config.size}, "
                        f"fast {config.fast_mode}, {config.clock} clock)")
    table.add_column("scorer")
    for bb in result.variants:
        base = result.variants[bb].get("softmax")
        ms = f"{base.median * 1e3:.1f} ms" if base is not None and base.median else "failed"
        table.add_column(f"{bb}\n(softmax {ms}) ×")
    by = {(r["scorer"], r["backbone"]): r for r in rows}
    for name in result.scorers:
        table.add_row(name, *[_fmt(by[(name, bb)]["step_ratio"]) if by[(name, bb)]["step_ratio"]
                              is not None else "skip" for bb in result.variants])
    console.print(table)
    console.print(_load_line(result.load_before, result.load_after)
                  + f"; {config.repeats} repeats, median; {result.wall_time_s:.0f} s in all")
    for r in rows:
        if r["error"]:
            console.print(f"[yellow]{r['scorer']} {r['backbone']}: {r['error']}[/]")
    if not args.no_records:
        _write(train_records(result), args.results, console)
    return 0
