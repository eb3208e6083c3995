"""Releases: ``<releases>/<name>/`` holds README.md, results.json.gz, results.csv, overall.csv and
plots/; the root LEADERBOARD.md shows the latest release and links every release.

What a committed release keeps is what reproduces and reads it: README.md, results.json.gz (the
Board's JSON, gzip with mtime 0 and a fixed level, so publishing twice gives the same bytes) and
the plots the README embeds (:data:`COMMITTED_PLOTS`). The CSVs, the other plots, index.html and
scorers.json are derived: ``leaderboard/releases/.gitignore`` ignores them and
:func:`rebuild` (``scorebench publish --rebuild``) writes them again from results.json.gz alone.
Every reader goes through :func:`read_results_text`, which also reads the plain results.json of
a release written by an older version.

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

from ..loading.choice import SELECTION_RULE
from ..loading.records import RELEASES_SUBDIR, LoadedRecords, load_records_from
from ..loading.schema import gzip_bytes, read_record_text
from ..loading.selection import current as current_records
from ..method import convergence, curves, neighbours, tuning
from ..method.aggregate import aggregate
from ..method.board import FRAMES, Board
from ..rendering import curves_section, markdown, plots, tuning_section
from .changes_since import changes as changes_since

RELEASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
DEFAULT_RELEASES_DIR = Path("leaderboard") / "releases"
RESULTS = "results.json.gz"
PLAIN_RESULTS = "results.json"      # a release written by an older version
OWNED_FILES = ("README.md", RESULTS, "results.csv", "overall.csv")
# The plots a release commits and its README embeds (prefixes of plots/ file names): the
# overall's normalized plot and the learning curves. The others are rebuilt on demand.
COMMITTED_PLOTS = ("normalized__", "curves__")
# Releases published before their records were committed (listed one per line in this file of
# the releases directory): the reproduction check names them and passes.
WITHOUT_RECORDS_FILE = "WITHOUT_RECORDS.txt"


class ReleaseError(ValueError):
    """A release cannot be written or read; the message says what to change."""


@dataclass
class Published:
    release_dir: Path
    board: Board
    files: list[Path]
    leaderboard_md: Path | None


def default_leaderboard_md(releases_dir: str | Path) -> Path:
    """``<releases_dir>/../../LEADERBOARD.md`` for a repository's ``leaderboard/releases`` (the
    repository root), and ``<releases_dir>/LEADERBOARD.md`` for any other directory, so that a
    release published elsewhere writes nothing outside the directory it was given."""
    releases_dir = Path(os.path.abspath(releases_dir))
    if is_committed_releases_dir(releases_dir):
        return releases_dir.parent.parent / "LEADERBOARD.md"
    return releases_dir / "LEADERBOARD.md"


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


def results_path(release_dir: str | Path) -> Path:
    """The results file of a release: results.json.gz, or the plain results.json of a release
    written by an older version when only that exists."""
    release_dir = Path(release_dir)
    gz = release_dir / RESULTS
    plain = release_dir / PLAIN_RESULTS
    return plain if not gz.is_file() and plain.is_file() else gz


def has_results(release_dir: str | Path) -> bool:
    return results_path(release_dir).is_file()


def read_results_text(release_dir: str | Path) -> str:
    """The JSON text of a release's results (decompressed); every reader of a release reads it
    here. ``FileNotFoundError`` when the release has neither file."""
    return read_record_text(results_path(release_dir))


def read_results(release_dir: str | Path) -> dict:
    """A release's results as parsed JSON."""
    return json.loads(read_results_text(release_dir))


def write_results(text: str, release_dir: str | Path) -> Path:
    """``<release_dir>/results.json.gz``: ``text`` gzipped with no timestamp or file name, so the
    same text gives the same bytes; a plain results.json beside it (from an older version) is
    removed so that no reader sees two."""
    release_dir = Path(release_dir)
    path = release_dir / RESULTS
    path.write_bytes(gzip_bytes(text))
    (release_dir / PLAIN_RESULTS).unlink(missing_ok=True)
    return path


def is_committed_plot(name: str) -> bool:
    """Whether ``plots/<name>`` is one a release commits (and its README embeds)."""
    return Path(name).name.startswith(COMMITTED_PLOTS)


def write_derived(board: Board, release_dir: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """The derived files of a (canonical) board: the CSVs and every plot (``plots/`` replaced).
    Returns (files, plots, the tuning and learning-curve plots among them)."""
    plot_dir = release_dir / "plots"
    if plot_dir.exists():
        shutil.rmtree(plot_dir)
    _csv(board.rows, FRAMES["rows"], release_dir / "results.csv")
    _csv(board.overall, FRAMES["overall"], release_dir / "overall.csv")
    files = [release_dir / "results.csv", release_dir / "overall.csv"]
    plot_paths = plots.render_all(board, plot_dir)
    extra_plots = (tuning_section.render(board.meta.get("tuning"), plot_dir)
                   + curves_section.render(board.meta.get("curves"), plot_dir))
    return files, plot_paths + extra_plots, extra_plots


def write_release(board: Board, release_dir: Path) -> list[Path]:
    """Write a board's files into ``release_dir`` (its own files and ``plots/`` are replaced;
    other files there, e.g. a regression report or an HTML view, are left alone)."""
    release_dir.mkdir(parents=True, exist_ok=True)
    board = canonical(board)
    files = [write_results(board.to_json(), release_dir)]
    derived, plot_paths, extra_plots = write_derived(board, release_dir)
    files += derived
    # The README embeds only the committed plots (the overall's normalized plot and the
    # learning curves); the others are derived files, rebuilt by publish --rebuild.
    rel_plots = [p.relative_to(release_dir).as_posix() for p in plot_paths
                 if is_committed_plot(p.name)]
    rel_extra = [p.relative_to(release_dir).as_posix() for p in extra_plots
                 if is_committed_plot(p.name)]
    readme = release_dir / "README.md"
    text = markdown.release_readme(board, [p for p in rel_plots if p not in rel_extra], rel_extra)
    readme.write_text(text, encoding="utf-8", newline="\n")
    return [readme, *files, *plot_paths]


def rebuild(release_dir: str | Path) -> list[Path]:
    """Write a release's derived files (results.csv, overall.csv, every plot) again from its
    results alone (no records); README.md and results.json.gz are left as they are. Returns the
    files written."""
    release_dir = Path(release_dir)
    board = load_release(release_dir)
    files, plot_paths, _ = write_derived(board, release_dir)
    return files + plot_paths


def load_release(release_dir: str | Path) -> Board:
    path = results_path(release_dir)
    try:
        return Board.from_dict(json.loads(read_results_text(release_dir)))
    except FileNotFoundError:
        raise ReleaseError(f"{path} does not exist; publish the release first "
                           "(scorebench publish)") from None
    except (json.JSONDecodeError, ValueError, OSError, EOFError) as exc:
        raise ReleaseError(f"{path}: not a readable leaderboard results.json: {exc}") from None


def list_releases(releases_dir: str | Path) -> list[tuple[Path, dict]]:
    """(directory, meta) of every release with a readable results.json, newest first (by the
    date and time its newest record finished, then by name)."""
    found = []
    root = Path(releases_dir)
    if not root.is_dir():
        return []
    for release_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if not has_results(release_dir):
            continue
        try:
            meta = read_results(release_dir)["meta"]
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            continue
        found.append((release_dir, meta))
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

    readme = latest_dir / "README.md"
    text = markdown.leaderboard_index(
        latest, link(readme), [(meta, link(d / "README.md")) for d, meta in releases],
        markdown.section_titles(readme.read_text(encoding="utf-8")) if readme.exists() else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    return path


def plot_order(names: list[str]) -> list[str]:
    rank = {"normalized": 0, "bars": 1, "grid": 2, "cost": 3}
    return sorted(names, key=lambda n: (rank.get(n.split("/")[-1].split("__")[0], 9), n))


def is_committed_releases_dir(releases_dir: str | Path) -> bool:
    """Whether ``releases_dir`` is a repository's ``leaderboard/releases`` (the committed board)."""
    return Path(os.path.abspath(releases_dir)).parts[-2:] == DEFAULT_RELEASES_DIR.parts


def unclean_records(loaded: LoadedRecords) -> list[str]:
    """``path (sha)`` of every record not run from a clean, committed tree: a dirty checkout, or
    no git checkout at all (nothing to audit it against)."""
    out = []
    for r in loaded.records:
        if r.provenance.get("git_dirty") is not False or not r.provenance.get("git_sha"):
            out.append(f"{r.path} ({r.git_sha})")
    return out


def release_board(loaded: LoadedRecords, release: str | None, *, earlier: dict | None = None,
                  tuning_rule: str | None = SELECTION_RULE, ranges: dict | None = None,
                  **aggregate_kwargs) -> Board:
    """The board of a release as results.json holds it (``publish`` and ``reproduce`` both use
    this). Without ``release``, the release is named by the date of its newest record; with
    ``earlier`` (an earlier release's results.json), ``meta.changes`` says what changed since
    (:mod:`leaderboard.publishing.changes_since`); ``tuning_rule`` is the tuning rule the release
    checks each choice against (None: a release from before the check). Records with stopping
    blocks that carry a target add ``meta.convergence`` (level, speed, reliability; ``ranges``,
    {task: [low, high]}, the validation metrics' declared ranges, tells a seed at the cap with no
    gain left) and ``meta.neighbours`` (each verdict at the neighbouring rates); without them the
    meta is as before, so every earlier release reproduces."""
    board = aggregate(loaded, **aggregate_kwargs)
    baseline = board.meta.get("baseline", "softmax")
    current = current_records(loaded)
    extra = {"tuning": tuning.summary(current, tuning_rule),
             "curves": curves.summary(current, baseline),
             "convergence": convergence.summary(current, ranges)}
    if extra["convergence"]:
        extra["neighbours"] = neighbour_words(current, board, set(extra["convergence"]))
    if earlier is not None:
        now = json.loads(board.to_json())          # as results.json holds it: null, not NaN
        extra["changes"] = changes_since(now["rows"], now["overall"], earlier, baseline,
                                         now.get("claims"), extra["convergence"],
                                         extra["tuning"], board.meta["alpha"])
    extra = {key: value for key, value in extra.items() if value}
    if extra:       # tuning, learning curves, convergence, changes (leaderboard/method/tuning.py, ...)
        board = Board(meta={**board.meta, **extra},
                      **{name: getattr(board, name) for name in FRAMES})
    if release is None:
        release = board.meta["date_last"]
        if release == "unknown":
            raise ReleaseError("the records carry no dates to name the release by; pass "
                               "--release NAME")
    return canonical(board.with_release(check_release_name(release)))


def neighbour_words(loaded: LoadedRecords, board: Board, tasks: set[str]) -> dict:
    """{task: {scorer: {metric: words}}}: whether each headline verdict against the baseline on
    the tasks trained to convergence holds at the scorer's neighbouring learning rates
    (:mod:`leaderboard.method.neighbours`)."""
    signs = {"better": neighbours.BETTER, "worse": neighbours.WORSE}
    verdicts = {(r["task"], r["scorer"], r["metric"]): signs[r["vs_baseline"]]
                for r in board.rows.to_dict(orient="records")
                if r["headline"] and r["task"] in tasks and r["vs_baseline"] in signs}
    out: dict = {}
    for (task, label, metric), result in sorted(neighbours.check(
            loaded, verdicts, board.meta.get("baseline", "softmax")).items()):
        out.setdefault(task, {}).setdefault(label, {})[metric] = neighbours.words(result)
    return out


def no_usable_records(results_dir: str | Path, loaded: LoadedRecords) -> str:
    """Why a results directory without one usable record gives no release."""
    if not loaded.problems:
        return (f"{results_dir} holds no record (*.json or *.json.gz), so there is nothing to "
                f"publish; run `scorebench run --results {results_dir}` first or pass "
                "--results DIR")
    listed = "\n  ".join(f"{Path(results_dir) / p.path}: {p.reason}" for p in loaded.problems)
    return (f"none of the {len(loaded.problems)} record file(s) under {results_dir} is usable, "
            f"so nothing was published:\n  {listed}\nRepair or remove those files, or run their "
            f"cells again (`scorebench run --results {results_dir}` runs a cell whose record "
            "is unreadable again)")


def publish(results_dir: str | Path = "results", release: str | None = None,
            releases_dir: str | Path | None = None,
            leaderboard_md: str | Path | None = None, *, refuse_unclean: bool | None = None,
            changes_since: str | None = None, ranges: dict | None = None,
            **aggregate_kwargs) -> Published:
    """Aggregate ``results_dir`` into ``<releases_dir>/<release>/`` and refresh LEADERBOARD.md.

    Without ``releases_dir`` the release goes to ``<results_dir>/releases/`` and the index to
    ``<results_dir>/LEADERBOARD.md``; with it, the index defaults to
    :func:`default_leaderboard_md`. ``refuse_unclean`` (default: when ``releases_dir`` is a
    ``leaderboard/releases``) refuses records from a dirty or unknown git tree. A results
    directory without one usable record is a :class:`ReleaseError` naming every unusable file.
    ``changes_since`` names an earlier release in ``releases_dir`` to say what changed since;
    ``ranges`` declares the validation metrics' ranges (:func:`release_board`; None, none known:
    no seed counts as having no gain left; ``scorebench publish`` passes the registered tasks')."""
    if releases_dir is None:
        releases_dir = Path(results_dir) / RELEASES_SUBDIR
        if leaderboard_md is None:
            leaderboard_md = Path(results_dir) / "LEADERBOARD.md"
    if refuse_unclean is None:
        refuse_unclean = is_committed_releases_dir(releases_dir)
    loaded = load_records_from(results_dir)
    if not loaded.records:
        raise ReleaseError(no_usable_records(results_dir, loaded))
    if refuse_unclean:
        unclean = unclean_records(loaded)
        if unclean:
            shown = "\n  ".join(unclean[:10]) + ("\n  ..." if len(unclean) > 10 else "")
            raise ReleaseError(
                f"{len(unclean)} record(s) under {results_dir} were not run from a clean, "
                f"committed tree, and {releases_dir} holds the committed releases:\n  {shown}\n"
                "Run those cells again from a clean checkout (git stash or commit, then "
                "`scorebench run --rerun all` on them), publish elsewhere (--out DIR), or pass "
                "--allow-dirty for a local experiment.")
    earlier = None if changes_since is None else earlier_release(releases_dir, changes_since)
    board = release_board(loaded, release, earlier=earlier, ranges=ranges, **aggregate_kwargs)
    release_dir = Path(releases_dir) / board.meta["release"]
    files = write_release(board, release_dir)
    md_path = leaderboard_md if leaderboard_md is not None else default_leaderboard_md(releases_dir)
    written = write_leaderboard_md(releases_dir, md_path)
    return Published(release_dir, board, files, written)


def earlier_release(releases_dir: str | Path, name: str) -> dict:
    """The results of the release ``name`` in ``releases_dir`` (parsed)."""
    path = results_path(Path(releases_dir) / check_release_name(name))
    try:
        return read_results(path.parent)
    except FileNotFoundError:
        raise ReleaseError(f"{path} does not exist; name a release of {releases_dir} to compare "
                           "with") from None


def releases_without_records(releases_dir: str | Path) -> list[str]:
    """Names listed in ``<releases_dir>/WITHOUT_RECORDS.txt`` (``#`` starts a comment)."""
    path = Path(releases_dir) / WITHOUT_RECORDS_FILE
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    names = (line.split("#", 1)[0].strip() for line in lines)
    return [name for name in names if name]
