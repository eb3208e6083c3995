"""A release that costs little to keep (issue #51): what a committed release keeps (README.md,
results.json.gz, the plots its README embeds) against the .gitignore of leaderboard/releases,
deterministic results.json.gz, ``publish --rebuild`` from the compressed results alone, the plain
results.json of an older release still read, and the committed releases slimmed."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from leaderboard_fakes import populate

from leaderboard.publishing.release import (COMMITTED_PLOTS, PLAIN_RESULTS, RESULTS, is_committed_plot,
                                 list_releases, load_release, publish, read_results_text)
from suite import cli

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ROOT / "leaderboard" / "releases"
N_BOOT = 200
KEPT = {"README.md", RESULTS}
DERIVED = {"results.csv", "overall.csv", "index.html", "scorers.json"}


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository with this repository's leaderboard/releases/.gitignore and one release
    published with --html."""
    base = tmp_path_factory.mktemp("repo")
    records = base / "records"
    populate(records, {"softmax": 0.0, "ssa": -0.1, "relu": 0.25})
    releases = base / "leaderboard" / "releases"
    releases.mkdir(parents=True)
    shutil.copy(RELEASES / ".gitignore", releases / ".gitignore")
    assert cli.main(["publish", "--results", str(records), "--release", "r1", "--out",
                     str(releases), "--allow-dirty", "--html", "--bootstrap", str(N_BOOT)]) == 0
    subprocess.run(["git", "init", "-q", str(base)], check=True)
    return base, records, releases


def test_a_release_commits_only_its_readme_results_and_embedded_plots(repo):
    base, _, releases = repo
    release = releases / "r1"
    written = set(files(release))
    assert DERIVED <= written and PLAIN_RESULTS not in written
    assert any(not is_committed_plot(p) for p in written if p.startswith("plots/"))
    subprocess.run(["git", "-C", str(base), "add", "-A"], check=True)
    tracked = subprocess.run(["git", "-C", str(base), "ls-files", "leaderboard/releases/r1"],
                             check=True, capture_output=True, text=True).stdout.split()
    kept = {Path(p).relative_to("leaderboard/releases/r1").as_posix() for p in tracked}
    assert KEPT <= kept
    assert all(p in KEPT or (p.startswith("plots/") and Path(p).name.startswith(COMMITTED_PLOTS))
               for p in kept), kept
    assert "plots/normalized__cpu.png" in kept
    # The README embeds and links only committed files, each plot with a caption under it.
    readme = (release / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)\)", readme)
    assert targets and all(t in kept for t in targets if not t.startswith("http")), targets
    for image in re.finditer(r"^!\[[^\]]*\]\(([^)]+)\)\n\n((?:.+\n)+)", readme, re.M):
        caption = image.group(2).strip()
        assert caption.startswith("*") and caption.endswith("*")
    assert len(re.findall(r"^!\[", readme, re.M)) == len(
        re.findall(r"^!\[[^\]]*\]\([^)]+\)\n\n\*", readme, re.M))
    assert "scorebench publish --rebuild r1" in readme


def test_results_are_gzip_written_deterministically(repo, tmp_path):
    _, records, releases = repo
    first = (releases / "r1" / RESULTS).read_bytes()
    again = publish(records, "r1", tmp_path / "out", n_boot=N_BOOT)
    assert (again.release_dir / RESULTS).read_bytes() == first
    assert first[4:8] == b"\0\0\0\0"           # mtime 0
    assert json.loads(gzip.decompress(first))["meta"]["release"] == "r1"
    assert read_results_text(releases / "r1") == gzip.decompress(first).decode()


def test_rebuild_writes_the_derived_files_again_from_the_results_alone(repo, tmp_path):
    _, _, releases = repo
    copy = tmp_path / "releases"
    shutil.copytree(releases, copy)
    published = files(copy / "r1")
    for name in DERIVED:
        (copy / "r1" / name).unlink()
    for plot in (copy / "r1" / "plots").glob("*.png"):
        if not is_committed_plot(plot.name):
            plot.unlink()
    assert cli.main(["publish", "--rebuild", "r1", "--out", str(copy),
                     "--results", str(tmp_path / "no-records")]) == 0
    rebuilt = files(copy / "r1")
    assert set(rebuilt) == set(published)
    for name in ("results.csv", "overall.csv", "index.html"):
        assert rebuilt[name] == published[name], name
    assert cli.main(["publish", "--rebuild", "--out", str(copy)]) == 0      # the newest
    (copy / "r1" / "index.html").unlink()
    assert cli.main(["publish", "--rebuild", "all", "--out", str(copy)]) == 0
    assert (copy / "r1" / "index.html").read_bytes() == published["index.html"]
    with pytest.raises(SystemExit, match="no release 'r9'"):
        cli.main(["publish", "--rebuild", "r9", "--out", str(copy)])


def test_check_passes_on_a_slimmed_release_and_a_plain_results_json_is_still_read(repo, tmp_path):
    _, records, releases = repo
    copy = tmp_path / "releases"
    shutil.copytree(releases, copy)
    assert cli.main(["publish", "--check", "--results", str(records), "--out", str(copy)]) == 0
    # A release written by an older version: results.json, no results.json.gz.
    text = read_results_text(copy / "r1")
    (copy / "r1" / PLAIN_RESULTS).write_text(text)
    (copy / "r1" / RESULTS).unlink()
    assert [d.name for d, _ in list_releases(copy)] == ["r1"]
    assert load_release(copy / "r1").meta["release"] == "r1"
    assert cli.main(["publish", "--check", "--results", str(records), "--out", str(copy)]) == 0


def test_the_committed_releases_are_slim():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "leaderboard/releases"],
                             check=True, capture_output=True, text=True).stdout.split()
    for path in tracked:
        parts = Path(path).relative_to("leaderboard/releases").parts
        if len(parts) == 1:
            continue
        name = "/".join(parts[1:])
        assert (name in KEPT or name.startswith("screenshot-") or name == "REGRESSIONS.md"
                or (name.startswith("plots/") and is_committed_plot(name))), path
    for release_dir, _ in list_releases(RELEASES):
        assert (release_dir / RESULTS).is_file()
        readme = (release_dir / "README.md").read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#]+)\)", readme):
            if not target.startswith("http"):
                assert f"leaderboard/releases/{release_dir.name}/{target}" in tracked, target
