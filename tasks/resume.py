"""Mid-training checkpoints of a training loop, so that a cell killed mid-training resumes where
its last checkpoint left it and ends exactly as an uninterrupted run would.

A checkpoint holds everything the rest of the run depends on, split into tensors (the weights,
the optimizer's state, the random generators' states, best weights; ``NAME.safetensors``) and
plain JSON (``NAME.json``: the step, the loss log, the curves, the stopping rule's state), each
written to a temporary file and renamed into place, the JSON last: a checkpoint is complete when
its JSON names the tensors file's digest. One written under another torch version, thread count,
CPU capability (``torch.backends.cpu.get_cpu_capability()``: a host of other vector kernels),
machine (``RunContext.hardware``: an Intel and an AMD CPU of one capability round differently) or
fast mode is ignored (the run starts over), so that no record mixes two numerics. A cell's
checkpoints go once its record is written (``suite.scheduler``), not before: a record lost on its
way to the writer is made again from the finished checkpoint. A record of a harness failure keeps
them for the cell's rerun.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

DIRECTORY = "resume"     # under the cell's workdir
SAVE_EVERY_S = 60.0      # the least wall time between two checkpoints of one run


def resume_path(workdir: Path | None, name: str) -> Path | None:
    """Where the run ``name`` of a cell keeps its checkpoint (None without a workdir)."""
    return None if workdir is None else workdir / DIRECTORY / name


def numerics(fast: str, accumulation: int = 1, hardware: str | None = None) -> dict:
    """What a resumed run must share with the run that wrote the checkpoint."""
    return {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "hardware": hardware,
            "fast": fast, "accumulation": accumulation}


class Clock:
    """The CPU and wall seconds a training run has taken, over the processes that ran it."""

    def __init__(self, before: dict | None = None):
        self.before = dict(before or {"cpu_time_s": 0.0, "wall_time_s": 0.0})
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def spent(self) -> dict[str, float]:
        return {"cpu_time_s": self.before["cpu_time_s"] + time.process_time() - self.cpu,
                "wall_time_s": self.before["wall_time_s"] + time.perf_counter() - self.wall}


def save(path: Path, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
    """Write ``tensors`` and the JSON ``state`` as the checkpoint at ``path``."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    blob = path.with_suffix(".safetensors")
    partial = blob.with_name(blob.name + ".partial")
    # a copy each: safetensors refuses tensors that share storage (tied weights)
    save_file({k: v.detach().cpu().clone().contiguous() for k, v in tensors.items()}, str(partial))
    os.replace(partial, blob)
    text = json.dumps({**state, "tensors_sha256": _digest(blob)}, allow_nan=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(text)
    os.replace(partial, path.with_suffix(".json"))


def load(path: Path | None, expected: dict) -> tuple[dict[str, torch.Tensor], dict] | None:
    """The checkpoint at ``path`` as (tensors, state), or None when there is none, it is
    incomplete, or its ``numerics`` differ from ``expected``."""
    if path is None or not path.with_suffix(".json").is_file():
        return None
    from safetensors.torch import load_file

    try:
        state = json.loads(path.with_suffix(".json").read_text())
        blob = path.with_suffix(".safetensors")
        if state.get("numerics") != expected or state.get("tensors_sha256") != _digest(blob):
            return None
        return load_file(str(blob)), state
    except (OSError, ValueError):
        return None


def optimizer_parts(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """An optimizer's state dict as tensors (``opt.<param>.<name>``) and JSON."""
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, entries in sd["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"opt.{index}.{name}"] = value
            else:
                scalars[f"{index}.{name}"] = value
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()}
              for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor],
                      parts: dict) -> None:
    """Load what :func:`optimizer_parts` gave back into ``optimizer``."""
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("opt."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    for key, value in parts["scalars"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()}
              for g in parts["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def prefixed(prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}{k}": v for k, v in tensors.items()}


def unprefixed(prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
