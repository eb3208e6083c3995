"""Releases: files written, byte-identical republish (also across processes), valid PNGs,
LEADERBOARD.md links, and the `scorebench publish` command."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from leaderboard.publishing.release import ReleaseError, list_releases, load_release, publish, read_results
from leaderboard_fakes import make_record, populate, write_raw, write_record
from markdown_support import markdown_tables
from suite import cli

N_BOOT = 500
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def digests(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    populate(root, {"softmax": 0.0, "ssa": -0.1, "relu": 0.25})
    write_record(root, make_record("icl_linear", "stablemax", 0, status="diverged", step=7,
                                   message="loss | exploded"))
    write_record(root, make_record("icl_linear", "ssa", 0, {"error": 0.9}, scorer_version=0))
    write_raw(root, "icl_linear/bad.json", "{")
    return root


@pytest.fixture(scope="module")
def published(results, tmp_path_factory):
    base = tmp_path_factory.mktemp("published")
    return base, publish(results, "r1", base / "leaderboard" / "releases", n_boot=N_BOOT)


def test_release_files_and_contents(published):
    base, first = published
    release = base / "leaderboard" / "releases" / "r1"
    assert {"README.md", "results.json.gz", "results.csv", "overall.csv",
            "plots/normalized__cpu.png", "plots/bars__cpu__icl_linear__error.png",
            "plots/grid__cpu__icl_linear__ood_error.png"} <= set(digests(release))
    assert first.leaderboard_md == base / "LEADERBOARD.md"
    readme = (release / "README.md").read_text()
    assert "# scorebench leaderboard: r1" in readme
    tables = markdown_tables(readme)
    (failed,) = tables["Failed and skipped cells"]
    assert "loss | exploded" in failed["notes"].values()
    (problems,) = tables["Records not used"]
    assert problems["rows"][0]["file"] == "icl_linear/bad.json"
    (superseded,) = tables["Superseded records"]
    assert superseded["notes"][superseded["rows"][0]["why"]].startswith("scorer ssa v0 < v1")
    for track in ("In-context learning (ICL)", "Decoder LM", "Encoder LM", "Probes", "Cost"):
        assert f"## {track}" in readme
    data = read_results(release)
    assert data["meta"]["release"] == "r1" and data["meta"]["n_superseded"] == 1
    header = (release / "results.csv").read_text().splitlines()[0].split(",")
    assert header[:5] == ["profile", "track", "task", "task_version", "metric"]
    assert {"mean", "ci_low", "ci_high", "tier", "date", "git_sha", "hardware"} <= set(header)


def test_plots_are_valid_png(published):
    base, _ = published
    pngs = sorted((base / "leaderboard" / "releases" / "r1" / "plots").glob("*.png"))
    assert len(pngs) >= 3
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_MAGIC
        with Image.open(png) as image:
            image.verify()
        with Image.open(png) as image:
            assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100
            assert "Software" not in image.info


def test_republish_is_byte_identical(results, published):
    base, _ = published
    before = digests(base)
    (base / "leaderboard" / "releases" / "r1" / "plots" / "stale.png").write_bytes(b"old")
    publish(results, "r1", base / "leaderboard" / "releases", n_boot=N_BOOT)
    assert digests(base) == before


@pytest.mark.slow
def test_republish_in_another_process_is_byte_identical(results, published, tmp_path):
    """Another interpreter with another hash seed (set and dict order) writes the same bytes."""
    base, _ = published
    env = {**os.environ, "PYTHONHASHSEED": str(os.getpid() % 1000 + 1), "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, "-m", "suite.cli", "publish", "--results", str(results),
                    "--release", "r1", "--out", str(tmp_path / "releases"), "--bootstrap",
                    str(N_BOOT)], check=True, env=env, capture_output=True,
                   cwd=Path(__file__).resolve().parent.parent)
    ours = digests(base / "leaderboard" / "releases" / "r1")
    assert digests(tmp_path / "releases" / "r1") == ours


def test_leaderboard_md_shows_latest_and_links_all(tmp_path):
    releases = tmp_path / "lb" / "releases"
    index = tmp_path / "docs" / "LEADERBOARD.md"
    earlier = tmp_path / "earlier"
    populate(earlier, {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    publish(earlier, "older", releases, index, n_boot=N_BOOT)
    later = tmp_path / "later"
    populate(later, {"softmax": 0.0, "ssa": -0.1}, with_grid=False,
             finished="2025-03-04T00:00:00.000000+00:00")
    publish(later, "newer", releases, index, n_boot=N_BOOT)
    text = index.read_text()
    assert "Latest release: **[newer](../lb/releases/newer/README.md)**" in text
    assert "2025-03-04" in text
    assert "[older](../lb/releases/older/README.md)" in text
    assert [d.name for d, _ in list_releases(releases)] == ["newer", "older"]
    for target in ("../lb/releases/newer/README.md", "../lb/releases/older/README.md"):
        assert target in text and (index.parent / target).resolve().is_file()
    assert "](../lb/releases/newer/README.md#in-context-learning-icl)" in text
    # Same day, later in the day: newest, though its name sorts first.
    same_day = tmp_path / "same_day"
    populate(same_day, {"softmax": 0.0, "ssa": -0.1}, with_grid=False,
             finished="2025-03-04T18:00:00.000000+00:00")
    publish(same_day, "a-evening", releases, index, n_boot=N_BOOT)
    assert [d.name for d, _ in list_releases(releases)] == ["a-evening", "newer", "older"]


def test_release_name_and_missing_release_errors(results, tmp_path):
    with pytest.raises(ReleaseError, match="cannot be a directory name"):
        publish(results, "../escape", tmp_path, n_boot=N_BOOT)
    with pytest.raises(ReleaseError, match="publish the release first"):
        load_release(tmp_path / "nothing")


def test_publish_command(tmp_path, capsys):
    results = tmp_path / "results"
    populate(results, {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    write_raw(results, "icl_linear/bad.json", "{")
    out = tmp_path / "leaderboard" / "releases"
    code = cli.main(["publish", "--results", str(results), "--out", str(out),
                     "--bootstrap", str(N_BOOT)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "release 2025-01-02:" in printed  # named by the newest record's date
    assert "icl_linear/bad.json: skipped: not readable as JSON" in printed
    assert (out / "2025-01-02" / "README.md").is_file()
    assert (tmp_path / "LEADERBOARD.md").is_file()
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(["publish", "--results", str(tmp_path / "none"), "--out", str(out)])


def listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_publish_elsewhere_writes_only_inside_the_given_directories(tmp_path, capsys):
    """A release published into ``exp/rel`` (an absolute --out) leaves exp's parent as it was:
    LEADERBOARD.md goes into --out, not beside exp/."""
    home = tmp_path / "home"
    exp = home / "exp"
    results = exp / "r"
    populate(results, {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    (home / "notes.txt").write_text("the user's own file\n")
    out = (exp / "rel").resolve()
    assert out.is_absolute()
    before = listing(tmp_path)

    assert cli.main(["publish", "--results", str(results), "--release", "x", "--out", str(out),
                     "--bootstrap", str(N_BOOT)]) == 0
    index = out / "LEADERBOARD.md"
    assert f"wrote {index}" in capsys.readouterr().out
    after = listing(tmp_path)
    new = sorted(set(after) - set(before))
    assert set(before) <= set(after)
    assert new == ["home/exp/rel", *(f"home/exp/rel/{p}" for p in listing(out))]
    assert "home/exp/rel/LEADERBOARD.md" in new and "home/exp/rel/x/README.md" in new
    text = index.read_text()
    assert "Latest release: **[x](x/README.md)**" in text
    assert (out / "x" / "README.md").is_file()


def test_default_leaderboard_md_placement(tmp_path, monkeypatch):
    from leaderboard.publishing.release import default_leaderboard_md

    monkeypatch.chdir(tmp_path)
    # The repository's layout: the root's LEADERBOARD.md, as `--out leaderboard/releases` gives.
    for out in ("leaderboard/releases", "leaderboard/releases/", "./leaderboard/releases",
                tmp_path / "repo" / "leaderboard" / "releases"):
        root = tmp_path / "repo" if isinstance(out, Path) else tmp_path
        assert default_leaderboard_md(out) == root / "LEADERBOARD.md"
    # Anything else: inside --out itself.
    for out in ("rel", "exp/rel", "exp/releases", "leaderboard/rel", "leaderboard",
                tmp_path / "exp" / "rel"):
        assert default_leaderboard_md(out) == tmp_path / out / "LEADERBOARD.md"


def test_publish_with_no_usable_record_fails_and_names_every_file(tmp_path):
    results = tmp_path / "r"
    write_raw(results, "icl_linear/softmax/corrupt.json", '{"schema_version": 1, "cell')
    write_raw(results, "icl_linear/ssa/not_a_record.json", '{"hello": "world"}')
    out = tmp_path / "rel"
    with pytest.raises(ReleaseError) as err:
        publish(results, None, out, n_boot=N_BOOT)
    message = str(err.value)
    assert "none of the 2 record file(s)" in message
    lines = message.splitlines()
    corrupt = [line for line in lines if line.strip().startswith(str(results / "icl_linear"))]
    assert [line.split(": ")[0].strip() for line in corrupt] == [
        str(results / "icl_linear/softmax/corrupt.json"),
        str(results / "icl_linear/ssa/not_a_record.json")]
    assert "not readable as JSON" in corrupt[0] and all(len(line.split(": ", 1)[1]) > 5
                                                        for line in corrupt)
    assert not out.exists() and not (tmp_path / "LEADERBOARD.md").exists()

    # The command exits non-zero (a message for SystemExit is exit status 1) with the same list.
    with pytest.raises(SystemExit) as exit_:
        cli.main(["publish", "--results", str(results), "--out", str(out), "--release", "x"])
    assert isinstance(exit_.value.code, str) and exit_.value.code.startswith("scorebench publish:")
    assert all(line in exit_.value.code for line in corrupt)
    assert not out.exists()
    # An empty results directory: nothing to publish either.
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no record .*scorebench run --results"):
        cli.main(["publish", "--results", str(tmp_path / "empty"), "--out", str(out)])
    assert not out.exists()


def test_publish_over_a_mix_publishes_the_usable_records_and_lists_the_rest(tmp_path, capsys):
    results = tmp_path / "r"
    populate(results, {"softmax": 0.0, "ssa": -0.1}, seeds=(0,), with_grid=False)
    write_raw(results, "icl_linear/softmax/corrupt.json", "{")
    out = tmp_path / "rel"
    assert cli.main(["publish", "--results", str(results), "--out", str(out), "--release", "x",
                     "--bootstrap", str(N_BOOT)]) == 0
    printed = capsys.readouterr().out
    assert "release x: 2 records used of 3 files, 0 superseded, 1 problem(s)" in printed
    assert "icl_linear/softmax/corrupt.json: skipped: not readable as JSON" in printed
    meta = load_release(out / "x").meta
    assert (meta["n_used"], meta["n_problems"]) == (2, 1)
