"""A release's page on disk: ``<release>/index.html`` (rendered by :mod:`leaderboard.rendering.html`
from the release's results.json.gz, scorers.json and plots) and ``scorers.json``, and the pages of
the sibling releases, so that each page's release selector lists every release."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..rendering.html.page import render_page
from ..rendering.html.scorers import SCORER_FIELDS
from .release import (RESULTS, ReleaseError, has_results, list_releases, load_release,
                      plot_order, read_results)

INDEX = "index.html"
SCORERS_JSON = "scorers.json"


def read_scorers(release_dir: Path) -> dict:
    path = Path(release_dir) / SCORERS_JSON
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["scorers"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{path}: not a readable scorer metadata file ({exc}); delete it and "
                           "publish again with --html") from None


def write_scorers(release_dir: Path, scorers: Mapping[str, Mapping[str, Any]]) -> Path:
    clean = {name: {k: scorers[name].get(k) for k in SCORER_FIELDS} for name in sorted(scorers)}
    path = Path(release_dir) / SCORERS_JSON
    path.write_text(json.dumps({"scorers": clean}, indent=1, sort_keys=True, ensure_ascii=False)
                    + "\n", encoding="utf-8", newline="\n")
    return path


def write_index(release_dir: Path, releases: list[tuple[str, str, dict]]) -> Path:
    """Render ``<release_dir>/index.html`` from its results, scorers.json and plots/."""
    release_dir = Path(release_dir)
    load_release(release_dir)  # a clear error for a missing or unreadable results.json
    data = read_results(release_dir)
    plot_files = plot_order(sorted(p.relative_to(release_dir).as_posix()
                                    for p in (release_dir / "plots").glob("*.png")))
    path = release_dir / INDEX
    path.write_text(render_page(data, plot_files, releases, read_scorers(release_dir)),
                    encoding="utf-8", newline="\n")
    return path


def write_site(release_dir: str | Path,
               scorers: Mapping[str, Mapping[str, Any]] | None = None,
               also: tuple[Path, ...] = ()) -> list[Path]:
    """Write ``index.html`` (and, given ``scorers``, ``scorers.json``) into a published release,
    and re-render the ``index.html`` of every sibling release that has one (and of the sibling
    releases ``also``, pages or not), so that each page's release selector lists every release.
    Returns the files written."""
    release_dir = Path(release_dir)
    if not has_results(release_dir):
        raise ReleaseError(f"{release_dir / RESULTS} does not exist; publish the release "
                           "before writing its page (scorebench publish --html)")
    written = []
    if scorers is not None:
        written.append(write_scorers(release_dir, scorers))
    releases = list_releases(release_dir.parent)
    current = release_dir.resolve()
    wanted = {current} | {Path(d).resolve() for d in also}
    pages = {d.resolve() for d, _ in releases if d.resolve() in wanted or (d / INDEX).is_file()}
    links = [(d.name, f"../{d.name}/{INDEX if d.resolve() in pages else 'README.md'}", meta)
             for d, meta in releases]
    for d, _ in releases:
        if d.resolve() in pages:
            written.append(write_index(d, links))
    return written
