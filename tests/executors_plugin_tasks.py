"""A tiny real task for the executor tests, loaded with ``--plugin`` (``scorers.load_plugin``), so
that worker processes of every engine (local pool, Ray, submitit) register it too.

``executors_test_attention`` trains one attention layer (any scorer) to copy a running mean of
its inputs, for a few Adam steps on seeded data, with micro-batches and gradient accumulation, and
evaluates the mean squared error per held-out sequence. Its config can make a run crash its
process once (``crash_marker``) or always (``crash_always``), end in NaN (``nan``), or run out of
memory when the micro-batch (the batch over ``RunContext.accumulation``) is larger than
``oom_above``; ``attempts_log`` gets one line per start, to count runs.
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import torch
from torch import nn

from scorers import Attention, causal_mask
from tasks import Metric, RunContext, Task, TaskResult, TrainingFailure, register_task
from tasks.base import micro_batches


class CopyModel(nn.Module):
    def __init__(self, scorer: str, scorer_kwargs: dict, dim: int, heads: int, length: int):
        super().__init__()
        self.read_in = nn.Linear(1, dim)
        self.attn = Attention(dim, heads, scorer, max_len=length, scorer_kwargs=scorer_kwargs)
        self.read_out = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.read_in(x[..., None])
        h = h + self.attn(h, causal_mask(x.shape[1], device=x.device))
        return self.read_out(h)[..., 0]


def running_mean(x: torch.Tensor) -> torch.Tensor:
    return x.cumsum(1) / torch.arange(1, x.shape[1] + 1, dtype=x.dtype)


@register_task("executors_test_attention")
class AttentionCopyTask(Task):
    """One attention layer learns the running mean of its inputs; per-sequence MSE."""

    version = 1
    supports_accumulation = True
    track = "probe"
    metrics = {"eval_mse": Metric("lower", headline=True, description="held-out MSE"),
               "train_loss": Metric("lower", description="last training loss")}

    @dataclass
    class Config:
        steps: int = 4
        batch_size: int = 8
        length: int = 12
        dim: int = 16
        heads: int = 2
        eval_sequences: int = 6
        crash_marker: str = ""   # no such file: create it, then SIGKILL this process
        crash_always: bool = False  # SIGKILL this process on every run
        nan: bool = False        # end in status nan after the first step
        oom_above: int = 0       # raise out-of-memory when the micro-batch exceeds this
        attempts_log: str = ""   # append "start <scorer> <seed> <pid>" on every start

    def run(self, scorer, scorer_kwargs, seed, config, ctx: RunContext) -> TaskResult:
        if config.attempts_log:
            with open(config.attempts_log, "a") as f:
                f.write(f"start {scorer} {seed} {os.getpid()}\n")
        if config.crash_marker and not os.path.exists(config.crash_marker):
            open(config.crash_marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if config.crash_always:
            os.kill(os.getpid(), signal.SIGKILL)
        parts = micro_batches(config.batch_size, ctx.accumulation)
        micro = max(p.stop - p.start for p in parts)
        if config.oom_above and micro > config.oom_above:
            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory (micro-batch {micro} > {config.oom_above})")
        torch.manual_seed(seed)
        model = CopyModel(scorer, scorer_kwargs, config.dim, config.heads, config.length)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(seed)
        loss_value = float("nan")
        for step in range(config.steps):
            x = torch.randn(config.batch_size, config.length, generator=gen)
            opt.zero_grad()
            total = 0.0
            for part in parts:
                share = (part.stop - part.start) / config.batch_size
                loss = ((model(x[part]) - running_mean(x[part])) ** 2).mean() * share
                loss.backward()
                total += float(loss.detach())
            opt.step()
            loss_value = total
            if config.nan:
                raise TrainingFailure("nan", step + 1, f"loss became nan at step {step + 1}")
            ctx.report(step + 1, config.steps)
        with torch.no_grad():
            x = torch.randn(config.eval_sequences, config.length, generator=gen)
            per_seq = ((model(x) - running_mean(x)) ** 2).mean(1).double().tolist()
        return TaskResult(metrics={"eval_mse": sum(per_seq) / len(per_seq),
                                   "train_loss": loss_value},
                          items={"eval_mse": per_seq},
                          extra={"micro_batch_size": micro, "accumulation": ctx.accumulation,
                                 "pid": os.getpid()},
                          step=config.steps)


@register_task("executors_test_no_micro_batch")
class NoMicroBatchTask(Task):
    """A task that does not split its batches: an out-of-memory record cannot be retried."""

    version = 1
    track = "probe"
    metrics = {"value": Metric("lower", headline=True)}

    @dataclass
    class Config:
        batch_size: int = 8

    def run(self, scorer, scorer_kwargs, seed, config, ctx: RunContext) -> TaskResult:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
