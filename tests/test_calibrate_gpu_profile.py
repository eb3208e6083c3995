"""scripts/calibrate_gpu_profile.py: the FLOPs per training step against hand counts, and one
run on a CPU on a tiny profile (the timing, the night's total and the steps that fit a share)."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "calibrate_gpu_profile.py"


def load_script():
    spec = importlib.util.spec_from_file_location("calibrate_gpu_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_step_flops_match_hand_counts():
    cal = load_script()
    # ICL, 1 layer, width 2, batch 1, curriculum end 1 (2 tokens): 12 x 1 x 4 = 48 parameters;
    # 6 x 48 x 2 = 576 for the weights, 12 x 1 x 1 x 2^2 x 2 = 96 for attention
    icl = {"n_embd": 2, "n_layer": 1, "batch_size": 1, "curriculum_end": 1, "mlp": True}
    assert cal.step_flops("icl_linear", icl) == 576 + 96
    assert cal.step_flops("icl_quantifiers", {**icl, "mlp": False}) == 6 * 16 * 2 + 96
    # decoder: d 4, 2 heads / 1 kv head (kv width 2), ffn 8, vocab 10, 1 layer, 1 x 3 tokens:
    # 2*16 + 2*4*2 + 2*4*8 = 112 block parameters + 40 embedding; 6 x 152 x 3 + 12 x 9 x 4
    dec = {"dim": 4, "n_layer": 1, "n_head": 2, "n_kv_head": 1, "ffn_dim": 8, "vocab_size": 10,
           "batch_size": 1, "max_len": 3}
    assert cal.step_flops("decoder_lm", dec) == 6 * 152 * 3 + 12 * 9 * 4
    assert cal.step_flops("saturation_probe", {"rows": 8}) is None


def test_the_gpu_profile_declares_an_estimate_for_every_task_it_runs():
    from suite.cells import expand
    from suite.profiles import load_profile

    profile = load_profile("gpu")
    planned = expand(profile)
    tasks = {p.cell.task for p in planned}
    assert tasks <= set(profile.estimate["seconds_per_cell"])
    assert {p.cell.seed for p in planned} == set(range(5))
    night = sum(profile.estimate["seconds_per_cell"][p.cell.task] for p in planned
                if not p.skip_reason)
    assert night < 8 * 3600  # the profile's own arithmetic fits the night


@pytest.mark.slow
def test_one_run_on_a_tiny_profile(tmp_path):
    cal = load_script()
    profile = tmp_path / "tiny.toml"
    profile.write_text('extends = "smoke"\n[run]\ntasks = ["icl_linear"]\nscorers = "softmax"\n'
                       'seeds = 2\n')
    out = tmp_path / "cal.json"
    assert cal.main(["--profile", str(profile), "--device", "cpu", "--json", str(out),
                     "--budget-h", "1"]) == 0
    [row] = json.loads(out.read_text())["tasks"]
    assert row["task"] == "icl_linear" and row["cells"] == 2 and row["steps"] == 200
    assert row["softmax_cell_s"] == pytest.approx(row["fixed_s"] + 200 * row["per_step_s"])
    assert row["night_s"] == pytest.approx(2 * 1.5 * row["softmax_cell_s"])
    if row["per_step_s"] > 0:
        assert row["steps_that_fit_share"] == int(
            (0.15 * 3600 / (2 * 1.5) - row["fixed_s"]) / row["per_step_s"])
