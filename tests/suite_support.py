"""Shared helpers of the harness tests (``tests/test_suite_*.py``)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
from pathlib import Path

import numpy as np
import torch

PLUGIN = Path(__file__).with_name("suite_plugin_tasks.py").resolve()
TASK = "suite_test_draws"


@contextlib.contextmanager
def loaded_plugin(path: Path):
    """Import the plugin file ``path`` (tasks, scorers) for the duration of a test, then restore
    the registries."""
    import scorers
    from scorers import registry as scorer_registry
    from tasks import registry as task_registry

    with task_registry.scoped(), scorer_registry.scoped():
        assert scorers.load_plugin(path), f"the test plugin {path.name} failed to import"
        yield


def plugin_tasks():
    """Register the test task and scorer for the duration of a test."""
    return loaded_plugin(PLUGIN)


def profile_file(path: Path, *, seeds=1, scorers="softmax", time_limit_s=0, **task) -> Path:
    """A standalone profile running only the test task, with ``task`` as its config overrides."""
    lines = ['extends = ""', "[run]", f'tasks = "{TASK}"', f"scorers = {json.dumps(scorers)}",
             f"seeds = {json.dumps(seeds)}", f"time_limit_s = {time_limit_s}",
             f"[tasks.{TASK}]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in task.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_draws(seed: int, n: int = 6, scale: float = 1.0) -> dict:
    """What the test task must report for ``seed``, recomputed independently of the harness."""
    torch.manual_seed(seed)
    draws = (torch.rand(n, dtype=torch.float64) * scale).tolist()
    np.random.seed(seed)
    normal = float(np.random.standard_normal())
    random.seed(seed)
    return {"draws": draws, "mean": math.fsum(draws) / n, "first_normal": normal,
            "python_random": random.random()}


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
