"""``scorebench summary [RELEASE]``: a release's answer in a few sentences (the front page's)."""
from __future__ import annotations

import difflib
import textwrap


def register(sub, common):
    p = sub.add_parser("summary", parents=[common],
                       help="say in a few sentences what a release found")
    p.add_argument("release", nargs="?", metavar="RELEASE",
                   help="a release in --out (default: the newest)")
    p.add_argument("--out", default="leaderboard/releases", metavar="DIR",
                   help="releases directory (default leaderboard/releases, the committed board)")
    p.set_defaults(func=run)


def run(args) -> int:
    from leaderboard.rendering import summary
    from leaderboard.publishing.release import ReleaseError, list_releases, load_release

    releases = {d.name: d for d, _ in list_releases(args.out)}
    if not releases:
        raise SystemExit(f"scorebench summary: no release in {args.out}; publish one first "
                         "(scorebench publish) or point --out at a releases directory")
    name = args.release or next(iter(releases))
    if name not in releases:
        close = difflib.get_close_matches(name, list(releases), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; releases: {', '.join(releases)}"
        raise SystemExit(f"scorebench summary: no release {name!r} in {args.out}{hint}")
    try:
        board = load_release(releases[name])
    except ReleaseError as e:
        raise SystemExit(f"scorebench summary: {e}") from None
    print(f"{name} ({releases[name]}):")
    for sentence in summary.sentences(board):
        print(textwrap.fill(sentence, 100, initial_indent="- ", subsequent_indent="  "))
    return 0
