"""A user's scorer beside the board, in one command (``scorebench beside``).

1. The newest release under ``<board>/releases`` names the profile and the baseline's seeds.
2. The user's scorers run at that profile and those seeds, its tuning protocol included, into a
   results directory of the user's own (:func:`suite.jobs.run_profile`; resumable).
3. The committed records (``<board>/records``) and the user's are published together as
   ``<results>/releases/<release>+<scorers>``, so the user's rows are paired with the committed
   baseline seeds. Nothing is written under ``<board>``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

BESIDE_SUFFIX = "+"


def board_setting(board: Path) -> tuple[str, dict, list[int], str]:
    """The newest release under ``<board>/releases``: its name, meta, the baseline's seeds and
    the profile they ran at."""
    from leaderboard.release import list_releases, load_release

    found = list_releases(board / "releases")
    if not found:
        raise SystemExit(f"scorebench beside: {board / 'releases'} holds no release; give the "
                         "board's directory with --board (default ./leaderboard)")
    path, meta = found[0]
    if len(meta.get("profiles", [])) != 1:
        raise SystemExit(f"scorebench beside: release {path.name} holds profiles "
                         f"{meta.get('profiles')}; name the one to join with --profile")
    rows = load_release(path).rows
    baseline = rows[rows["scorer"] == meta["baseline"]]
    seeds = sorted({int(s) for seeds in baseline["seeds"] for s in seeds})
    if not seeds:
        raise SystemExit(f"scorebench beside: release {path.name} has no {meta['baseline']} "
                         "rows to pair with")
    return path.name, meta, seeds, meta["profiles"][0]


def beside(args: argparse.Namespace) -> int:
    """Run the user's scorers at the board's profile and seeds, then publish them beside the
    committed records; the run's exit status (1 when a cell failed)."""
    from leaderboard.release import ReleaseError

    from .jobs import run_profile
    from .publishing import publish_release

    board = Path(args.board)
    release, meta, seeds, profile = board_setting(board)
    run_args = argparse.Namespace(**{**vars(args), "profile": args.profile or profile,
                                     "seeds": args.seeds or seeds, "tasks": args.tasks})
    print(f"joining release {release} of {board}: profile {run_args.profile}, seeds "
          f"{run_args.seeds} (the baseline {meta['baseline']}'s)")
    status = run_profile(run_args)
    results = Path(args.results)
    import scorers

    name = f"{release}{BESIDE_SUFFIX}{'+'.join(sorted(scorers.resolve_scorers(args.scorers)))}"
    try:
        publish_release([board / "records", results], name, results / "releases",
                        results / "LEADERBOARD.md", html=args.html, refuse_unclean=False,
                        baseline=meta["baseline"])
    except (ReleaseError, FileNotFoundError) as exc:
        raise SystemExit(f"scorebench beside: {exc}") from None
    return status
