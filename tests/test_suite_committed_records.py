"""Records that live in the repository: the gzipped store form, resuming from it, stale records
(an older harness) run again, a checkout whose only changes are board outputs stays clean, and
``*`` selecting every task outside the cost track."""
from __future__ import annotations

import gzip
import json
import subprocess

import pytest
from suite_support import loaded_plugin, plugin_tasks, profile_file

from suite.cells import expand, resolve_tasks
from suite.executors import create_executor
from suite.profiles import load_profile
from suite.provenance import git_state
from leaderboard.loading.schema import RECORDS_VERSION, stale_reason
from suite.scheduler import run_cells
from suite.store import STORE_FILE, ResultStore


@pytest.fixture
def plugin():
    with plugin_tasks():
        yield


def gzip_dir(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / STORE_FILE).write_text('{"compression": "gzip"}\n')
    return root


def starts(log) -> list[str]:
    return [ln for ln in log.read_text().splitlines() if ln.startswith("start")] \
        if log.exists() else []


def planned_cells(tmp_path, seeds=2, **task):
    log = tmp_path / "log"
    profile = load_profile(profile_file(tmp_path / "p.toml", seeds=seeds, log=str(log), **task))
    return expand(profile), log


def run(store, planned):
    return run_cells(planned, store, create_executor("local", workers=1))


def test_gzip_store_writes_one_line_records_and_resumes_from_them(tmp_path, plugin):
    root = gzip_dir(tmp_path / "records")
    planned, log = planned_cells(tmp_path)
    first = run(ResultStore(root), planned)
    assert [r["status"] for r in first.records] == ["ok", "ok"]
    files = sorted(root.glob("*/*/*"))
    assert [f.name for f in files] == sorted(f"{p.cell.id}.json.gz" for p in planned)
    text = gzip.decompress(files[0].read_bytes()).decode()
    assert text.count("\n") == 1 and json.loads(text)["cell_id"] == files[0].name[:16]

    # The same record gives the same bytes (no timestamp in the gzip header).
    store = ResultStore(root)
    before = files[0].read_bytes()
    store.write(store.load(files[0]))
    assert files[0].read_bytes() == before

    again = run(ResultStore(root), planned)
    assert again.records == [] and len(again.resumed) == 2 and len(starts(log)) == 2
    assert ResultStore(root).find(planned[0].cell.id[:6]) == root / "suite_test_draws" / \
        "softmax" / f"{planned[0].cell.id}.json.gz"


def test_a_plain_json_record_is_read_by_a_gzip_store_and_replaced_on_rerun(tmp_path, plugin):
    planned, log = planned_cells(tmp_path, seeds=1)
    plain = tmp_path / "records"
    run(ResultStore(plain), planned)
    path = next(plain.glob("*/*/*.json"))
    gzip_dir(plain)
    store = ResultStore(plain)
    assert store.existing(planned[0].cell)["cell_id"] == path.stem
    assert run(store, planned).records == []
    run_cells(planned, store, create_executor("local", workers=1), rerun="all")
    assert not path.exists() and [p.name for p in plain.glob("*/*/*.json*")] == \
        [path.stem + ".json.gz"]


def test_a_bad_store_file_is_a_clear_error(tmp_path):
    (tmp_path / STORE_FILE).write_text('{"compression": "zstd"}')
    with pytest.raises(ValueError, match="compression 'zstd' is not one of"):
        ResultStore(tmp_path)


def test_stale_records_run_again_and_current_ones_are_kept(tmp_path, plugin):
    planned, log = planned_cells(tmp_path)
    store = ResultStore(gzip_dir(tmp_path / "records"))
    run(store, planned)
    assert all(r["provenance"]["records_version"] == RECORDS_VERSION
               for _, r in store.records())
    old = store.existing(planned[0].cell)
    del old["provenance"]["records_version"]   # written before the harness version existed
    store.write(old)
    assert stale_reason(old).startswith(f"records version 0 < {RECORDS_VERSION}")

    again = run(ResultStore(store.root), planned)
    assert [r["cell"]["seed"] for r in again.records] == [planned[0].cell.seed]
    assert len(again.resumed) == 1 and len(starts(log)) == 3
    assert store.existing(planned[0].cell)["provenance"]["records_version"] == RECORDS_VERSION


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def test_board_outputs_do_not_make_the_checkout_dirty(tmp_path):
    repo = tmp_path / "repo"
    (repo / "leaderboard" / "records").mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    (repo / "leaderboard" / "records" / "r.json.gz").write_bytes(b"x")
    (repo / "leaderboard" / "releases" / "v1").mkdir(parents=True)
    (repo / "leaderboard" / "releases" / "v1" / "results.json").write_text("{}")
    (repo / "LEADERBOARD.md").write_text("# board\n")
    sha, dirty = git_state(repo)
    assert len(sha) == 40 and dirty is False
    (repo / "code.py").write_text("x = 2\n")
    git_state.cache_clear()
    assert git_state(repo)[1] is True
    git_state.cache_clear()


COST_PLUGIN = '''
from dataclasses import dataclass
from tasks import Metric, Task, register_task

@register_task("zz_cost_bench")
class CostBench(Task):
    """A cost-track task that runs only when asked, for the selection test."""
    version = 1
    track = "cost"
    on_request = True
    metrics = {"ratio": Metric("lower", headline=True)}

    @dataclass
    class Config:
        n: int = 1

    def run(self, scorer, scorer_kwargs, seed, config, ctx):
        raise NotImplementedError
'''


def test_star_leaves_out_the_tasks_that_run_on_request(tmp_path):
    plugin_file = tmp_path / "cost_plugin.py"
    plugin_file.write_text(COST_PLUGIN)
    with loaded_plugin(plugin_file):
        every = resolve_tasks("*")
        assert "zz_cost_bench" not in every
        assert {"icl_quantifiers", "icl_linear", "saturation_probe", "decoder_lm",
                "encoder_mlm"} <= set(every)
        assert resolve_tasks("zz_cost*") == ["zz_cost_bench"]
        assert resolve_tasks("zz_cost_bench,icl_linear") == ["zz_cost_bench", "icl_linear"]


@pytest.mark.parametrize("name", ["cpu", "paper"])
def test_default_profiles_run_every_task_and_a_learned_temperature(name):
    from tasks import get_task_class, list_tasks

    profile = load_profile(name)
    quality = [t for t in list_tasks("*") if not get_task_class(t).on_request]
    assert resolve_tasks(profile.tasks) == quality
    assert profile.scorer_kwargs["temperature_softmax"] == {"learnable": True}
