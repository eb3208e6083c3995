"""Tiny tasks for the harness tests, loaded with ``--plugin`` (or ``scorers.load_plugin``).

``suite_test_draws`` needs no model: its metric is the mean of draws from the seeded generators, so
a test can recompute it independently from the cell's seed. Its config makes it sleep (to be
killed mid-cell), leave a checkpoint in its workdir, append a line to a log per run (to count how
often a cell ran), or fail in each of the ways the harness maps to a status.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass

import numpy as np
import torch

from scorers import LogitsScorer, register_scorer
from tasks import Metric, RunContext, Task, TaskResult, TrainingFailure, register_task


@register_scorer("suite_test_unsupported", family="test", kind="logits")
class Unsupported(LogitsScorer):
    """A scorer that ``suite_test_draws`` declines to run (to test skipped cells)."""

    def weights(self, s, mask):
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)


@register_task("suite_test_draws")
class DrawsTask(Task):
    """Means of seeded random draws; sleeps, logs and fails on request."""

    version = 3
    track = "probe"
    metrics = {
        "mean_draw": Metric("lower", headline=True, description="mean of torch.rand(n)"),
        "first_normal": Metric("higher", description="the first numpy standard normal"),
    }

    @dataclass
    class Config:
        n: int = 6
        scale: float = 1.0
        sleep_s: float = 0.0
        log: str = ""           # append "cell seed scorer pid" here when run starts
        fail: str = ""  # error nan oom exit nonfinite undeclared badgrid block crash
        fail_while_exists: str = ""  # raise an error while this file exists
        barrier: int = 0        # after logging, wait until this many processes have logged
        checkpoint: bool = False  # write a marker where its checkpoints go, when run starts
        sigmas: tuple = (1, 2)

    def skip_reason(self, scorer: str) -> str | None:
        if scorer == "suite_test_unsupported":
            return "suite_test_draws does not run suite_test_unsupported"
        return None

    def run(self, scorer, scorer_kwargs, seed, config, ctx: RunContext) -> TaskResult:
        if config.log:
            with open(config.log, "a") as f:
                f.write(f"start {scorer} {seed} {os.getpid()}\n")
        if config.checkpoint:
            from tasks.resume import DIRECTORY

            (ctx.workdir / DIRECTORY).mkdir(parents=True, exist_ok=True)
            (ctx.workdir / DIRECTORY / "marker").write_text(str(os.getpid()))
        deadline = time.time() + 120
        while config.barrier and time.time() < deadline:
            with open(config.log) as f:
                if len({line.split()[3] for line in f}) >= config.barrier:
                    break
            time.sleep(0.02)
        if config.fail == "crash":
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        if config.fail == "block":
            import signal

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        steps = max(1, int(config.sleep_s / 0.05))
        for i in range(steps):
            if config.sleep_s:
                time.sleep(config.sleep_s / steps)
            ctx.report(i + 1, steps)
        if config.fail_while_exists and os.path.exists(config.fail_while_exists):
            raise RuntimeError(f"marker {config.fail_while_exists} exists")
        if config.fail == "error":
            raise ValueError("deliberate failure in suite_test_draws")
        if config.fail == "nan":
            raise TrainingFailure("nan", 7, "loss became nan at step 7")
        if config.fail == "oom":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if config.fail == "exit":
            raise SystemExit(3)
        draws = (torch.rand(config.n, dtype=torch.float64) * config.scale).tolist()
        mean = sum(draws) / len(draws)
        metrics = {"mean_draw": mean, "first_normal": float(np.random.standard_normal())}
        if config.fail == "nonfinite":
            metrics["first_normal"] = float("nan")
        if config.fail == "undeclared":
            metrics["surprise"] = 1.0
        grid = {"axes": {"rows": "sigma", "cols": "k"}, "rows": list(config.sigmas),
                "cols": [0, 1], "values": [[s * d for d in draws[:2]] for s in config.sigmas]}
        if config.fail == "badgrid":
            grid["values"] = grid["values"][:1]
        if config.log:
            with open(config.log, "a") as f:
                f.write(f"end {scorer} {seed} {os.getpid()}\n")
        return TaskResult(
            metrics=metrics, grids={"scaled": grid}, items={"mean_draw": draws},
            extra={"python_random": random.random(), "sigmas_type": type(config.sigmas).__name__,
                   "device": str(ctx.device), "workdir": str(ctx.workdir), "pid": os.getpid(),
                   "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                   "threads": torch.get_num_threads()},
            step=config.n)
