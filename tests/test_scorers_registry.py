"""The scorer registry: names, errors, metadata, deterministic parameters and plugins."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import scorer_checks as sc
import scorers
from scorer_checks import single_thread  # noqa: F401  (autouse fixture)
from scorers import LogitsScorer, ScorerError, create_scorer, list_scorers, register_scorer
from scorers import registry

REPO = Path(__file__).resolve().parent.parent
BUILTIN = {
    "softmax", "temperature_softmax", "sparsemax", "entmax15", "entmax_bisect", "cosformer",
    "sa_softmax", "ssa", "ssa_gpt2", "stablemax", "ssmax", "sigmoid", "softmax_plus_one",
    "learned_sink", "softpick", "stick_breaking", "relu", "relu2", "linear_elu",
    "adaptive_temperature", "cog_signed",
}
TRAINABLE = {"ssa": ["rho"], "ssa_gpt2": ["a", "nu"], "ssmax": ["sigma"], "learned_sink": ["sink"]}
FAST = {"softmax", "temperature_softmax", "ssmax", "softmax_plus_one", "learned_sink", "cosformer",
        "linear_elu"}
NORMALIZATION = {
    "sa_softmax": "subnormalized", "sigmoid": "unnormalized", "softmax_plus_one": "subnormalized",
    "learned_sink": "subnormalized", "softpick": "subnormalized", "stick_breaking": "subnormalized",
    "relu": "unnormalized", "relu2": "unnormalized", "cog_signed": "signed",
}


@pytest.fixture
def isolated_registry():
    """Registry, aliases and plugin failures restored after the test."""
    modules = set(sys.modules)
    with registry.scoped():
        yield
    for name in set(sys.modules) - modules:
        if name.startswith("scorebench_plugin_"):
            del sys.modules[name]


def test_every_builtin_scorer_is_registered_with_its_aliases():
    assert BUILTIN <= set(list_scorers())
    assert scorers.canonical_name("softmax1") == "softmax_plus_one"
    assert scorers.canonical_name("relu_len") == "relu"
    assert scorers.canonical_name("relu2_len") == "relu2"
    assert type(create_scorer("softmax1")).__name__ == "SoftmaxPlusOne"


def test_import_and_create_ssa():
    scorer = create_scorer("ssa")
    assert isinstance(scorer, LogitsScorer) and scorer.name == "ssa"


@pytest.mark.parametrize("name", list_scorers())
def test_scorer_info(name):
    info = scorers.scorer_info(name)
    assert info["name"] == name and info["kind"] in registry.KINDS
    assert info["normalization"] in registry.NORMALIZATIONS
    assert info["family"] not in ("", "?") and info["paper"] and info["version"] >= 1
    assert info["description"] and isinstance(info["parameters"], dict)
    if name in BUILTIN:
        assert info["trainable"] == TRAINABLE.get(name, [])
        assert info["fast_path"] == (name in FAST)
        assert info["normalization"] == NORMALIZATION.get(name, "normalized")
        assert info["causal_only"] == (name == "stick_breaking")
        assert info["kind"] == ("module" if name in ("cosformer", "linear_elu") else "logits")


def test_trainable_parameters_of_options():
    def trainable(name, **kw):
        return sorted(n for n, p in create_scorer(name, num_heads=4, **kw).named_parameters())

    assert trainable("temperature_softmax", learnable=True) == ["log_tau"]
    assert trainable("entmax_bisect", learn_alpha=True) == ["alpha_logit"]
    assert trainable("ssa", learn_b=True) == ["beta", "rho"]
    assert trainable("ssa", learn_n=False) == []


@pytest.mark.parametrize("config", sc.configs(), ids=[sc.config_id(c) for c in sc.configs()])
def test_parameters_are_constants_and_leave_the_global_rng_alone(config):
    name, kwargs = config
    created = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        created.append(create_scorer(name, num_heads=3, max_len=64, **kwargs).state_dict())
        assert torch.equal(torch.get_rng_state(), state), f"{name} draws from the global RNG"
    assert created[0].keys() == created[1].keys()
    for key in created[0]:
        assert torch.equal(created[0][key], created[1][key]), key


def test_parameter_shapes_and_initial_values():
    assert create_scorer("ssa").rho.shape == (1,)
    assert create_scorer("ssa").b_fixed.shape == (1,) and create_scorer("ssa").b_fixed.item() == pytest.approx(0.8)
    assert create_scorer("ssa", learn_b=True).beta.shape == (1,)
    assert create_scorer("temperature_softmax", learnable=True, num_heads=5).log_tau.shape == (5,)
    ssmax = create_scorer("ssmax", num_heads=5, max_len=2048)
    assert torch.allclose(ssmax.sigma, torch.full((5,), 1 / math.log(2048)))
    assert torch.equal(create_scorer("learned_sink", num_heads=5).sink, torch.zeros(5))
    assert create_scorer("entmax_bisect", learn_alpha=True, num_heads=5).alpha_logit.shape == (1, 5, 1, 1)


def test_wildcards_and_resolution():
    assert list_scorers("entmax*") == ["entmax15", "entmax_bisect"]
    assert list_scorers("ssa*") == ["ssa", "ssa_gpt2", "ssa_n1_5", "ssa_n2"]
    assert list_scorers("relu*,sigmoid") == ["relu", "relu2", "sigmoid"]
    assert scorers.resolve_scorers("softmax1,ssa*") == ["softmax_plus_one", "ssa", "ssa_gpt2",
                                                        "ssa_n1_5", "ssa_n2"]
    with pytest.raises(ScorerError, match="no scorer matches"):
        scorers.resolve_scorers("nothing*")


def test_unknown_name_suggests_close_names():
    with pytest.raises(ScorerError, match=r"unknown scorer 'sofmax'\. Did you mean: softmax"):
        create_scorer("sofmax")
    with pytest.raises(ScorerError, match="entmax_bisect"):
        create_scorer("entmax_bisekt")


def test_duplicate_name_names_both_definitions(isolated_registry):
    with pytest.raises(ScorerError) as err:
        @register_scorer("ssa", family="test")
        class Impostor(LogitsScorer):
            pass
    message = str(err.value)
    assert "scorers.ssa.SSA" in message and "Impostor" in message and "ssa.py" in message
    with pytest.raises(ScorerError, match="SoftmaxPlusOne"):
        @register_scorer("fresh_name", aliases=("softmax1",), family="test")
        class AliasThief(LogitsScorer):
            pass
    assert "fresh_name" not in list_scorers()


def test_bad_keyword_names_the_scorer_and_its_parameters():
    with pytest.raises(ScorerError) as err:
        create_scorer("ssa", m=2.0)
    message = str(err.value)
    assert "'ssa'" in message and "['m']" in message
    for param in ("'b'", "'learn_b'", "'learn_n'", "'n'"):
        assert param in message
    with pytest.raises(ScorerError, match="no parameters of its own"):
        create_scorer("softmax", tau=2.0)


@pytest.mark.parametrize("name,kwargs,match", [
    ("ssa", {"n": -1.0}, "n must be > 0"),
    ("ssa", {"b": 0.0}, "b must be > 0"),
    ("temperature_softmax", {"tau": 0.0}, "tau must be > 0"),
    ("entmax_bisect", {"alpha": 0.9}, "alpha must be > 1"),
    ("entmax_bisect", {"n_iter": 0}, "n_iter must be >= 1"),
    ("relu", {"length": "padded"}, "length must be one of"),
    ("sa_softmax", {"variant": "signed"}, "variant must be one of"),
    ("ssmax", {"max_len": 1}, "max_len must be >= 2"),
])
def test_bad_values_are_clear_errors(name, kwargs, match):
    with pytest.raises(ScorerError, match=match):
        create_scorer(name, **kwargs)


PLUGIN = '''
"""A plugin scorer: w = softmax(g_h tanh(s)), gain g_h per head (init 2)."""
import torch
from torch import nn

import scorers
from scorers.base import masked_fill_neg_inf


@scorers.register_scorer("plugin_tanh_softmax", family="plugin", normalization="normalized",
                         paper="tests")
class TanhSoftmax(scorers.LogitsScorer):
    """w = softmax(g_h tanh(s))."""

    def __init__(self, **context):
        super().__init__(**context)
        self.gain = nn.Parameter(torch.full((self.num_heads,), 2.0))

    def weights(self, s, mask):
        gain = self.gain.to(s.dtype).view(-1, 1, 1)
        return torch.softmax(masked_fill_neg_inf(gain * torch.tanh(s), mask), dim=-1)
'''


def tanh_softmax_reference(scorer, q, k, mask):
    q, k = q.double().numpy(), k.double().numpy()
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    mask = np.broadcast_to(mask.numpy(), s.shape)
    gain = scorer.gain.detach().double().numpy()
    w = np.zeros_like(s)
    for b, h, i in np.ndindex(*s.shape[:3]):
        vis = mask[b, h, i]
        if vis.any():
            e = np.exp(gain[h] * np.tanh(s[b, h, i, vis]))
            w[b, h, i, vis] = e / e.sum()
    return w


def test_plugin_scorer_passes_the_same_checks(tmp_path, isolated_registry):
    path = tmp_path / "tanh_plugin.py"
    path.write_text(PLUGIN)
    assert scorers.load_plugin(path)
    assert "plugin_tanh_softmax" in list_scorers("plugin_*")
    ran = sc.run_all_checks("plugin_tanh_softmax", reference=tanh_softmax_reference)
    assert "check_reference" in ran and "check_gradients" in ran and len(ran) == len(sc.ALL_CHECKS) - 1
    assert scorers.scorer_info("plugin_tanh_softmax")["trainable"] == ["gain"]


def test_plugin_through_the_cli(tmp_path, isolated_registry, capsys, monkeypatch):
    from suite import cli

    monkeypatch.setenv("COLUMNS", "250")
    path = tmp_path / "cli_plugin.py"
    path.write_text(PLUGIN)
    assert cli.main(["ls", "scorers", "plugin_*", "--plugin", str(path)]) == 0
    assert "plugin_tanh_softmax" in capsys.readouterr().out
    assert cli.main(["ls", "scorers", "--plugin", str(path), "plugin_*"]) == 0
    shown = capsys.readouterr().out
    assert "plugin_tanh_softmax" in shown and "softmax_plus_one" not in shown
    assert "plugin_tanh_softmax" in list_scorers()


def test_check_reports_each_scorer_check_on_a_plugin(tmp_path, isolated_registry, capsys):
    from suite import cli

    good = tmp_path / "good_plugin.py"
    good.write_text(PLUGIN)
    assert cli.main(["check", "--plugin", str(good)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"scorer plugin_tanh_softmax ({good}, line ")
    outcomes = [line.split()[:2] for line in lines[1:11]]
    assert [n for n, _ in outcomes] == [f"{i}." for i in range(1, 11)]
    assert [o for _, o in outcomes] == ["pass"] * 6 + ["n/a", "n/a", "pass", "pass"]
    assert lines[11].strip() == "plugin_tanh_softmax: 8 passed, 0 failed, 2 not applicable"

    bad = tmp_path / "bad_plugin.py"
    bad.write_text(PLUGIN.replace("plugin_tanh_softmax", "plugin_unmasked").replace(
        "masked_fill_neg_inf(gain * torch.tanh(s), mask)", "gain * torch.tanh(s)"))
    assert cli.main(["check", "--plugin", str(bad), "--scorers", "plugin_unmasked"]) == 1
    lines = capsys.readouterr().out.splitlines()
    failed = [line.split()[0] for line in lines if line.split()[1:2] == ["FAIL"]]
    assert failed == ["2.", "3.", "4.", "9."]
    assert "2. FAIL  masked logits, keys and values change no output: plugin_unmasked " \
           "[causal]: masked logits change the weights by" in lines[2]
    assert lines[-1].strip() == "plugin_unmasked: 4 passed, 4 failed, 2 not applicable"


def test_check_without_a_plugin_says_what_to_give(isolated_registry):
    from suite import cli

    with pytest.raises(SystemExit, match="give your scorer's file with --plugin FILE.py"):
        cli.main(["check"])


def test_failing_plugin_is_reported_and_does_not_break_others(tmp_path, isolated_registry, capsys):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("import scorers\nraise RuntimeError('boom from a broken plugin')\n")
    good = tmp_path / "good_plugin.py"
    good.write_text(PLUGIN)
    before = len(registry.PLUGIN_FAILURES)
    assert scorers.load_plugin(bad) is False
    assert scorers.load_plugin(tmp_path / "missing.py") is False
    assert scorers.load_plugin(good) is True
    failures = registry.PLUGIN_FAILURES[before:]
    assert [f.source for f in failures] == [str(bad), str(tmp_path / "missing.py")]
    assert "boom from a broken plugin" in failures[0].traceback
    assert "Traceback" in failures[0].traceback and "does not exist" in failures[1].reason
    assert failures[1].traceback == "" and failures[0].reason == (
        "RuntimeError: boom from a broken plugin")
    assert "failed to import" in capsys.readouterr().err
    assert "plugin_tanh_softmax" in list_scorers()
    create_scorer("softmax")
    create_scorer("plugin_tanh_softmax")


def test_a_plugin_file_that_fails_to_import_stops_the_command(tmp_path, isolated_registry, capsys):
    from suite import cli

    bad = tmp_path / "bad_plugin.py"
    bad.write_text("raise RuntimeError('boom from a broken plugin')\n")
    assert cli.main(["ls", "scorers", "--plugin", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--plugin {bad} failed to import" in err and "boom from a broken plugin" in err
    assert cli.main(["ls", "scorers", "--plugin", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def run_cli(cwd, *args):
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "suite.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_missing_plugin_file_is_one_line_and_exit_2(tmp_path):
    done = run_cli(tmp_path, "run", "--plugin", "nothere.py")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"scorebench: --plugin nothere.py: plugin file 'nothere.py' does not exist (looked for "
        f"{Path(os.path.realpath(tmp_path)) / 'nothere.py'}); give the path of a Python file or "
        "leave the option out"]


def test_a_plugin_that_raises_shows_only_its_own_frames(tmp_path):
    (tmp_path / "raising_plugin.py").write_text(
        "import scorers\n"
        "\n"
        "def build():\n"
        "    raise RuntimeError('boom from the plugin')\n"
        "\n"
        "build()\n")
    done = run_cli(tmp_path, "run", "--plugin", "raising_plugin.py")
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        "scorebench: --plugin raising_plugin.py failed to import, so the scorers and tasks it "
        "registers are missing; fix the file or leave the option out:",
        "Traceback (most recent call last):"]
    plugin = Path(os.path.realpath(tmp_path)) / "raising_plugin.py"
    frames = [line for line in lines if line.startswith("  File ")]
    assert frames == [f'  File "{plugin}", line 6, in <module>',
                      f'  File "{plugin}", line 4, in build']
    assert lines[-1] == "RuntimeError: boom from the plugin"
    assert not any("importlib" in line or "registry.py" in line for line in lines)


def test_plugin_failures_that_are_not_the_plugins_code(tmp_path, isolated_registry):
    (tmp_path / "a_directory.py").mkdir()
    (tmp_path / "notes.txt").write_text("x = 1\n")
    (tmp_path / "syntax_plugin.py").write_text("x = 1\ndef f(:\n")
    for path, reason in [(tmp_path / "a_directory.py", "is a directory, not a Python file"),
                         (tmp_path / "notes.txt", "is not a Python source file (name it *.py)")]:
        assert scorers.load_plugin(path, report=False) is False
        failure = registry.PLUGIN_FAILURES[-1]
        assert failure.reason == f"plugin file {str(path)!r} {reason}"
        assert failure.traceback == ""
    # A syntax error: the file, line and caret, and no loader frames.
    assert scorers.load_plugin(tmp_path / "syntax_plugin.py", report=False) is False
    failure = registry.PLUGIN_FAILURES[-1]
    first = failure.traceback.splitlines()[0]
    assert first == f'  File "{tmp_path / "syntax_plugin.py"}", line 2'
    assert failure.traceback.splitlines()[-1].startswith("SyntaxError: ")
    assert "Traceback" not in failure.traceback and "importlib" not in failure.traceback


def test_scoped_registry_undoes_registrations():
    before = set(list_scorers())
    with registry.scoped():
        @scorers.register_scorer("scoped_test_scorer", family="test")
        class Temp(scorers.LogitsScorer):
            def weights(self, s, mask):
                return s.softmax(-1)

        assert "scoped_test_scorer" in list_scorers()
        assert scorers.load_plugin("/nonexistent/plugin.py", report=False) is False
        failures = len(registry.PLUGIN_FAILURES)
    assert set(list_scorers()) == before
    assert len(registry.PLUGIN_FAILURES) == failures - 1
