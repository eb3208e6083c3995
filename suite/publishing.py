"""A release from a results directory, as ``scorebench publish`` and the nightly job make it:
:func:`leaderboard.publishing.release.publish`, a summary of what it wrote, and on request the
release's ``index.html`` with the registered scorers' metadata (``scorers.json``)."""
from __future__ import annotations

import math
from pathlib import Path


def publish_release(results: str | Path, release: str | None, out: str | Path | None,
                    leaderboard_md: str | Path | None, *, html: bool = False, **options):
    """Publish ``results`` as ``<out>/<release>/`` (keywords as
    :func:`leaderboard.publishing.release.publish`), print what it wrote, and with ``html`` write
    its ``index.html``; the :class:`~leaderboard.publishing.release.Published`. A
    :class:`~leaderboard.publishing.release.ReleaseError` or
    ``FileNotFoundError`` passes to the caller, after the summary of what was written."""
    from leaderboard.publishing.site import write_site
    from leaderboard.publishing.release import publish

    published = publish(results, release, out, leaderboard_md, ranges=validation_ranges(),
                        **options)
    report(published)
    if html:
        names = set(published.board.rows["scorer_name"])
        for page in write_site(published.release_dir, scorer_metadata(names)):
            print(f"wrote {page}")
    return published


def validation_ranges() -> dict[str, list]:
    """{task: [low, high]}: the declared range of each registered task's validation metric
    (``validation_range`` of its config; None for an unbounded end), which tells the release a
    seed whose best value left no gain to make."""
    import tasks

    out = {}
    for name in tasks.list_tasks():
        bounds = getattr(getattr(tasks.get_task_class(name), "Config", None), "validation_range",
                         None)
        if bounds is not None:
            out[name] = [None if math.isinf(end) else float(end) for end in bounds]
    return out


def scorer_metadata(names) -> dict:
    """Registry metadata of the named scorers (built-in, entry points and --plugin files);
    a name that is not registered now is left out."""
    import scorers

    out = {}
    for name in sorted(names):
        try:
            cls = scorers.get_scorer_class(name)
        except scorers.ScorerError:
            continue
        out[name] = {"family": cls.family, "kind": cls.kind, "normalization": cls.normalization,
                     "paper": cls.paper, "version": cls.version,
                     "aliases": [str(a) for a in cls.aliases], "description": cls.description}
    return out


def report(published) -> None:
    """The release's record counts, each problem record, and the files written."""
    meta = published.board.meta
    print(f"release {meta['release']}: {meta['n_used']} records used of {meta['n_files']} files, "
          f"{meta['n_superseded']} superseded, {meta['n_problems']} problem(s)")
    for problem in published.board.problems.to_dict(orient="records"):
        effect = "skipped" if problem["skipped"] else "partly used"
        print(f"  {problem['path']}: {effect}: {problem['reason']}")
    print(f"wrote {published.release_dir}/ ({len(published.files)} files)")
    if published.leaderboard_md is not None:
        print(f"wrote {published.leaderboard_md}")
