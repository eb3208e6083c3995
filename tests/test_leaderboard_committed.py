"""The committed board: publish's default output beside the results, records from a dirty tree
refused for leaderboard/releases, stale records superseded, and the reproduction check."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from leaderboard_fakes import make_record, populate, write_record

from leaderboard.aggregate import build_board
from leaderboard.release import ReleaseError, publish, reproduce
from suite import cli
from suite.records import RECORDS_VERSION, dumps_compact, gzip_bytes

N_BOOT = 200


def gzip_records(root):
    """Rewrite every record under ``root`` as ``.json.gz`` (the committed form)."""
    for path in sorted(root.glob("*/*/*.json")):
        record = json.loads(path.read_text())
        path.with_name(path.name + ".gz").write_bytes(gzip_bytes(dumps_compact(record)))
        path.unlink()
    return root


def test_publish_without_out_writes_next_to_the_results(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    populate(tmp_path / "results", {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    for _ in range(2):   # the second run must not read the first one's release as records
        assert cli.main(["publish", "--release", "smoke", "--bootstrap", str(N_BOOT)]) == 0
        assert "release smoke: 6 records used of 6 files, 0 superseded, 0 problem(s)" in \
            capsys.readouterr().out
    assert (tmp_path / "results" / "releases" / "smoke" / "results.json").is_file()
    index = (tmp_path / "results" / "LEADERBOARD.md").read_text()
    assert "(releases/smoke/README.md)" in index
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_records_from_a_dirty_tree_are_refused_for_leaderboard_releases(tmp_path, capsys):
    results = tmp_path / "records"
    populate(results, {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    dirty = write_record(results, make_record("icl_linear", "ssa", 7, {"error": 0.1},
                                              git_dirty=True, git_sha="feedbeef" * 5))
    committed = tmp_path / "repo" / "leaderboard" / "releases"
    with pytest.raises(ReleaseError, match=r"1 record\(s\) .* clean, committed tree") as err:
        publish(results, "r1", committed, n_boot=N_BOOT)
    assert dirty.relative_to(results).as_posix() in str(err.value)
    assert "--allow-dirty" in str(err.value) and not committed.exists()
    with pytest.raises(SystemExit, match="feedbeef"):
        cli.main(["publish", "--results", str(results), "--out", str(committed),
                  "--release", "r1", "--bootstrap", str(N_BOOT)])

    assert cli.main(["publish", "--results", str(results), "--out", str(committed),
                     "--release", "r1", "--bootstrap", str(N_BOOT), "--allow-dirty"]) == 0
    readme = (committed / "r1" / "README.md").read_text()
    assert "feedbee+dirty" in readme   # flagged in the harness (provenance) column
    # Anywhere else (a local experiment) the release is written and flagged.
    local = publish(results, "r1", tmp_path / "elsewhere", n_boot=N_BOOT)
    assert "feedbeeffeed-dirty" in local.board.meta["git_sha"]


def test_stale_records_are_superseded_not_mixed(tmp_path):
    populate(tmp_path, {"softmax": 0.0, "ssa": -0.1}, with_grid=False)
    for path in sorted(tmp_path.glob("*/*/*.json")):
        record = json.loads(path.read_text())
        record["provenance"]["records_version"] = RECORDS_VERSION
        path.write_text(json.dumps(record))
    write_record(tmp_path, make_record("icl_linear", "ssa", 9, {"error": 0.9}))  # no version
    board = build_board(tmp_path, n_boot=N_BOOT)
    assert board.superseded.to_dict(orient="records") == [
        {"task": "icl_linear", "task_version": 1, "scorer": "ssa", "scorer_version": 1,
         "profile": "cpu", "n_cells": 1, "reason": f"records v0 < v{RECORDS_VERSION}"}]
    ssa = board.rows[(board.rows["scorer"] == "ssa") & (board.rows["metric"] == "error")]
    assert ssa["seeds"].tolist() == [[0, 1, 2]]


def check(records, releases, *extra):
    return cli.main(["publish", "--check", "--results", str(records), "--out", str(releases),
                     *extra])


def test_check_reproduces_a_committed_release_byte_for_byte(tmp_path, capsys):
    records = gzip_records(populate_and_return(tmp_path / "records"))
    releases = tmp_path / "leaderboard" / "releases"
    publish(records, "r1", releases, n_boot=N_BOOT)
    capsys.readouterr()
    assert check(records, releases) == 0
    assert "r1: " in capsys.readouterr().out
    outcome = reproduce(records, releases, "r1")
    assert outcome.ok and "reproduced byte for byte from 6 records" in outcome.message

    # A record added after publishing: the release no longer matches its records.
    write_record(records, make_record("icl_linear", "ssa", 5, {"error": 0.3, "accuracy": 0.7},
                                      finished="2025-01-03T00:00:00.000000+00:00"))
    assert check(records, releases, "--release", "r1") == 1
    assert "differs from a republish" in capsys.readouterr().out

    # A dirty record never belongs to a committed release.
    write_record(records, make_record("icl_linear", "ssa", 6, {"error": 0.3, "accuracy": 0.7},
                                      git_dirty=True))
    assert check(records, releases, "--release", "r1") == 1
    assert "not run from a clean, committed tree" in capsys.readouterr().out


def populate_and_return(root):
    populate(root, {"softmax": 0.0, "ssa": -0.1})
    return root


def test_check_names_releases_without_records(tmp_path, capsys):
    releases = tmp_path / "leaderboard" / "releases"
    publish(populate_and_return(tmp_path / "old"), "old", releases, n_boot=N_BOOT)
    missing = tmp_path / "leaderboard" / "records"
    assert check(missing, releases) == 1
    assert "release old has no records" in capsys.readouterr().out
    (releases / "WITHOUT_RECORDS.txt").write_text("# before the records policy\nold\n")
    assert check(missing, releases) == 0
    assert "published before its records were committed" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="holds no release"):
        check(missing, tmp_path / "nothing")


@pytest.mark.slow
def test_the_repository_check_passes():
    """What .ci/run runs: the newest committed release against leaderboard/records (slow: the
    whole board's aggregation once records are committed)."""
    repo = Path(__file__).resolve().parent.parent
    outcome = reproduce(repo / "leaderboard" / "records", repo / "leaderboard" / "releases")
    assert outcome.ok, outcome.message
