"""``scorebench beside``: a user's scorer at the board's profile and seeds, published beside the
committed records."""
from __future__ import annotations

# The help of the options of `scorebench run` whose defaults beside changes.
OWN_DEFAULTS = {
    "profile": "a shipped profile or a TOML file (default: the newest release's profile)",
    "seeds": "a count (seeds 0..N-1), a list or a range (default: the seeds of the newest "
             "release's baseline, so that your rows pair with its)",
    "results": "your results directory (default ./beside-results)",
    "estimate_from": "a results directory whose records' wall times the dry run's estimate "
                     "uses besides those of --results and of <board>/records, which it always "
                     "uses (repeatable)",
}


def register(sub, common):
    from .run import add_run_arguments

    p = sub.add_parser(
        "beside", parents=[common], help="run your scorer at the board's profile and seeds and "
                                         "publish it beside the committed records",
        description="Run the scorers of --scorers (a --plugin file's, typically) at the profile "
                    "and seeds of the newest release under <board>/releases, its tuning "
                    "included, into --results (default ./beside-results); then publish the "
                    "committed records of <board>/records and yours together as "
                    "<results>/releases/<release>+<scorers>, paired with the committed baseline "
                    "seeds. Nothing is written under <board>. Every option of `scorebench run` "
                    "applies; --profile and --seeds default to the release's, and --dry-run "
                    "estimates the time from the records of <board>/records and yours, benching "
                    "only your scorers and a few recorded ones.")
    add_run_arguments(p)
    for action in p._actions:
        action.help = OWN_DEFAULTS.get(action.dest, action.help)
    p.add_argument("--board", default="leaderboard", metavar="DIR",
                   help="the board's directory: records/ and releases/ (default ./leaderboard)")
    p.add_argument("--html", action="store_true", help="also write the release's index.html")
    p.set_defaults(func=run, profile=None, results="beside-results")


def run(args) -> int:
    from pathlib import Path

    from ..beside import beside, board_setting, joining_line

    if not args.scorers:
        raise SystemExit("scorebench beside: name your scorer(s) with --scorers (with "
                         "--plugin FILE.py for a scorer of your own)")
    board = Path(args.board)
    release, meta, seeds, profile = board_setting(board)
    args.profile, args.seeds = args.profile or profile, args.seeds or seeds
    print(joining_line(board, release, meta, seeds, args), flush=True)
    if args.dry_run:
        from . import run as run_command

        records = str(board / "records")
        args.estimate_from = [records, *(d for d in args.estimate_from if d != records)]
        return run_command.run(args)
    return beside(args, release, meta)
