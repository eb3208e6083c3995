"""Check every fast path of ``scorers.fast`` against its reference on a GPU, then time them.

    python scripts/gpu_check.py --out gpu_check.json            # about 5 minutes on one GPU

Correctness (fp32, TF32 off; forward output and the gradients of q, k, v and the scorer's own
parameters, against ``scorer.reference_attend`` in fp32; under bf16 autocast, the causal output
against the reference on the same bf16 inputs, tolerance 2e-2), for each scorer and path:

- flex: FlexAttention with the scorer's score_mod (compiled), causal and padded masks;
- fused: the SSA-family autograd.Function (bmm + compiled elementwise kernels);
- topk: sparsemax and entmax15 through the entmax package's partial sort;
- dense: the SSA family as one eager autograd.Function on whole logit rows;
- pivot: sparsemax and entmax15 with the sort-free threshold;
- blocked: the blocked forms with recompute (scorers/fast/blocked.py,
  scorers/fast/blocked_sparse.py, scorers/fast/blocked_rows.py, scorers/fast/blocked_stick.py);
- compile: torch.compile (on query blocks) of the logits-kind scorers without a native path;
- native: the scorers' own SDPA paths.

Timing: ``scorebench bench scorers`` on the GPU (bf16 inputs, causal mask), forward + backward
as a ratio to softmax through SDPA; its cost records go to ``--results``.

The checks run in priority order under ``--budget-s``; whatever did not fit is listed as not run.
``--device cpu --quick`` runs the same code on a CPU with tiny shapes (FlexAttention: forward
only), to try the script without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

import torch

import scorers
from scorers.fast import scorers_with
from scorers.forms import get_form

FP32_TOL = 1e-4      # compiled GPU kernels reorder sums; the CPU tests hold 1e-5
BF16_TOL = 2e-2
FLEX_ORDER = ["ssa", "sigmoid", "softmax_plus_one", "ssmax", "temperature_softmax", "stablemax",
              "ssa_gpt2", "learned_sink", "softmax"]
VARIANTS = {"temperature_softmax": [{"learnable": True}]}
# Settings the blocked form runs through other kernels or another backward
# (scorers/fast/blocked_rows.py, scorers/fast/blocked_stick.py), checked beside each scorer's
# defaults.
BLOCKED_VARIANTS = {"sa_softmax": [{"variant": "plain"}],
                    "stick_breaking": [{"attend_current": False}],
                    "adaptive_temperature": [{"beta_grad": True}]}


def masks(b: int, length: int, device) -> dict:
    causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]
    valid = torch.ones(b, length, dtype=torch.bool, device=device)
    valid[b // 2:, (3 * length) // 4:] = False
    gen = torch.Generator().manual_seed(1)
    random = (torch.rand(b, 1, length, length, generator=gen) > 0.5).to(device)
    random[0, 0, 3] = False
    return {"causal": causal, "padded": causal & valid[:, None, None, :], "random": random}


def make(name: str, kwargs: dict, heads: int, length: int, device) -> scorers.Scorer:
    scorer = scorers.create_scorer(name, num_heads=heads, max_len=length, **kwargs).to(device)
    with torch.no_grad():
        for _, p in sorted(scorer.named_parameters()):
            p.add_(0.25 * torch.linspace(-1.0, 1.0, p.numel(), device=device).view_as(p))
    return scorer


def grads_of(fn, scorer, q, k, v, g, mask, backward=True):
    qq, kk, vv = (t.clone().requires_grad_(backward) for t in (q, k, v))
    scorer.zero_grad(set_to_none=True)
    if not backward:
        with torch.no_grad():
            return fn(qq, kk, vv, mask).float(), []
    out = fn(qq, kk, vv, mask)
    (out.float() * g).sum().backward()
    grads = [qq.grad, kk.grad, vv.grad]
    grads += [p.grad if p.grad is not None else torch.zeros_like(p) for p in scorer.parameters()]
    return out.detach().float(), [x.float() for x in grads]


def max_errors(ref, got) -> dict:
    out = (ref[0] - got[0]).abs().max().item()
    grads = [((a - b).abs().max() / max(1.0, a.abs().max().item())).item()
             for a, b in zip(ref[1], got[1])]
    return {"output": out, "grad": max(grads) if grads else None}


def check(path: str, name: str, kwargs: dict, shape, device, backward: bool) -> dict:
    b, h, length, d = shape
    scorer = make(name, kwargs, h, length, device)
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(b, h, length, d, generator=gen).to(device) for _ in range(4))
    if path == "native":
        fn = scorer.kernels().native[1]
    else:
        form = get_form(path)(block_size=64)
        fn = lambda q, k, v, m: form.attend(scorer, q, k, v, m)  # noqa: E731
    result = {"path": path, "scorer": name, "kwargs": kwargs, "masks": {}}
    for mask_name, mask in masks(b, length, device).items():
        if mask_name == "random" and (scorer.causal_only or path == "flex"):
            continue  # flex: each mask kind is one more compilation; causal and padded suffice
        ref = grads_of(scorer.reference_attend, scorer, q, k, v, g, mask, backward)
        got = grads_of(fn, scorer, q, k, v, g, mask, backward)
        errors = max_errors(ref, got)
        if device.type == "cuda" and mask_name == "causal":
            # Against the reference on the same bf16 inputs: the rounding of q and k alone moves a
            # sparse scorer's support (sparsemax: 4e-2 from the fp32 reference).
            halves = [t.bfloat16() for t in (q, k, v)]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                ref_half = grads_of(scorer.reference_attend, scorer, *halves, g, mask, False)
                half = grads_of(fn, scorer, *halves, g, mask, False)
            errors["bf16_output"] = (ref_half[0] - half[0]).abs().max().item()
        result["masks"][mask_name] = errors
    worst_out = max(e["output"] for e in result["masks"].values())
    worst_grad = max((e["grad"] or 0.0) for e in result["masks"].values())
    worst_bf16 = max((e.get("bf16_output") or 0.0) for e in result["masks"].values())
    result["ok"] = worst_out <= FP32_TOL and worst_grad <= FP32_TOL and worst_bf16 <= BF16_TOL
    result["worst"] = {"output": worst_out, "grad": worst_grad, "bf16_output": worst_bf16}
    return result


def save(report: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(path + ".tmp", path)


def plan(device) -> list[tuple[str, str, dict]]:
    """(path, scorer, kwargs) in priority order: the FlexAttention score_mods, the fused SSA
    family, the topk entmax paths, the eager dense SSA and pivot forms, the scorers ``auto``
    leaves on the reference (compiled), the native paths (SDPA, linear), each as the scorers
    declare them (``scorers.forms.forms_of``)."""
    from scorers.fast import choose_path

    flex = scorers_with("flex")
    items = [("flex", name, kw) for name in FLEX_ORDER + [n for n in flex if n not in FLEX_ORDER]
             if name in flex for kw in [{}] + VARIANTS.get(name, [])]
    items += [("fused", n, {}) for n in scorers_with("fused")]
    items += [("topk", n, {}) for n in scorers_with("topk")]
    items += [("dense", n, {}) for n in scorers_with("dense")]
    items += [("pivot", n, {}) for n in scorers_with("pivot")]
    items += [("blocked", n, kw) for n in scorers_with("blocked")
              for kw in [{}] + BLOCKED_VARIANTS.get(n, [])]
    compiled, native = [], []
    cuda = torch.device("cuda")
    for name in scorers.list_scorers():
        scorer = scorers.create_scorer(name, num_heads=2, max_len=64)
        path = choose_path(scorer, cuda, "auto")
        if path == "reference" and choose_path(scorer, cuda, "compile") == "compile":
            compiled.append(("compile", name, {}))   # mode "compile"; auto keeps the reference
        elif path == choose_path(scorer, cuda, "off") != "reference":
            native.append(("native", name, {}))
    return items + compiled + native


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget-s", type=float, default=270.0,
                   help="stop starting new checks after this many seconds (default 270)")
    p.add_argument("--paths", default="flex,fused,topk,dense,pivot,blocked,compile,native",
                   help="the fast paths to check, in this order of priority (default: all)")
    p.add_argument("--check-shape", default="2,4,200,64",
                   help="B,H,L,D of the checks (default: L=200, not a multiple of the 128 block)")
    p.add_argument("--bench-shapes", default="8,8,1024,64;4,16,2048,64")
    p.add_argument("--bench-scorers", default="softmax,ssa,stablemax,sigmoid,softmax_plus_one,"
                                               "ssmax,entmax15,sparsemax,cosformer")
    p.add_argument("--quick", action="store_true", help="tiny shapes (a dry run on a CPU)")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gpu_check.json"))
    p.add_argument("--results", default=os.path.join(os.environ.get("OUT", "."), "results"))
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device is visible; use --device cpu --quick for a dry run",
              file=sys.stderr)
        return 2
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    shape = (1, 2, 40, 16) if args.quick else tuple(int(x) for x in args.check_shape.split(","))
    t0 = time.perf_counter()
    report = {"torch": torch.__version__, "python": platform.python_version(),
              "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "check_shape": list(shape), "checks": [], "not_run": [], "bench": None}
    print(f"gpu_check on {report['device']} (torch {torch.__version__})", flush=True)
    wanted = args.paths.split(",")
    checks = sorted((c for c in plan(device) if c[0] in wanted), key=lambda c: wanted.index(c[0]))
    for path, name, kwargs in checks:
        if time.perf_counter() - t0 > args.budget_s * 0.6:
            report["not_run"].append(f"{path}:{name}{kwargs or ''}")
            continue
        backward = not (path == "flex" and device.type == "cpu")
        started = time.perf_counter()
        try:
            result = check(path, name, kwargs, shape, device, backward)
        except Exception as e:  # noqa: BLE001 - a failing path is a finding, the rest go on
            result = {"path": path, "scorer": name, "kwargs": kwargs, "ok": False,
                      "error": f"{type(e).__name__}: {e}",
                      "traceback": traceback.format_exc(limit=3)}
        result["seconds"] = round(time.perf_counter() - started, 1)
        report["checks"].append(result)
        save(report, args.out)   # a run stopped by a time limit keeps the finished checks
        worst = result.get("worst", {})
        print(f"{'ok ' if result['ok'] else 'BAD'} {path:8s} {name:22s} "
              f"out {worst.get('output', float('nan')):.2e} grad {worst.get('grad') or 0:.2e} "
              f"bf16 {worst.get('bf16_output') or 0:.2e} ({result['seconds']} s)"
              + (f"  {result['error']}" if "error" in result else ""), flush=True)
    left = args.budget_s - (time.perf_counter() - t0)
    if left > 30:
        import statistics

        from tasks.bench import parse_shapes, shape_label
        from suite.commands.bench import run_bench_cells

        shapes = [[1, 2, 64, 16]] if args.quick else [list(s) for s in
                                                        parse_shapes(args.bench_shapes)]
        config = dict(shapes=shapes, repeats=10 if device.type == "cuda" else 2,
                      warmup=3 if device.type == "cuda" else 1,
                      dtype="bfloat16" if device.type == "cuda" else "float32",
                      device=str(device), fast_mode="auto")
        records = run_bench_cells("bench_scorers", config, args.bench_scorers,
                                  results=args.results,
                                  progress=lambda text: print(f"  bench {text}", flush=True))
        labels = [shape_label(s) for s in shapes]
        rows = []
        for r in records:
            m, paths = r["metrics"], r["extra"].get("paths", {})
            for label in labels:
                rows.append({"scorer": r["cell"]["scorer"], "shape": label, "status": r["status"],
                             "attend_ratio": m.get(f"attend_ratio_{label}"),
                             "fast_ratio": m.get(f"fast_ratio_{label}"),
                             "attend_path": paths.get(label, {}).get("attend"),
                             "fast_path": paths.get(label, {}).get("fast")})
        sdpa = {label: statistics.median(t for r in records
                                         for t in r["extra"].get("reference_ms", {}).get(label, []))
                if any(r["extra"].get("reference_ms", {}).get(label) for r in records) else None
                for label in labels}
        report["bench"] = {"config": config, "rows": rows, "sdpa_ms": sdpa}
        print(f"{'scorer':22s} {'shape':16s} attend×  fast×   path", flush=True)
        for r in rows:
            print(f"{r['scorer']:22s} {r['shape']:16s} {r['attend_ratio'] or float('nan'):6.2f} "
                  f"{r['fast_ratio'] or float('nan'):6.2f}  {r['fast_path'] or r['attend_path']}",
                  flush=True)
    else:
        report["not_run"].append("bench (no time left in the budget)")
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["all_ok"] = all(c["ok"] for c in report["checks"])
    save(report, args.out)
    print(f"{sum(c['ok'] for c in report['checks'])}/{len(report['checks'])} checks ok, "
          f"not run: {report['not_run'] or 'none'}; {report['seconds']} s; report in {args.out}")
    return 0 if report["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
