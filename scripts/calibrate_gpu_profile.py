"""Calibrate the `gpu` profile on the first GPU run: time one cell of every task at the profile's
sizes, and print the measured cost, the night's total and the step counts that fit the budget.

    python scripts/calibrate_gpu_profile.py                       # the gpu profile, 8 h
    python scripts/calibrate_gpu_profile.py --scorers softmax,ssa,entmax_bisect --json cal.json
    python scripts/calibrate_gpu_profile.py --profile cpu --tasks icl_linear   # a CPU's FLOP/s

Per task, with the fit of :func:`suite.estimate.fit` (softmax at two short training lengths;
``--full`` times one whole cell instead): t_cell = fixed + per_step x steps. The registry factor M
is the mean over the timed scorers of their t_cell / softmax's (``--registry-factor`` when only
softmax is timed; default 1.5, the profile's assumption). A task's night is
cells x M x t_cell(softmax); the steps that fit its share of the budget are

    steps' = (share x budget / (cells x M) - fixed) / per_step.

Achieved TFLOP/s = F_step / per_step with F_step from :func:`step_flops` (6 x parameters x tokens
+ 12 x layers x sequences x T^2 x width for attention; an estimate of the matmul work). Put the
printed seconds per cell into the profile's ``[estimate]`` table and the steps into its tasks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARES = {"decoder_lm": 0.35, "encoder_mlm": 0.20, "icl_quantifiers": 0.15, "icl_linear": 0.15,
          "icl_mqar": 0.10, "saturation_probe": 0.05}
ENCODER_TOKENS_PER_SENTENCE = 40   # padded AO-CHILDES batch length, an assumption
ENCODER_VOCAB = 8192


def step_flops(task: str, c: dict) -> float | None:
    """Training FLOPs of one step of ``task`` with config ``c`` (None: no formula)."""
    if task in ("icl_linear", "icl_quantifiers"):
        d, L, B = c["n_embd"], c["n_layer"], c["batch_size"]
        T = 2 * c["curriculum_end"]
        params = L * (12 if c.get("mlp", True) else 4) * d * d
        return 6 * params * B * T + 12 * L * B * T * T * d
    if task == "decoder_lm":
        d, L, B, T = c["dim"], c["n_layer"], c["batch_size"], c["max_len"]
        d_kv = d * c["n_kv_head"] // c["n_head"]
        params = L * (2 * d * d + 2 * d * d_kv + 2 * d * c["ffn_dim"])
        return 6 * (params + c["vocab_size"] * d) * B * T + 12 * L * B * T * T * d
    if task == "encoder_mlm":
        d, L, B, S = c["n_embd"], c["n_layer"], c["batch_size"], ENCODER_TOKENS_PER_SENTENCE
        params = L * (4 * d * d + 2 * d * c["ffn_dim"]) + ENCODER_VOCAB * d
        return 6 * params * B * S + 12 * L * B * S * S * d
    return None


def main(argv=None) -> int:
    from suite.cells import expand
    from suite.estimate import duration, fit
    from suite.profiles import load_profile
    from suite.runner import default_device

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="gpu")
    p.add_argument("--tasks", help="tasks to time (default: the profile's)")
    p.add_argument("--scorers", default="softmax",
                   help="scorers to time (softmax first; more of them measure the registry factor)")
    p.add_argument("--budget-h", type=float, default=8.0, help="the night, in hours (default 8)")
    p.add_argument("--registry-factor", type=float, default=1.5,
                   help="M when only softmax is timed (default 1.5)")
    p.add_argument("--full", action="store_true", help="time whole cells, not two short runs")
    p.add_argument("--device", help="default: cuda when available, else cpu")
    p.add_argument("--json", metavar="FILE", help="also write the measurements as JSON")
    args = p.parse_args(argv)

    device = args.device or default_device()
    profile = load_profile(args.profile)
    every = expand(profile, tasks=args.tasks)           # the night: the whole registry x seeds
    timed = [s.strip() for s in args.scorers.split(",") if s.strip()]
    if timed[0] != "softmax":
        timed.insert(0, "softmax")
    budget = args.budget_h * 3600
    rows, total = [], 0.0
    for task in dict.fromkeys(pc.cell.task for pc in every):
        cells = [pc.cell for pc in every if pc.cell.task == task and not pc.skip_reason]
        if not cells:
            continue
        fits = {}
        for scorer in timed:
            if any(c.scorer == scorer for c in cells):
                fits[scorer] = fit(cells[0], device, scorer=scorer, full=args.full)
                print(f"  {task} {scorer}: {fits[scorer].how}: fixed {fits[scorer].fixed:.2f} s, "
                      f"{fits[scorer].per_step * 1e3:.2f} ms/step", flush=True)
        base = fits["softmax"]
        factor = (sum(f.seconds for f in fits.values()) / len(fits) / base.seconds
                  if len(fits) > 1 else args.registry_factor)
        night = len(cells) * factor * base.seconds
        total += night
        flops = step_flops(task, cells[0].config)
        share = SHARES.get(task)
        fitting = None
        if share and base.per_step > 0:
            fitting = int((share * budget / (len(cells) * factor) - base.fixed) / base.per_step)
        rows.append({
            "task": task, "cells": len(cells), "device": device, "steps_key": base.steps_key,
            "steps": base.steps, "fixed_s": base.fixed, "per_step_s": base.per_step,
            "softmax_cell_s": base.seconds, "registry_factor": factor,
            "measured_factor": len(fits) > 1, "cell_s": factor * base.seconds, "night_s": night,
            "flops_per_step": flops,
            "tflops": flops / base.per_step / 1e12 if flops and base.per_step > 0 else None,
            "share": share, "steps_that_fit_share": fitting,
            "scorers": {k: v.seconds for k, v in fits.items()}})
    from tabulate import tabulate

    print(tabulate([[r["task"], r["cells"], f"{r['per_step_s'] * 1e3:.2f}", f"{r['fixed_s']:.1f}",
                     "?" if r["tflops"] is None else f"{r['tflops']:.3g}",
                     f"{r['softmax_cell_s']:.1f}", f"{r['registry_factor']:.2f}"
                     + ("" if r["measured_factor"] else " (assumed)"),
                     duration(r["night_s"]), f"{r['steps']} -> {r['steps_that_fit_share']}"
                     if r["steps_that_fit_share"] is not None else ""] for r in rows],
                   headers=["task", "cells", "ms/step", "fixed s", "TFLOP/s", "softmax cell s",
                            "M", "night", "steps -> fit share"], tablefmt="github",
                   disable_numparse=True))
    print(f"\ntotal {duration(total)} on {device} for {args.profile} "
          f"(budget {args.budget_h:g} h: {'fits' if total <= budget else 'OVER'})")
    print("[estimate] seconds_per_cell = {"
          + ", ".join(f"{r['task']} = {r['cell_s']:.1f}" for r in rows) + "}")
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": args.profile, "device": device,
                                               "budget_h": args.budget_h, "total_s": total,
                                               "tasks": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
