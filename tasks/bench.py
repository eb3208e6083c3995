"""The cost track: what each scorer costs, as a ratio to softmax measured in the same run.

``bench_scorers``: forward + backward of every scorer's ``attend`` on random (B, H, L, D) inputs,
as shipped ("attend": the scorer's own fast path or its reference) and through ``scorers.fast``
("fast": fused / compiled / flex, where that is a different path), against softmax through
``F.scaled_dot_product_attention`` with the same mask. Every variant is warmed up (compilation
happens there), then timed ``repeats`` times, interleaved round by round so that load on a shared
machine touches every variant alike; the median is reported.

``bench_train``: the training step (forward, backward, Adam) of each backbone of ``tasks/models``
per scorer, as a ratio to the softmax backbone's step, interleaved the same way.

Peak memory of one forward + backward: on CUDA ``torch.cuda.max_memory_allocated`` above what was
allocated before; on CPU the allocation timeline of ``torch.profiler`` (``profile_memory=True``):
the largest sum of bytes live at once, counting only tensors created during the call. Both are
torch's own allocations (not the process RSS, which the allocator's caching blurs).

The tasks ``bench_scorers`` and ``bench_train`` (``tasks/cost.py``, track ``cost``) run these
measurements one scorer per cell through the harness (records, resume, executors, time limits);
their metrics are ratios (direction ``lower``) and the leaderboard shows them as its cost track.
``scorebench bench scorers|train`` is a shortcut to those tasks.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

import torch
import torch.nn.functional as F

from registry.settings import Settings, SettingError, setting

PROFILE = "bench"
DEFAULT_SHAPES = ((8, 8, 128, 32), (4, 8, 512, 64))
MASKS = ("causal", "none", "padding")
CLOCKS = ("wall", "cpu")
DTYPES = ("float32", "bfloat16", "float16", "float64")
MEMORY_METHOD = {"cpu": "torch.profiler allocation timeline (peak bytes live, created in the call)",
                 "cuda": "torch.cuda.max_memory_allocated above the allocation before the call"}


class BenchError(SettingError):
    """A bench option is wrong; the message says how to fix it."""


def fast_modes() -> tuple[str, ...]:
    """Every mode a bench measures: auto, off and the registered fast forms."""
    from scorers.fast import modes

    return modes()


# ---------------------------------------------------------------------------------------------
# Options

def parse_shapes(text: str) -> list[tuple[int, int, int, int]]:
    """``"8,8,128,32;4,8,512,64"`` -> [(8, 8, 128, 32), (4, 8, 512, 64)] (B, H, L, D each)."""
    shapes = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        try:
            dims = tuple(int(x) for x in part.replace("x", ",").split(","))
        except ValueError:
            dims = ()
        if len(dims) != 4 or min(dims) < 1:
            raise BenchError(f"--shapes: {part!r} is not B,H,L,D with four positive integers "
                             f"(e.g. --shapes '8,8,128,32;4,8,512,64')")
        shapes.append(dims)
    if not shapes:
        raise BenchError("--shapes: give at least one B,H,L,D shape")
    return shapes


def parse_lengths(text: str) -> list[int]:
    """``"256,512,1024"`` -> [256, 512, 1024]: the sequence lengths of a sweep."""
    try:
        lengths = [int(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise BenchError(f"--lengths: {text!r} is not a list of positive integers "
                         f"(e.g. --lengths 256,512,1024,2048)")
    return lengths


def sweep_shapes(shapes, lengths) -> list[tuple[int, int, int, int]]:
    """Every shape of ``shapes`` at every length of ``lengths`` (its L replaced), in order."""
    out = []
    for b, h, _, d in shapes:
        for length in lengths:
            if (b, h, length, d) not in out:
                out.append((b, h, length, d))
    return out


def shape_label(shape) -> str:
    return "x".join(str(x) for x in shape)


def make_mask(kind: str, b: int, length: int, device) -> torch.Tensor | None:
    """The attention mask of the bench: causal (decoders), none (encoders without padding), or
    padding (causal, the second half of the batch padded to 3/4 of the length)."""
    if kind == "none":
        return None
    causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]
    if kind == "causal":
        return causal
    if kind == "padding":
        valid = torch.ones(b, length, dtype=torch.bool, device=device)
        valid[b // 2:, (3 * length) // 4:] = False
        return causal & valid[:, None, None, :]
    raise BenchError(f"--mask must be one of {MASKS}, got {kind!r}")


def _utc_now() -> str:
    """ISO-8601 UTC time, as the records write it (``suite.provenance.utc_now``)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------
# Measuring

def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _clock(kind: str) -> Callable[[], float]:
    if kind == "wall":
        return time.perf_counter
    if kind == "cpu":
        return time.process_time
    raise BenchError(f"--clock must be one of {CLOCKS}, got {kind!r}")


@dataclass
class Variant:
    """One thing to time: ``step()`` runs it once (forward + backward, or a training step)."""

    key: str
    step: Callable[[], None]
    path: str = ""
    error: str | None = None
    times: list[float] = field(default_factory=list)
    peak_bytes: int | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def _fail(variant: Variant, exc: BaseException) -> None:
    text = str(exc).strip()
    variant.error = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    variant.times.clear()


def run_interleaved(variants: list[Variant], *, repeats: int, warmup: int, device,
                    clock: str = "wall", progress: Callable[[str], None] | None = None) -> None:
    """Warm every variant up, then time ``repeats`` rounds, each running every variant once."""
    now = _clock(clock)
    for v in variants:
        if progress:
            progress(f"warm-up {v.key}")
        try:
            for _ in range(warmup):
                v.step()
            _sync(device)
        except Exception as e:  # noqa: BLE001 - a failing variant is reported, the rest go on
            _fail(v, e)
    for r in range(repeats):
        if progress:
            progress(f"round {r + 1}/{repeats}")
        for v in variants:
            if v.error:
                continue
            try:
                _sync(device)
                t0 = now()
                v.step()
                _sync(device)
                v.times.append(now() - t0)
            except Exception as e:  # noqa: BLE001
                _fail(v, e)


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (the profiler's C++ side prints start/stop lines there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cpu_peak_bytes(step: Callable[[], None]) -> int:
    """Peak bytes of tensors live at once among those ``step`` creates (torch.profiler timeline)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                  record_shapes=True, with_stack=True) as prof:
        step()
    live = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action == Action.CREATE:
            live += size
        elif action == Action.DESTROY:
            live -= size
        peak = max(peak, live)
    return int(peak)


def peak_bytes(step: Callable[[], None], device) -> int:
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - base)
    return cpu_peak_bytes(step)


def measure_memory(variants: list[Variant], device) -> None:
    for v in variants:
        if v.error:
            continue
        try:
            v.peak_bytes = peak_bytes(v.step, device)
        except Exception as e:  # noqa: BLE001 - memory is optional; the timing stands
            v.peak_bytes = None
            v.path += f" (memory not measured: {type(e).__name__})"


# ---------------------------------------------------------------------------------------------
# bench scorers

def _check_device(device: str) -> None:
    try:
        torch.device(device)
    except (RuntimeError, TypeError):
        raise BenchError(f"config key 'device' must be a torch device (cpu, cuda, cuda:1), "
                         f"got {device!r}", "device") from None


@dataclass
class ScorerBenchConfig(Settings):
    """``bench_scorers``: shapes (B, H, L, D), timing and the device measured (part of the cell)."""

    error = BenchError

    shapes: list = setting(default_factory=lambda: [list(s) for s in DEFAULT_SHAPES])
    repeats: int = setting(5, ge=1)
    warmup: int = setting(2, ge=1)             # compilation happens there
    mask: str = setting("causal", choices=MASKS)
    dtype: str = setting("float32", choices=DTYPES)
    device: str = "cpu"
    threads: int = setting(0, ge=0)            # 0: torch's default
    clock: str = setting("wall", choices=CLOCKS)
    fast_mode: str = setting("auto", choices=fast_modes)
    block_size: int | None = setting(None, ge=1)   # None: each form's own

    def check(self) -> None:
        if not self.shapes or not all(
                isinstance(x, (list, tuple)) and len(x) == 4
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in x)
                for x in self.shapes):
            raise BenchError(f"config key 'shapes' must be a list of [B, H, L, D] lists of "
                             f"positive integers, got {self.shapes!r}", "shapes")
        _check_device(self.device)


@dataclass
class ScorerBench:
    """Every variant of every scorer at every shape, and the SDPA reference of each shape."""

    config: ScorerBenchConfig
    scorers: list[str]
    reference: dict[str, Variant] = field(default_factory=dict)          # shape label -> SDPA
    variants: dict[str, dict[str, dict[str, Variant]]] = field(default_factory=dict)
    load_before: list[float] | None = None
    load_after: list[float] | None = None
    started: str = ""
    finished: str = ""
    wall_time_s: float = 0.0
    setup_errors: dict[str, str] = field(default_factory=dict)           # scorer -> why


def _inputs(shape, dtype, device, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, h, length, d = shape
    q, k, v, g = (torch.randn(b, h, length, d, generator=gen).to(device=device, dtype=dtype)
                  for _ in range(4))
    return q, k, v, g


def _attend_step(fn, q, k, v, g, params) -> Callable[[], None]:
    def step():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        for p in params:
            p.grad = None
        out = fn(qq, kk, vv)
        out.backward(g)

    return step


def bench_scorers(names: list[str], config: ScorerBenchConfig,
                  progress: Callable[[str], None] | None = None) -> ScorerBench:
    """Measure every scorer of ``names`` at every shape of ``config`` (see the module doc)."""
    import scorers
    from scorers.fast import accelerate, choose_path

    config.check()
    if config.threads:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    dtype = getattr(torch, config.dtype)
    result = ScorerBench(config, list(names), load_before=load_average(), started=_utc_now())
    t0 = time.perf_counter()
    for shape in (tuple(s) for s in config.shapes):
        label = shape_label(shape)
        b, h, length, d = shape
        q, k, v, g = _inputs(shape, dtype, device)
        mask = make_mask(config.mask, b, length, device)
        ref = Variant("sdpa", _attend_step(
            lambda qq, kk, vv: F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask),
            q, k, v, g, []), path="F.scaled_dot_product_attention")
        variants = [ref]
        per_scorer: dict[str, dict[str, Variant]] = {}
        for name in names:
            try:
                plain = scorers.create_scorer(name, num_heads=h, max_len=length).to(device)
                fast = None
                if config.fast_mode != "off":
                    fast = scorers.create_scorer(name, num_heads=h, max_len=length).to(device)
                    accelerate(fast, config.fast_mode, block_size=config.block_size,
                               device=device)
            except Exception as e:  # noqa: BLE001 - reported in the scorer's record
                result.setup_errors[name] = f"{type(e).__name__}: {e}"
                continue
            own = choose_path(plain, device, "off")
            found = {"attend": Variant(f"{name}/attend", _attend_step(
                lambda qq, kk, vv, s=plain: s.attend(qq, kk, vv, mask), q, k, v, g,
                list(plain.parameters())), path=own)}
            path = "off" if fast is None else choose_path(fast, device, config.fast_mode)
            if path not in ("off", own):
                found["fast"] = Variant(f"{name}/fast", _attend_step(
                    lambda qq, kk, vv, s=fast: s.attend(qq, kk, vv, mask), q, k, v, g,
                    list(fast.parameters())), path=path)
            per_scorer[name] = found
            variants += found.values()
        note = (lambda text, label=label: progress(f"{label}: {text}")) if progress else None
        run_interleaved(variants, repeats=config.repeats, warmup=config.warmup, device=device,
                        clock=config.clock, progress=note)
        if note:
            note("peak memory")
        measure_memory(variants, device)
        result.reference[label] = ref
        result.variants[label] = per_scorer
    result.wall_time_s = time.perf_counter() - t0
    result.load_after = load_average()
    result.finished = _utc_now()
    return result


def _ms(seconds: float) -> float:
    """A time in milliseconds to 7 significant digits: a tiny shape's tens of microseconds keep
    the precision the ratios are computed with."""
    return float(f"{seconds * 1e3:.7g}")


def _ratio(x: float | None, base: float | None) -> float | None:
    if x is None or base is None or base <= 0:
        return None
    return x / base


def scorer_rows(result: ScorerBench) -> list[dict]:
    """One row per (scorer, shape): ratios and the paths measured."""
    rows = []
    for label, per_scorer in result.variants.items():
        ref = result.reference[label]
        for name in result.scorers:
            found = per_scorer.get(name)
            if found is None:
                continue
            attend, fast = found["attend"], found.get("fast")
            best = min((x for x in (attend, fast) if x is not None and x.median is not None),
                       key=lambda x: x.median, default=None)
            rows.append({
                "scorer": name, "shape": label,
                "attend_ratio": _ratio(attend.median, ref.median),
                "fast_ratio": _ratio(fast.median, ref.median) if fast else None,
                "best_ratio": _ratio(best.median, ref.median) if best else None,
                "best_ms": best.median * 1e3 if best else None,
                "best_variant": best.key.split("/")[-1] if best else None,
                "mem_ratio": _ratio(best.peak_bytes, ref.peak_bytes) if best else None,
                "mem_mb": best.peak_bytes / 2**20 if best and best.peak_bytes is not None else None,
                "attend_path": attend.path, "fast_path": fast.path if fast else None,
                "errors": {k: x.error for k, x in found.items() if x.error},
            })
    return rows


def _add_metric(metrics: dict, name: str, value) -> None:
    """Record a finite measurement; None and non-finite values are left out."""
    if value is not None and math.isfinite(value):
        metrics[name] = round(float(value), 6)


@dataclass
class Outcome:
    """What a bench measured of one scorer: its metrics, what else a record keeps, and why it
    failed (``error``, None when it did not)."""

    metrics: dict
    extra: dict
    error: str | None = None
    notes: list = field(default_factory=list)


def scorer_metric_names(config: ScorerBenchConfig) -> dict[str, tuple[bool, str]]:
    """Every metric of ``bench_scorers`` under ``config``: name -> (headline, direction)."""
    out = {}
    for shape in config.shapes:
        s = shape_label(shape)
        out.update({f"fwd_bwd_ratio_{s}": (True, "lower"), f"attend_ratio_{s}": (False, "lower"),
                    f"fast_ratio_{s}": (False, "lower"), f"fwd_bwd_ms_{s}": (False, "lower"),
                    f"peak_mem_ratio_{s}": (False, "lower"), f"peak_mem_mb_{s}": (False, "lower")})
        if config.fast_mode == "off":
            del out[f"fast_ratio_{s}"]
    return out


def scorer_outcome(result: ScorerBench, name: str) -> Outcome:
    """The measurements of scorer ``name`` in ``result``."""
    config = result.config
    mine = [r for r in scorer_rows(result) if r["scorer"] == name]
    metrics, notes = {}, []
    for r in mine:
        s = r["shape"]
        for metric, value in ((f"fwd_bwd_ratio_{s}", r["best_ratio"]),
                              (f"attend_ratio_{s}", r["attend_ratio"]),
                              # the mode keeps a scorer it does not cover on its own attend
                              (f"fast_ratio_{s}", r["fast_ratio"] if r["fast_ratio"] is not None
                               or config.fast_mode == "off" else r["attend_ratio"]),
                              (f"fwd_bwd_ms_{s}", r["best_ms"]),
                              (f"peak_mem_ratio_{s}", r["mem_ratio"]),
                              (f"peak_mem_mb_{s}", r["mem_mb"])):
            _add_metric(metrics, metric, value)
        notes += [f"{s} {variant}: {err}" for variant, err in r["errors"].items()]
    error = None
    if name in result.setup_errors:
        error = result.setup_errors[name]
    elif not any(k.startswith("fwd_bwd_ratio_") for k in metrics):
        error = "; ".join(notes) or "no variant could be measured"
    extra = {
        "paths": {r["shape"]: {"attend": r["attend_path"], "fast": r["fast_path"],
                               "best": r["best_variant"]} for r in mine},
        "times_ms": {label: {key: [_ms(t) for t in v.times]
                             for key, v in result.variants[label].get(name, {}).items()}
                     for label in result.variants},
        "reference_ms": {label: [_ms(t) for t in ref.times]
                         for label, ref in result.reference.items()},
        "reference_peak_mb": {label: (ref.peak_bytes / 2**20 if ref.peak_bytes else None)
                              for label, ref in result.reference.items()},
        "reference": "softmax through F.scaled_dot_product_attention, same inputs and mask",
        "statistic": f"median of {config.repeats} interleaved repeats after "
                     f"{config.warmup} warm-up run(s)",
        "clock": config.clock, "memory": MEMORY_METHOD[torch.device(config.device).type],
        "threads": torch.get_num_threads(), "dtype": config.dtype,
        "load_average_before": result.load_before, "load_average_after": result.load_after,
    }
    return Outcome(metrics, extra, error, notes)


# ---------------------------------------------------------------------------------------------
# bench train

@dataclass(frozen=True)
class Backbone:
    """A backbone of tasks/models as the training bench runs it: ``build(scorer, size, device,
    gen)`` -> (model, loss function of no argument, tokens per step); ``bidirectional``: it
    attends both ways (causal-only scorers cannot run it)."""

    build: Callable
    bidirectional: bool = False


def _icl(scorer: str, size: dict, device, gen: torch.Generator):
    from .models.icl import ICLModel, ICLModelConfig

    model = ICLModel(ICLModelConfig(scorer=scorer, **size["model"]), seed=0)
    xs = torch.randn(size["batch"], size["points"], generator=gen).to(device)
    ys = torch.randn(size["batch"], size["points"], generator=gen).to(device)
    return model, lambda: F.mse_loss(model(xs, ys), ys), 2 * size["batch"] * size["points"]


def _decoder(scorer: str, size: dict, device, gen: torch.Generator):
    from .models.decoder import Decoder, DecoderConfig

    model = Decoder(DecoderConfig(scorer=scorer, **size["model"]), seed=0)
    ids = torch.randint(0, model.cfg.vocab_size, (size["batch"], size["length"] + 1),
                        generator=gen).to(device)
    return (model, lambda: model.loss(ids[:, :-1], ids[:, 1:]),
            size["batch"] * size["length"])


def _encoder(scorer: str, size: dict, device, gen: torch.Generator):
    from .models.encoder import Encoder, EncoderConfig

    model = Encoder(EncoderConfig(scorer=scorer, **size["model"]))
    model.init_weights(gen)
    vocab, pad = model.cfg.vocab_size, model.cfg.pad_token_id
    ids = torch.randint(pad + 1, vocab, (size["batch"], size["length"]), generator=gen)
    ids[size["batch"] // 2:, (3 * size["length"]) // 4:] = pad
    ids = ids.to(device)
    targets = ids.clone()

    def loss_fn():
        logits = model.logits(model(ids))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=pad)

    return model, loss_fn, int((ids != pad).sum())


BACKBONES = {"icl": Backbone(_icl), "decoder": Backbone(_decoder),
             "encoder": Backbone(_encoder, bidirectional=True)}


@dataclass
class TrainBenchConfig(Settings):
    """``bench_train``: backbones, their size, timing, the fast-path mode and the device."""

    error = BenchError

    backbones: tuple[str, ...] = setting(default_factory=lambda: tuple(BACKBONES),
                                         choices=tuple(BACKBONES), nonempty=True)
    repeats: int = setting(5, ge=1)
    warmup: int = setting(2, ge=1)
    device: str = "cpu"
    threads: int = setting(0, ge=0)
    clock: str = setting("wall", choices=CLOCKS)
    fast_mode: str = setting("auto", choices=fast_modes)  # as training runs ([run] fast = "auto")
    block_size: int | None = setting(None, ge=1)
    size: str = setting("small", choices=lambda: tuple(TRAIN_SIZES))

    def check(self) -> None:
        _check_device(self.device)


# Model and batch per backbone: "small" runs on 2 CPU cores in seconds per step; "tiny" checks
# that the bench runs (milliseconds per step; the ratios then mostly measure overhead).
TRAIN_SIZES = {
    "tiny": {
        "icl": {"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 16},
                "batch": 4, "points": 8},
        "decoder": {"model": {"vocab_size": 64, "max_len": 32, "n_layer": 1, "dim": 16,
                              "n_head": 2, "n_kv_head": 1, "ffn_dim": 32},
                    "batch": 2, "length": 16},
        "encoder": {"model": {"vocab_size": 64, "max_position_embeddings": 34, "n_layer": 1,
                              "n_head": 2, "n_embd": 16, "ffn_dim": 32, "dropout": 0.0},
                    "batch": 4, "length": 16},
    },
    "small": {
        "icl": {"model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 64},
                "batch": 16, "points": 40},
        "decoder": {"model": {"vocab_size": 512, "max_len": 128, "n_layer": 2, "dim": 64,
                              "n_head": 4, "n_kv_head": 2, "ffn_dim": 256},
                    "batch": 8, "length": 128},
        "encoder": {"model": {"vocab_size": 512, "max_position_embeddings": 130, "n_layer": 2,
                              "n_head": 4, "n_embd": 64, "ffn_dim": 256, "dropout": 0.0},
                    "batch": 16, "length": 64},
    },
    "paper": {
        "icl": {"model": {"n_layer": 12, "n_head": 8, "n_embd": 256, "n_positions": 256},
                "batch": 64, "points": 101},
        "decoder": {"model": {}, "batch": 16, "length": 1024},
        "encoder": {"model": {"dropout": 0.0}, "batch": 16, "length": 128},
    },
}


def _train_step_factory(backbone: str, scorer: str, size: dict, device, fast_mode: str,
                        block_size: int | None) -> tuple[Callable[[], None], int, str]:
    """A closure running one training step of ``backbone`` with ``scorer``, its tokens, and the
    path the scorer runs: "auto" and "off" through ``tasks.training.prepare_model``, as a
    training task runs it; another mode through ``scorers.fast.accelerate`` directly."""
    from scorers.fast import FAST_MODES, accelerate

    from .base import RunContext
    from .training import prepare_model

    if backbone not in BACKBONES:
        raise BenchError(f"unknown backbone {backbone!r}; choose from {list(BACKBONES)}")
    model, loss_fn, tokens = BACKBONES[backbone].build(scorer, size, device,
                                                       torch.Generator().manual_seed(0))
    model.to(device).train()
    if fast_mode in FAST_MODES:
        paths = prepare_model(model, RunContext(device=torch.device(device), fast=fast_mode))
    else:
        paths = accelerate(model, fast_mode, block_size=block_size)
    path = ",".join(sorted(set(paths.values()))) or "none"
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()

    return step, tokens, path


@dataclass
class TrainBench:
    config: TrainBenchConfig
    scorers: list[str]
    variants: dict[str, dict[str, Variant]] = field(default_factory=dict)  # backbone -> scorer
    tokens: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, dict[str, str]] = field(default_factory=dict)       # backbone -> scorer
    paths: dict[str, dict[str, str]] = field(default_factory=dict)         # scorer -> backbone
    load_before: list[float] | None = None
    load_after: list[float] | None = None
    started: str = ""
    finished: str = ""
    wall_time_s: float = 0.0


def bench_train(names: list[str], config: TrainBenchConfig,
                progress: Callable[[str], None] | None = None) -> TrainBench:
    """Training-step time of each backbone per scorer; softmax is always measured too."""
    import scorers

    config.check()
    if config.threads:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    names = list(dict.fromkeys(["softmax", *names]))
    result = TrainBench(config, names, load_before=load_average(), started=_utc_now())
    t0 = time.perf_counter()
    for backbone in config.backbones:
        size = TRAIN_SIZES[config.size][backbone]
        found, skipped = {}, {}
        for name in names:
            if BACKBONES[backbone].bidirectional and scorers.get_scorer_class(name).causal_only:
                skipped[name] = "causal-only scorer; the encoder attends both ways"
                continue
            try:
                step, tokens, path = _train_step_factory(backbone, name, size, device,
                                                         config.fast_mode, config.block_size)
            except Exception as e:  # noqa: BLE001 - reported in the scorer's record
                skipped[name] = f"{type(e).__name__}: {e}"
                continue
            found[name] = Variant(f"{backbone}/{name}", step, path=path)
            result.paths.setdefault(name, {})[backbone] = path
            result.tokens[backbone] = tokens
        note = (lambda text, b=backbone: progress(f"{b}: {text}")) if progress else None
        run_interleaved(list(found.values()), repeats=config.repeats, warmup=config.warmup,
                        device=device, clock=config.clock, progress=note)
        result.variants[backbone] = found
        result.skipped[backbone] = skipped
    result.wall_time_s = time.perf_counter() - t0
    result.load_after = load_average()
    result.finished = _utc_now()
    return result


def train_rows(result: TrainBench) -> list[dict]:
    rows = []
    for backbone, found in result.variants.items():
        base = found.get("softmax")
        for name in result.scorers:
            v = found.get(name)
            med = v.median if v is not None else None
            rows.append({
                "scorer": name, "backbone": backbone,
                "step_ratio": _ratio(med, base.median if base else None),
                "step_ms": med * 1e3 if med else None,
                "tokens_per_s": result.tokens.get(backbone, 0) / med if med else None,
                "error": (v.error if v is not None else result.skipped[backbone].get(name)),
            })
    return rows


def train_metric_names(config: TrainBenchConfig) -> dict[str, tuple[bool, str]]:
    """Every metric of ``bench_train`` under ``config``: name -> (headline, direction)."""
    out = {}
    for bb in config.backbones:
        out.update({f"step_ratio_{bb}": (True, "lower"), f"step_ms_{bb}": (False, "lower"),
                    f"tokens_per_s_{bb}": (False, "higher")})
    return out


def train_outcome(result: TrainBench, name: str) -> Outcome:
    """The measurements of scorer ``name`` in ``result`` (softmax measured beside it)."""
    config = result.config
    mine = [r for r in train_rows(result) if r["scorer"] == name]
    metrics, notes = {}, []
    for r in mine:
        bb = r["backbone"]
        _add_metric(metrics, f"step_ratio_{bb}", r["step_ratio"])
        _add_metric(metrics, f"step_ms_{bb}", r["step_ms"])
        _add_metric(metrics, f"tokens_per_s_{bb}", r["tokens_per_s"])
        if r["error"]:
            notes.append(f"{bb}: {r['error']}")
    error = None
    if not any(k.startswith("step_ratio_") for k in metrics):
        error = "; ".join(notes) or "no backbone could be measured"
    extra = {
        "times_ms": {bb: [_ms(t) for t in found[name].times]
                     for bb, found in result.variants.items() if name in found},
        "softmax_times_ms": {bb: [_ms(t) for t in found["softmax"].times]
                             for bb, found in result.variants.items() if "softmax" in found},
        "paths": result.paths.get(name, {}),
        "tokens_per_step": result.tokens,
        "sizes": {b: TRAIN_SIZES[config.size][b] for b in config.backbones},
        "statistic": f"median of {config.repeats} interleaved steps after {config.warmup} "
                     f"warm-up step(s)",
        "clock": config.clock, "fast_mode": config.fast_mode,
        "threads": torch.get_num_threads(),
        "load_average_before": result.load_before, "load_average_after": result.load_after,
    }
    return Outcome(metrics, extra, error, notes)
