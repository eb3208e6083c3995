"""``scorebench nightly``: run missing cells, publish ``nightly-YYYY-MM-DD``, report regressions."""
from __future__ import annotations


def register(sub, common):
    from .run import add_run_arguments

    p = sub.add_parser(
        "nightly", parents=[common], help="run missing cells, publish a dated release, "
                                          "report regressions",
        description="Run the cells of a profile that have no record yet (every option of "
                    "`scorebench run` applies), publish the results as the release "
                    "nightly-YYYY-MM-DD, compare it with the previous nightly release and write "
                    "REGRESSIONS.md into the new release. Exits 1 when a metric moved beyond its "
                    "seed noise in the worse direction, or when a (task, scorer) has more failed "
                    "cells than before.")
    add_run_arguments(p)
    p.add_argument("--releases", default="leaderboard/releases", metavar="DIR",
                   help="releases directory (default leaderboard/releases)")
    p.add_argument("--leaderboard", metavar="FILE",
                   help="the LEADERBOARD.md to refresh (default ./LEADERBOARD.md for "
                        "--releases leaderboard/releases, <releases>/LEADERBOARD.md for any "
                        "other directory)")
    p.add_argument("--date", metavar="YYYY-MM-DD",
                   help="the release date (default: today, UTC)")
    p.add_argument("--release", metavar="NAME",
                   help="release name instead of nightly-<date> (it is then not compared as a "
                        "nightly by later runs)")
    p.add_argument("--z", type=float, metavar="Z",
                   help="a metric moved when |Δ| > Z x its seed standard error (default 3, "
                        "leaderboard.publishing.regressions.Z_THRESHOLD)")
    p.add_argument("--rtol", type=float, metavar="R",
                   help="... and by more than R x its magnitude (default 1e-4, "
                        "leaderboard.publishing.regressions.RELATIVE_FLOOR)")
    p.add_argument("--html", action="store_true",
                   help="also write the release's index.html (as `scorebench publish --html`)")
    p.add_argument("--skip-run", action="store_true",
                   help="publish and compare only; run no cell")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..nightly import nightly
    from . import run as run_command

    if args.dry_run:
        return run_command.run(args)
    return nightly(args)
