"""``scorebench compare A B``: two scorers of a release, paired over their common seeds."""
from __future__ import annotations

import difflib
import math


def register(sub, common):
    p = sub.add_parser("compare", parents=[common],
                       help="compare two scorers of a release per headline metric and overall")
    p.add_argument("a", metavar="A", help="a scorer of the release (as its rows name it)")
    p.add_argument("b", metavar="B", help="the scorer A is compared with")
    p.add_argument("--release", metavar="NAME", help="a release in --out (default: the newest)")
    p.add_argument("--out", default="leaderboard/releases", metavar="DIR",
                   help="releases directory (default leaderboard/releases, the committed board)")
    p.set_defaults(func=run)


def _num(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.4g}"


def run(args) -> int:
    from tabulate import tabulate

    from leaderboard.method import pairwise
    from leaderboard.publishing.release import ReleaseError, list_releases, load_release

    releases = {d.name: d for d, _ in list_releases(args.out)}
    name = args.release or next(iter(releases), None)
    if name not in releases:
        close = difflib.get_close_matches(name or "", list(releases), n=1)
        raise SystemExit(f"scorebench compare: no release {name!r} in {args.out}"
                         + (f"; did you mean {close[0]!r}?" if close else
                            "; publish one first (scorebench publish) or pass --out DIR"))
    try:
        board = load_release(releases[name])
    except ReleaseError as e:
        raise SystemExit(f"scorebench compare: {e}") from None
    rows = board.rows.to_dict(orient="records")
    scorers = sorted({r["scorer"] for r in rows})
    for s in (args.a, args.b):
        if s not in scorers:
            close = difflib.get_close_matches(s, scorers, n=1)
            raise SystemExit(f"scorebench compare: no scorer {s!r} in release {name}"
                             + (f"; did you mean {close[0]!r}?" if close else
                                f"; its scorers: {', '.join(scorers)}"))
    metrics, overall = pairwise.compare(rows, board.overall_tasks.to_dict(orient="records"),
                                        args.a, args.b, board.meta.get("alpha", 0.05))
    print(f"{args.a} vs {args.b} in release {name}: paired over common seeds, Δ = "
          f"{args.a} - {args.b}, paired t test Holm-corrected across the metrics of a profile")
    print(tabulate([[m["profile"], m["task"], m["metric"], m["n"], _num(m["delta"]),
                     f"[{_num(m['ci_low'])}, {_num(m['ci_high'])}]", _num(m["p_holm"]),
                     _num(m["min_effect"]), m["word"]] for m in metrics],
                   headers=["profile", "task", "metric", "seeds", "Δ", "95% CI", "p (Holm)",
                            "min effect", "verdict"], disable_numparse=True))
    for o in overall:
        print(f"overall ({o['profile']}): P({args.a} better than {args.b}) = {o['poi']:.3f} "
              f"[{o['ci_low']:.3f}, {o['ci_high']:.3f}] over {o['tasks']} tasks, bootstrap p "
              f"of P = 0.5: {_num(o['p'])}")
    return 0
