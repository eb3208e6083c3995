"""``scorebench nightly``: run missing cells, publish ``nightly-YYYY-MM-DD``, report regressions."""
from __future__ import annotations


def register(sub, common):
    from scorers.fast.policy import FAST_MODES

    from ..executors import get_executor_class, list_executors
    from ..scheduler import RERUN_CHOICES
    from .run import _seeds, _workers, add_estimate_from

    p = sub.add_parser(
        "nightly", parents=[common], help="run missing cells, publish a dated release, "
                                          "report regressions",
        description="Run the cells of a profile that have no record yet, publish the results "
                    "as the release nightly-YYYY-MM-DD, compare it with the previous nightly "
                    "release and write REGRESSIONS.md into the new release. Exits 1 when a "
                    "metric moved beyond its seed noise in the worse direction, or when a "
                    "(task, scorer) has more failed cells than before.")
    p.add_argument("--profile", default="cpu", metavar="NAME|FILE",
                   help="a shipped profile (smoke, cpu, gpu, paper; default cpu) or a TOML file")
    p.add_argument("--tasks", metavar="a,b", help="tasks to run; default: the profile's")
    p.add_argument("--scorers", metavar="a,ssa*", help="scorers to run; default: the profile's")
    p.add_argument("--seeds", type=_seeds, metavar="N|a,b|a-b",
                   help="seeds to run; default: the profile's")
    p.add_argument("--workers", type=_workers, default=1, metavar="N",
                   help="cells run at once (default 1)")
    p.add_argument("--executor", default="local", choices=list_executors(),
                   help="the engine that runs the cells (default local)")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory (default ./results)")
    p.add_argument("--rerun", choices=RERUN_CHOICES,
                   help="also run cells that have a record: 'failed' or 'all'")
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
                        "leaderboard.history.Z_THRESHOLD)")
    p.add_argument("--rtol", type=float, metavar="R",
                   help="... and by more than R x its magnitude (default 1e-4, "
                        "leaderboard.history.RELATIVE_FLOOR)")
    p.add_argument("--html", action="store_true",
                   help="also write the release's index.html (as `scorebench publish --html`)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the cells the run would run and their expected time, and stop")
    add_estimate_from(p)
    p.add_argument("--skip-run", action="store_true",
                   help="publish and compare only; run no cell")
    p.add_argument("--fast", choices=FAST_MODES, default=None,
                   help="the scorers' fast paths in training (default: the profile's [run] fast)")
    for name in list_executors():
        add = getattr(get_executor_class(name), "add_arguments", None)
        if add is not None:
            add(p)
    p.set_defaults(func=run, fail_fast=False)


def run(args) -> int:
    from ..nightly import nightly
    from . import run as run_command

    if args.dry_run:
        return run_command.run(args)
    return nightly(args)
