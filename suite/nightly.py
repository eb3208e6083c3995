"""The nightly job: run the missing cells, publish a release named by date, compare it with the
previous nightly release, write the regression report.

Steps (``nightly(args)``):

1. run the cells as ``scorebench run`` does, on the same options (:func:`suite.jobs.run_profile`):
   cells that already have a record are kept, so only cells new to the current code run (a
   bumped task or scorer version, a new scorer, a new seed); ``--rerun failed|all`` passes
   through.
2. publish the results directory as ``nightly-YYYY-MM-DD`` (UTC; ``--date`` overrides), with
   ``--html`` also its ``index.html`` (:func:`suite.publishing.publish_release`).
3. Compare each row with the newest earlier ``nightly-*`` release that has it and write
   ``REGRESSIONS.md`` in the new release (rule: :mod:`leaderboard.publishing.regressions`).

Exit status: 0, or 1 when the report has a regression or a row of the previous nightly is gone,
so that a scheduler can alert.
"""
from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from pathlib import Path

NIGHTLY_PREFIX = "nightly-"
NIGHTLY_NAME = re.compile(r"^nightly-\d{4}-\d{2}-\d{2}$")


def release_name(date: str | None = None) -> str:
    date = date or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        raise SystemExit(f"scorebench nightly: --date {date!r} is not a date YYYY-MM-DD") from None
    return NIGHTLY_PREFIX + date


def earlier_nightlies(releases_dir: str | Path, current: str) -> list[Path]:
    """The nightly releases older than ``current`` that have results (results.json.gz), oldest first."""
    root = Path(releases_dir)
    from leaderboard.publishing.release import has_results

    return sorted(p for p in root.glob(f"{NIGHTLY_PREFIX}*")
                  if NIGHTLY_NAME.match(p.name) and p.name < current and has_results(p))


def previous_nightly(releases_dir: str | Path, current: str) -> Path | None:
    """The newest nightly release older than ``current`` that has a results.json."""
    earlier = earlier_nightlies(releases_dir, current)
    return earlier[-1] if earlier else None


def nightly(args) -> int:
    from leaderboard.publishing import regressions
    from leaderboard.publishing.release import ReleaseError, load_release

    from .jobs import run_profile
    from .publishing import publish_release

    z = regressions.Z_THRESHOLD if args.z is None else args.z
    rtol = regressions.RELATIVE_FLOOR if args.rtol is None else args.rtol
    if not z > 0 or not rtol >= 0:
        raise SystemExit(f"scorebench nightly: --z must be > 0 and --rtol >= 0 (got --z {z}, "
                         f"--rtol {rtol})")
    release = args.release or release_name(args.date)
    if not args.skip_run:
        status = run_profile(args)
        if status:
            print("scorebench nightly: some cells failed (error, oom or timeout); they are "
                  "published as failures", file=sys.stderr)
    try:
        published = publish_release(args.results, release, args.releases, args.leaderboard,
                                    html=args.html)
    except (ReleaseError, FileNotFoundError) as exc:
        raise SystemExit(f"scorebench nightly: {exc}") from None
    earlier = earlier_nightlies(args.releases, release)
    previous = earlier[-1] if earlier else None
    report_path = published.release_dir / "REGRESSIONS.md"
    if previous is None:
        report_path.write_text(regressions.first_report(release), encoding="utf-8", newline="\n")
        print(f"no earlier nightly release under {args.releases}; wrote {report_path}")
        return 0
    try:
        before = [load_release(path) for path in earlier]
    except ReleaseError as exc:
        raise SystemExit(f"scorebench nightly: {exc}") from None
    comparison = regressions.compare(before, published.board, z=z, rtol=rtol)
    report_path.write_text(regressions.report(comparison), encoding="utf-8", newline="\n")
    verdict = ("REGRESSION" if comparison.has_regression else "ROWS MISSING" if comparison.missing
               else "no regression")
    print(f"{release} vs {previous.name}: {verdict} ({len(comparison.regressions)} metric(s), "
          f"{len(comparison.failure_regressions)} failure increase(s), "
          f"{len(comparison.missing)} row(s) missing); report: {report_path}")
    for key in comparison.missing:
        print(f"  MISSING since {previous.name}: {key[1]} [{key[0]}] {key[2]} {key[3]}")
    return 1 if comparison.has_alert else 0
