"""Mid-training checkpoints (tasks/resume.py): a cell interrupted mid-training, or after training
and before its record, resumes from its checkpoint and records exactly what an uninterrupted
run records; a checkpoint of other numerics or a torn one is ignored."""
import json
import shutil
from pathlib import Path

import pytest
import torch

import tasks
from tasks import RunContext, icl_linear, icl_mqar, icl_quantifiers
from tasks import resume as checkpoints

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"n_layer": 1, "n_head": 2, "n_embd": 8, "batch_size": 8, "eval_sequences": 8,
         "stop": "converged", "patience": 3, "eval_every": 5}
CONFIGS = {
    "icl_mqar": dict(SMALL, n_positions=16, vocab_size=64, train_len=16, train_pairs=(2,),
                     eval_lengths=(16,), eval_pairs=(2,), train_steps=60, lr=3e-3),
    "icl_linear": dict(SMALL, n_positions=24, curriculum_start=5, curriculum_end=9,
                       curriculum_every=4, train_steps=40, lr=1e-3, eval_points=(5, 9),
                       eval_sigma_x=(1.0, 2.0), eval_sigma=(1.0, 4.0), eval_functions=3),
    "icl_quantifiers": dict(SMALL, n_positions=24, curriculum_start=5, curriculum_end=9,
                            curriculum_every=4, train_steps=30, eval_points=(5, 10),
                            eval_sigmas=(1.0, 3.0), deviant_points=9, deviant_values=(10.0,)),
}
SAMPLERS = {"icl_mqar": (icl_mqar, "training_sampler"),
            "icl_linear": (icl_linear, "sample_linear"),
            "icl_quantifiers": (icl_quantifiers, "sample_sequences")}


class Interrupted(KeyboardInterrupt):
    pass


class Draws:
    """Counts the training batches a task draws (and its evaluation's, for icl_linear); raises
    Interrupted on the ``stop_at``-th while that is set."""

    def __init__(self, monkeypatch, task, stop_at=None):
        self.count, self.stop_at = 0, stop_at
        module, name = SAMPLERS[task]
        original = getattr(module, name)
        if task == "icl_linear":
            monkeypatch.setattr(module, name, self.wrap(original))
        else:
            monkeypatch.setattr(module, name, lambda *a, **k: self.wrap(original(*a, **k)))

    def wrap(self, sample):
        def wrapped(*args, **kwargs):
            self.count += 1
            if self.count == self.stop_at:
                raise Interrupted
            return sample(*args, **kwargs)
        return wrapped


def run(task, workdir, ctx=None):
    t = tasks.create_task(task)
    torch.manual_seed(0)
    ctx = ctx or RunContext(workdir=workdir)
    result = t.run("softmax", {}, 0, t.config(CONFIGS[task]), ctx)
    assert ctx.resumed == {} or workdir.name == "cell"
    extra = {k: v for k, v in result.extra.items() if k not in ("checkpoint", "checkpoints")}
    return json.loads(json.dumps({"metrics": result.metrics, "extra": extra, "step": result.step,
                                  "items": result.items}, default=str))


def adam_steps(monkeypatch):
    """Count the optimizer steps taken."""
    original, taken = torch.optim.Adam.step, [0]

    def step(self, *args, **kwargs):
        taken[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    return taken


@pytest.mark.parametrize("task", sorted(CONFIGS))
def test_a_run_interrupted_mid_training_resumes_and_records_what_an_uninterrupted_one_does(
        task, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "SAVE_EVERY_S", 0.0)     # a checkpoint after every step
    taken = adam_steps(monkeypatch)
    whole = run(task, tmp_path / "whole")
    uninterrupted, taken[0] = taken[0], 0
    # icl_quantifiers: inside its second model's training, the first one's finished
    first = whole["extra"]["train"]
    stop_at = 12 + (first[icl_quantifiers.QUANTIFIERS[0]]["steps"]
                    if task == "icl_quantifiers" else 0)
    draws = Draws(monkeypatch, task, stop_at=stop_at)
    with pytest.raises(Interrupted):
        run(task, tmp_path / "cell")
    assert list((tmp_path / "cell" / checkpoints.DIRECTORY).glob("*.json"))
    before, taken[0], draws.stop_at = taken[0], 0, None
    ctx = RunContext(workdir=tmp_path / "cell")
    assert run(task, tmp_path / "cell", ctx) == whole
    assert ctx.resumed["cpu_time_s"] > 0 and ctx.resumed["wall_time_s"] > 0
    assert before > 0 and taken[0] == uninterrupted - before   # it went on from the checkpoint


def test_a_run_interrupted_after_training_evaluates_its_finished_checkpoint_without_training(
        tmp_path, monkeypatch):
    whole = run("icl_mqar", tmp_path / "whole")
    original = icl_mqar.evaluate

    def interrupted(*args, **kwargs):
        raise Interrupted

    monkeypatch.setattr(icl_mqar, "evaluate", interrupted)
    with pytest.raises(Interrupted):
        run("icl_mqar", tmp_path / "cell")
    monkeypatch.setattr(icl_mqar, "evaluate", original)
    draws = Draws(monkeypatch, "icl_mqar")
    assert run("icl_mqar", tmp_path / "cell") == whole and draws.count == 0


def test_a_checkpoint_of_other_numerics_or_torn_is_ignored_and_the_run_starts_over(
        tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "SAVE_EVERY_S", 0.0)
    taken = adam_steps(monkeypatch)
    whole = run("icl_mqar", tmp_path / "whole")
    uninterrupted = taken[0]
    path = checkpoints.resume_path(tmp_path / "cell", "icl_mqar")
    other_numerics = {
        "numerics": lambda n: n.update(threads=n["threads"] + 1),
        "capability": lambda n: n.update(cpu_capability="another"),   # other vector kernels
        "machine": lambda n: n.update(hardware="AMD EPYC, 2 cores"),   # another vendor's CPU
    }
    for damage in (*other_numerics, "torn"):
        shutil.rmtree(path.parent, ignore_errors=True)
        draws = Draws(monkeypatch, "icl_mqar", stop_at=12)
        with pytest.raises(Interrupted):
            run("icl_mqar", tmp_path / "cell")
        draws.stop_at = None
        state = json.loads(path.with_suffix(".json").read_text())
        if damage in other_numerics:
            other_numerics[damage](state["numerics"])
            path.with_suffix(".json").write_text(json.dumps(state))
        else:
            blob = path.with_suffix(".safetensors")
            blob.write_bytes(blob.read_bytes()[:-8])
        assert checkpoints.load(path, checkpoints.numerics("off")) is None
        taken[0] = 0
        assert run("icl_mqar", tmp_path / "cell") == whole
        assert taken[0] == uninterrupted                  # from the start


def mqar_cell():
    from suite.cells import Cell, resolve_config

    task = tasks.create_task("icl_mqar")
    return Cell(task="icl_mqar", task_version=task.version, track="icl", scorer="softmax",
                scorer_version=1, scorer_kwargs={}, profile="t", seed=0,
                config=resolve_config(task, CONFIGS["icl_mqar"]))


def test_a_cell_resumed_by_the_runner_counts_the_earlier_processes_time(tmp_path, monkeypatch):
    from suite.runner import CellJob, run_cell

    monkeypatch.setattr(checkpoints, "SAVE_EVERY_S", 0.0)
    cell = mqar_cell()
    job = CellJob(cell, workdir=str(tmp_path / "work"))
    fresh = run_cell(CellJob(cell, workdir=str(tmp_path / "fresh")), device="cpu")
    assert "resumed" not in fresh["provenance"]
    draws = Draws(monkeypatch, "icl_mqar", stop_at=12)
    with pytest.raises(Interrupted):
        run_cell(job, device="cpu")
    assert list((tmp_path / "work" / checkpoints.DIRECTORY).glob("*.json"))
    draws.stop_at = None
    record = run_cell(job, device="cpu")
    earlier = record["provenance"]["resumed"]
    assert earlier["cpu_time_s"] > 0 and record["provenance"]["cpu_time_s"] > earlier["cpu_time_s"]
    assert record["metrics"] == fresh["metrics"] and record["step"] == fresh["step"]


def test_a_record_lost_before_its_writer_is_made_again_without_training(tmp_path, monkeypatch):
    from suite.cells import PlannedCell
    from suite.executors.local import LocalExecutor
    from suite.runner import run_cell
    from suite.scheduler import make_jobs, run_cells
    from suite.store import ResultStore

    cell = mqar_cell()
    store = ResultStore(tmp_path / "results")
    job, = make_jobs([PlannedCell(cell)], store, None)
    lost = run_cell(job, device="cpu")     # the worker's record, never written: the run was killed
    work = Path(job.workdir)
    assert sorted(p.name for p in (work / checkpoints.DIRECTORY).iterdir()) == [
        "icl_mqar.json", "icl_mqar.safetensors"]
    draws = Draws(monkeypatch, "icl_mqar")
    summary = run_cells([PlannedCell(cell)], store, LocalExecutor(workers=1))
    record, = summary.records
    assert draws.count == 0                                          # no training step again
    assert record["metrics"] == lost["metrics"] and record["step"] == lost["step"]
    assert record["provenance"]["resumed"]["cpu_time_s"] > 0
    assert store.existing(cell)["metrics"] == lost["metrics"]
    assert not (work / checkpoints.DIRECTORY).exists()               # gone with the record
    assert record["extra"]["checkpoint"] == str(work / "icl_mqar.safetensors")  # weights kept
    assert (work / "icl_mqar.safetensors").is_file()


def test_a_cell_that_fails_after_training_keeps_its_checkpoint_for_its_rerun(tmp_path, monkeypatch):
    from suite.cells import PlannedCell
    from suite.executors.local import LocalExecutor
    from suite.scheduler import make_jobs, run_cells
    from suite.store import ResultStore

    cell, store = mqar_cell(), ResultStore(tmp_path / "results")
    job, = make_jobs([PlannedCell(cell)], store, None)
    original = icl_mqar.evaluate

    def failing(*args, **kwargs):
        raise RuntimeError("evaluation failed")

    monkeypatch.setattr(icl_mqar, "evaluate", failing)
    failed, = run_cells([PlannedCell(cell)], store, LocalExecutor(workers=1)).records
    resume = Path(job.workdir) / checkpoints.DIRECTORY
    assert failed["status"] == "error" and resume.is_dir()
    monkeypatch.setattr(icl_mqar, "evaluate", original)
    draws = Draws(monkeypatch, "icl_mqar")
    again, = run_cells([PlannedCell(cell)], store, LocalExecutor(workers=1), rerun="failed").records
    assert again["status"] == "ok" and draws.count == 0 and not resume.exists()


def test_a_checkpoint_keeps_tied_weights_and_the_optimizer_state(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    model = torch.nn.Sequential(layer, torch.nn.Tanh(), layer)        # one weight, twice
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    tensors, parts = checkpoints.optimizer_parts(opt)
    path = tmp_path / "resume" / "run"
    checkpoints.save(path, {**checkpoints.prefixed("model.", model.state_dict()), **tensors},
                     {"numerics": {"x": 1}, "optimizer": parts})
    loaded, state = checkpoints.load(path, {"x": 1})
    twin = torch.nn.Linear(4, 4)
    copy = torch.nn.Sequential(twin, torch.nn.Tanh(), twin)
    copy.load_state_dict(checkpoints.unprefixed("model.", loaded))
    again = torch.optim.Adam(copy.parameters(), lr=1e-2)
    checkpoints.restore_optimizer(again, loaded, state["optimizer"])
    x = torch.randn(2, 4)
    for m, o in ((model, opt), (copy, again)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    assert torch.equal(model[0].weight, copy[0].weight) and torch.equal(model[0].bias, copy[0].bias)
