"""Releases: ``<releases>/<name>/`` holds README.md, results.json, results.csv, overall.csv and
plots/; the root LEADERBOARD.md shows the latest release and links every release.

A release is a pure function of its records: the Board goes through its JSON form before anything
is rendered (so markdown, CSV, plots and any HTML view read the same numbers), nothing reads the
clock, and PNGs carry no software/date metadata. Publishing twice gives byte-identical files.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import markdown, plots
from .aggregate import FRAMES, Board, build_board

RELEASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
DEFAULT_RELEASES_DIR = Path("leaderboard") / "releases"
OWNED_FILES = ("README.md", "results.json", "results.csv", "overall.csv")


class ReleaseError(ValueError):
    """A release cannot be written or read; the message says what to change."""


@dataclass
class Published:
    release_dir: Path
    board: Board
    files: list[Path]
    leaderboard_md: Path | None


def default_leaderboard_md(releases_dir: str | Path) -> Path:
    """``LEADERBOARD.md`` beside the releases directory's parent (the repository root for the
    default ``leaderboard/releases``)."""
    return Path(os.path.abspath(releases_dir)).parent.parent / "LEADERBOARD.md"


def check_release_name(name: str) -> str:
    if not RELEASE_NAME.match(name or ""):
        raise ReleaseError(f"release name {name!r} cannot be a directory name; use letters, "
                           "digits and _ . + - (e.g. --release 2025-06-01 or v1)")
    return name


def canonical(board: Board) -> Board:
    """The board as every reader of results.json sees it."""
    return Board.from_dict(json.loads(board.to_json()))


def _csv(frame, columns: dict[str, str], path: Path) -> None:
    """A frame as CSV; list and dict cells as compact JSON."""
    out = frame.copy()
    for column, kind in columns.items():
        if kind == "json":
            out[column] = [json.dumps(v, sort_keys=True, separators=(",", ":"))
                           if v is not None else "" for v in out[column]]
    out.to_csv(path, index=False, lineterminator="\n")


def write_release(board: Board, release_dir: Path) -> list[Path]:
    """Write a board's files into ``release_dir`` (its own files and ``plots/`` are replaced;
    other files there, e.g. a regression report or an HTML view, are left alone)."""
    release_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = release_dir / "plots"
    if plot_dir.exists():
        shutil.rmtree(plot_dir)
    board = canonical(board)
    files = [release_dir / "results.json"]
    files[0].write_text(board.to_json(), encoding="utf-8", newline="\n")
    _csv(board.rows, FRAMES["rows"], release_dir / "results.csv")
    _csv(board.overall, FRAMES["overall"], release_dir / "overall.csv")
    files += [release_dir / "results.csv", release_dir / "overall.csv"]
    plot_paths = plots.render_all(board, plot_dir)
    rel_plots = [p.relative_to(release_dir).as_posix() for p in plot_paths]
    readme = release_dir / "README.md"
    readme.write_text(markdown.release_readme(board, rel_plots), encoding="utf-8", newline="\n")
    return [readme, *files, *plot_paths]


def load_release(release_dir: str | Path) -> Board:
    path = Path(release_dir) / "results.json"
    try:
        return Board.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ReleaseError(f"{path} does not exist; publish the release first "
                           "(scorebench publish)") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise ReleaseError(f"{path}: not a readable leaderboard results.json: {exc}") from None


def list_releases(releases_dir: str | Path) -> list[tuple[Path, dict]]:
    """(directory, meta) of every release with a readable results.json, newest first (by the
    date and time its newest record finished, then by name)."""
    found = []
    root = Path(releases_dir)
    if not root.is_dir():
        return []
    for results in sorted(root.glob("*/results.json")):
        try:
            meta = json.loads(results.read_text(encoding="utf-8"))["meta"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append((results.parent, meta))
    found.sort(key=lambda item: (item[1].get("date_last", ""), item[1].get("finished_last", ""),
                                 item[0].name), reverse=True)
    return found


def write_leaderboard_md(releases_dir: str | Path, path: str | Path) -> Path | None:
    """Write LEADERBOARD.md for the releases under ``releases_dir`` (None if there is none)."""
    path = Path(path)
    releases = list_releases(releases_dir)
    if not releases:
        return None
    latest_dir, _ = releases[0]
    latest = load_release(latest_dir)
    base = Path(os.path.abspath(path.parent))

    def link(target: Path) -> str:
        return Path(os.path.relpath(os.path.abspath(target), base)).as_posix()

    plot_files = sorted(p.relative_to(latest_dir).as_posix()
                        for p in (latest_dir / "plots").glob("*.png"))
    ordered = _plot_order(plot_files)
    text = markdown.leaderboard_index(
        latest, link(latest_dir / "README.md"), ordered, link(latest_dir) + "/",
        [(meta, link(d / "README.md")) for d, meta in releases])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    return path


def _plot_order(names: list[str]) -> list[str]:
    rank = {"normalized": 0, "bars": 1, "grid": 2, "cost": 3}
    return sorted(names, key=lambda n: (rank.get(n.split("/")[-1].split("__")[0], 9), n))


def publish(results_dir: str | Path = "results", release: str | None = None,
            releases_dir: str | Path = DEFAULT_RELEASES_DIR,
            leaderboard_md: str | Path | None = None, **aggregate_kwargs) -> Published:
    """Aggregate ``results_dir`` into ``<releases_dir>/<release>/`` and refresh LEADERBOARD.md.
    Without ``release``, the release is named by the date of its newest record."""
    board = build_board(results_dir, **aggregate_kwargs)
    if release is None:
        release = board.meta["date_last"]
        if release == "unknown":
            raise ReleaseError("the records carry no dates to name the release by; pass "
                               "--release NAME")
    board = board.with_release(check_release_name(release))
    release_dir = Path(releases_dir) / release
    files = write_release(board, release_dir)
    md_path = leaderboard_md if leaderboard_md is not None else default_leaderboard_md(releases_dir)
    written = write_leaderboard_md(releases_dir, md_path)
    return Published(release_dir, canonical(board), files, written)
