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
    from leaderboard.publishing.release import list_releases, load_release

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


def joining_line(board: Path, release: str, meta: dict, seeds: list[int], args) -> str:
    """The first line ``beside`` prints: the release, profile and seeds the user's scorers
    join."""
    whose = (f"the baseline {meta['baseline']}'s" if args.seeds == seeds
             else f"given with --seeds; the baseline {meta['baseline']}'s are {seeds}")
    return (f"joining release {release} of {board}: profile {args.profile}, seeds {args.seeds} "
            f"({whose})")


def beside(args: argparse.Namespace, release: str, meta: dict) -> int:
    """Run the user's scorers at ``args.profile`` and ``args.seeds`` (the release's unless
    given), then publish them beside the committed records of ``release``; the run's exit
    status (1 when a cell failed)."""
    from leaderboard.publishing.release import ReleaseError

    import scorers

    from .jobs import run_profile
    from .publishing import publish_release

    board = Path(args.board)
    status = run_profile(args)
    results = Path(args.results)
    name = f"{release}{BESIDE_SUFFIX}{'+'.join(sorted(scorers.resolve_scorers(args.scorers)))}"
    try:
        publish_release([board / "records", results], name, results / "releases",
                        results / "LEADERBOARD.md", html=args.html, refuse_unclean=False,
                        baseline=meta["baseline"])
    except (ReleaseError, FileNotFoundError) as exc:
        raise SystemExit(f"scorebench beside: {exc}") from None
    return status
