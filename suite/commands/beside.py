"""``scorebench beside``: a user's scorer at the board's profile and seeds, published beside the
committed records."""
from __future__ import annotations


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
                    "applies; --profile and --seeds default to the release's.")
    add_run_arguments(p)
    p.add_argument("--board", default="leaderboard", metavar="DIR",
                   help="the board's directory: records/ and releases/ (default ./leaderboard)")
    p.add_argument("--html", action="store_true", help="also write the release's index.html")
    p.set_defaults(func=run, profile=None, results="beside-results")


def run(args) -> int:
    from ..beside import beside, board_setting

    if not args.scorers:
        raise SystemExit("scorebench beside: name your scorer(s) with --scorers (with "
                         "--plugin FILE.py for a scorer of your own)")
    if args.dry_run:
        from pathlib import Path

        from . import run as run_command

        _, _, seeds, profile = board_setting(Path(args.board))
        args.profile, args.seeds = args.profile or profile, args.seeds or seeds
        return run_command.run(args)
    return beside(args)
