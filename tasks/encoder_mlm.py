"""``encoder_mlm``: BabyBERTa trained on AO-CHILDES by masked language modelling, probed with Zorro.

One cell: build the RoBERTa-style encoder with the cell's scorer, train it on the AO-CHILDES
sentences by the cell's MLM objective (data and objectives: ``tasks.data.mlm_data``), then evaluate
(``tasks.lmeval.mlm``):

- Zorro, 23 paradigms, holistic scoring. Metrics ``zorro.<paradigm>`` (% correct) and
  ``zorro_overall`` (mean of the 23); per-pair outcomes (100 correct / 0 wrong) in ``items``.
- ``val_mlm_loss``: the MLM loss on the held-out AO-CHILDES sentences (all but the last
  ``VALIDATION_SENTENCES``, the validation metric's; the first ``val_sentences``), masked once with a fixed
  seed (the same corruption for every cell), mean cross-entropy over the corrupted positions.

Validation (tasks/validation.py): ``val_mlm_loss_tuning``, the same MLM loss on the last
``VALIDATION_SENTENCES`` held-out sentences (which the reported ``val_mlm_loss`` leaves out); the
learning curve uses every 4th. Sweep cells skip Zorro and the reported validation loss.

The loss is the cross-entropy on the selected positions. Every batch holds ``batch_size``
sentences: the last, partial batch of a pass is completed from the next pass. Optimizer: BabyBERTa's
AdamW without bias correction (``bias_correction``). Seeds: the data order, the masks and the
shared initial weights come from streams derived from the cell seed only, so every scorer at a
seed sees the same batches and starts from the same backbone.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from .base import Metric, RunContext, Task, TaskResult
from .config import ConfigError, TaskConfig, setting
from .data import zorro
from .data.mlm_data import ORDERS, OBJECTIVES, PAD_ID, EncoderData, corrupt, load_data, pad_batch
from .data.mlm_data import training_items
from .lmeval.mlm import VALIDATION_SENTENCES, masked_validation, validation_loss, zorro_scores
from .validation import Curve, Validation
from .models.encoder import Encoder, EncoderConfig
from .registry import TaskError, register_task
from .training import (AdamW, Divergence, accumulated_backward, autocast, derive_seed,
                       prepare_model, scorer_parameter_values, training_dtype)


@dataclass
class EncoderMLMConfig(TaskConfig):
    """Defaults: BabyBERTa (phueb/BabyBERTa ``params.py``) on the staged AO-CHILDES; docs/tasks.md#encoder_mlm."""

    # model
    n_layer: int = setting(8, ge=1)
    n_head: int = setting(8, ge=1)
    n_embd: int = setting(256, ge=1)
    ffn_dim: int = setting(1024, ge=1)
    max_position_embeddings: int = setting(130, ge=2 + PAD_ID + 2)   # room for <s> x </s>
    dropout: float = setting(0.1, ge=0, lt=1)
    layer_norm_eps: float = setting(1e-5, gt=0)
    init_std: float = setting(0.02, gt=0)
    # data and objective: "age_ordered" keeps sentences in corpus order, copies together
    order: str = setting("shuffled", choices=ORDERS)
    objective: str = setting("babyberta", choices=OBJECTIVES)
    mask_probability: float = setting(0.15, gt=0, lt=1)
    mask_copies: int = setting(10, ge=1)
    # training: AdamW, linear warm-up then linear decay to 0 at the last step, clipping.
    # bias_correction = false is BabyBERTa's transformers.AdamW(correct_bias=False): the moments'
    # 1/(1 - beta^t) corrections are left out (tasks.training.AdamW); true gives torch's AdamW.
    bias_correction: bool = False
    batch_size: int = setting(16, ge=1)
    lr: float = setting(1e-4, gt=0, tunable=True, role="rate")
    weight_decay: float = setting(0.0, ge=0, tunable=True)
    adam_beta1: float = setting(0.9, ge=0, lt=1)
    adam_beta2: float = setting(0.999, ge=0, lt=1)
    adam_eps: float = setting(1e-6, gt=0)
    warmup_steps: int = setting(24_000, ge=0)
    max_steps: int = setting(0, ge=0, role="steps")  # 0: one pass over the masked copies
    grad_clip: float = setting(1.0, ge=0)
    diverge_factor: float = setting(2.0, ge=0)       # diverged: smoothed loss > factor * ln(V)
    # evaluation
    zorro_pairs: int = setting(2000, ge=1, le=zorro.PAIRS_PER_PARADIGM)  # the first n per paradigm
    val_sentences: int = setting(0, ge=0)            # the first n held-out sentences (never the
                                                     # last VALIDATION_SENTENCES, the validation
                                                     # metric's); 0: all
    val_mask_seed: int = 0
    eval_batch_size: int = setting(256, ge=1)
    log_every: int = setting(100, ge=1)
    # validation evaluations evenly spaced to the last step, beside the curve's log-spaced ones
    dense_curve_points: int = setting(0, ge=0, off_at_default=True)

    def check(self) -> None:
        if self.n_embd % self.n_head:
            raise ConfigError(f"encoder_mlm: n_embd={self.n_embd} must be a multiple of "
                              f"n_head={self.n_head}")

    def model_config(self, scorer: str, scorer_kwargs: dict, vocab_size: int) -> EncoderConfig:
        return EncoderConfig(vocab_size=vocab_size, max_position_embeddings=self.max_position_embeddings,
                             n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd,
                             ffn_dim=self.ffn_dim, dropout=self.dropout,
                             layer_norm_eps=self.layer_norm_eps, init_std=self.init_std,
                             pad_token_id=PAD_ID, scorer=scorer, scorer_kwargs=dict(scorer_kwargs))


def linear_warmup_decay(warmup: int, total: int):
    """HF ``get_linear_schedule_with_warmup``: lr factor step/warmup, then linear down to 0."""
    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return factor


def build_model(cfg: EncoderMLMConfig, scorer: str, scorer_kwargs: dict, seed: int,
                vocab_size: int, device: torch.device) -> Encoder:
    """The encoder for ``scorer``; the shared parameters depend only on ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "scorer-construction"))
        model = Encoder(cfg.model_config(scorer, scorer_kwargs, vocab_size))
    model.init_weights(torch.Generator().manual_seed(derive_seed(seed, "init")))
    return model.to(device)


def optimizer(model: Encoder, cfg: EncoderMLMConfig) -> torch.optim.Optimizer:
    """AdamW as the config says: without bias correction (BabyBERTa) or torch's own."""
    kwargs = dict(lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                  weight_decay=cfg.weight_decay)
    if cfg.bias_correction:
        return torch.optim.AdamW(model.parameters(), foreach=True, **kwargs)
    return AdamW(model.parameters(), **kwargs)


CURVE_STRIDE = 4


def validation_value(model: Encoder, masked: tuple, cfg: EncoderMLMConfig,
                     device: torch.device) -> float:
    """The MLM loss on ``masked``, in eval mode, leaving the model's mode and the global random
    state (dropout) as they were."""
    was_training = model.training
    try:
        with torch.random.fork_rng(devices=[]):
            return validation_loss(model, masked, cfg.eval_batch_size, device)[0]
    finally:
        model.train(was_training)


def train(model: Encoder, data: EncoderData, cfg: EncoderMLMConfig, seed: int,
          ctx: RunContext, total_units: int, validation: tuple = ()) -> dict:
    """AdamW with warm-up and linear decay; raises TrainingFailure by the rule of
    :class:`tasks.training.Divergence` (reference ln V). With ``validation`` (masked sentences),
    the learning curve on every ``CURVE_STRIDE``-th of them."""
    device = ctx.device
    item_rng = np.random.default_rng(derive_seed(seed, "order"))
    mask_rng = np.random.default_rng(derive_seed(seed, "mask"))
    per_pass = math.ceil(len(data.train) * cfg.mask_copies / cfg.batch_size)
    steps = cfg.max_steps or per_pass
    opt = optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup_decay(cfg.warmup_steps, steps))
    rule = Divergence(cfg.diverge_factor, math.log(data.vocab_size),
                      context=f"lr={cfg.lr:g}, objective={cfg.objective}")
    torch.manual_seed(derive_seed(seed, "dropout"))
    curve, window, items, cursor = [], [], np.zeros(0, dtype=np.int64), 0
    passes = 0
    subset = validation[::CURVE_STRIDE]
    val_curve = Curve(steps, len(subset), even=cfg.dense_curve_points) if validation else None
    model.train()
    for step in range(1, steps + 1):
        if cursor + cfg.batch_size > len(items):
            items = np.concatenate([items[cursor:], training_items(
                len(data.train), cfg.mask_copies, cfg.order, item_rng)])
            cursor, passes = 0, passes + 1
        batch = [data.train[i] for i in items[cursor:cursor + cfg.batch_size]]
        cursor += cfg.batch_size
        ids, valid = pad_batch(batch)
        inputs, selected = corrupt(ids, valid, cfg.objective, mask_rng, data.vocab_size,
                                   cfg.mask_probability)
        sel = torch.from_numpy(selected).to(device)
        inputs, valid = torch.from_numpy(inputs).to(device), torch.from_numpy(valid).to(device)
        targets, n_selected = torch.from_numpy(ids).to(device), int(selected.sum())
        opt.zero_grad(set_to_none=True)

        def part_loss(part, inputs=inputs, valid=valid, sel=sel, targets=targets,
                      n_selected=n_selected):
            with autocast(device, device.type == "cuda"):
                hidden = model(inputs[part], valid[part])
                logits = model.logits(hidden[sel[part]])
            # a sum over this micro-batch's selected tokens / all selected: the batch mean
            return F.cross_entropy(logits.float(), targets[part][sel[part]],
                                   reduction="sum") / n_selected

        value = float(accumulated_backward(len(batch), ctx.accumulation, part_loss))
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or float("inf")))
        rule.check(step - 1, value, norm)
        opt.step()
        sched.step()
        if val_curve is not None:
            val_curve.maybe(step, lambda: validation_value(model, subset, cfg, device))
        window.append(value)
        if step % cfg.log_every == 0 or step == steps:
            curve.append([step, float(np.mean(window))])
            window = []
        ctx.report(step, total_units)
    return {"steps": steps, "steps_per_pass": per_pass, "passes_started": passes,
            "loss_curve": curve, "final_train_loss": curve[-1][1] if curve else None,
            "validation_curve": val_curve}


# ----------------------------------------------------------------------------------------- task

def _metrics() -> dict[str, Metric]:
    out = {"zorro_overall": Metric("higher", True, "Zorro accuracy (%), mean over the 23 paradigms; "
                                   "holistic scoring, ties wrong", floor=50.0, ceiling=100.0),
           "val_mlm_loss": Metric("lower", False, "MLM cross-entropy on held-out AO-CHILDES "
                                  "(fixed masking seed), per corrupted token")}
    for p in zorro.paradigms():
        out[f"zorro.{p}"] = Metric("higher", False, f"Zorro {p}: % pairs where the grammatical "
                                   f"sentence has the lower mean token CE")
    return out


@register_task("encoder_mlm")
class EncoderMLM(Task):
    """BabyBERTa on AO-CHILDES (masked LM), probed with Zorro; docs/tasks.md#encoder_mlm."""

    version = 2  # 2: AdamW without bias correction, the one divergence rule, "don't cha" merged
    track = "encoder"
    supports_accumulation = True
    Config = EncoderMLMConfig
    metrics = _metrics()
    validation = Validation("val_mlm_loss_tuning", "lower", "MLM cross-entropy on the last "
                            f"{VALIDATION_SENTENCES} held-out AO-CHILDES sentences (not reported)")

    def skip_reason(self, scorer: str) -> str | None:
        from scorers import get_scorer_class

        if get_scorer_class(scorer).causal_only:
            return (f"scorer {scorer!r} is causal-only; the encoder attends bidirectionally "
                    f"(padding mask only)")
        return None

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config: EncoderMLMConfig,
            ctx: RunContext) -> TaskResult:
        cfg = config
        device = ctx.device
        t0, c0 = time.perf_counter(), time.process_time()
        data = load_data()
        if data.info["tokens"]["train_max_len"] > cfg.max_position_embeddings - PAD_ID - 1:
            raise TaskError(f"encoder_mlm: training sentences reach {data.info['tokens']['train_max_len']} "
                            f"tokens; raise max_position_embeddings to at least "
                            f"{data.info['tokens']['train_max_len'] + PAD_ID + 1}")
        model = build_model(cfg, scorer, scorer_kwargs, seed, data.vocab_size, device)
        prepare_model(model, ctx)
        steps = cfg.max_steps or math.ceil(len(data.train) * cfg.mask_copies / cfg.batch_size)
        total_units = steps + len(zorro.paradigms()) + 1
        t_data, c_data = time.perf_counter(), time.process_time()
        tuning_val = masked_validation(cfg.objective, cfg.mask_probability, cfg.val_mask_seed, 0,
                                       data.vocab_size, "validation")
        log = train(model, data, cfg, seed, ctx, total_units, tuning_val)
        t_train, c_train = time.perf_counter(), time.process_time()
        validation = self.validation.block(validation_value(model, tuning_val, cfg, device),
                                           len(tuning_val), log.pop("validation_curve"))
        if ctx.sweep:
            ctx.report(total_units, total_units)
            return TaskResult(metrics={}, extra={"train": log, "validation": validation,
                                                 "scorer_parameters": scorer_parameter_values(model),
                                                 "cpu_time_s": {"train": round(c_train - c_data, 2)}},
                              step=log["steps"])

        metrics, items, ties = zorro_scores(
            model, data.zorro, cfg.zorro_pairs, device, cfg.eval_batch_size,
            report=lambda k: ctx.report(steps + k, total_units))
        t_zorro, c_zorro = time.perf_counter(), time.process_time()

        val = masked_validation(cfg.objective, cfg.mask_probability, cfg.val_mask_seed,
                                cfg.val_sentences, data.vocab_size)
        metrics["val_mlm_loss"], val_tokens = validation_loss(model, val, cfg.eval_batch_size, device)
        ctx.report(total_units, total_units)
        t_val, c_val = time.perf_counter(), time.process_time()

        extra = {
            "dtype": training_dtype(device.type == "cuda"),
            "parameters": model.num_parameters(),
            "parameters_backbone": model.num_parameters(include_scorers=False),
            "train": log,
            "validation": validation,
            "zorro_pairs_per_paradigm": cfg.zorro_pairs,
            "zorro_ties": ties,
            "zorro_ties_total": int(sum(ties.values())),
            "val_sentences": len(val),
            "val_masked_tokens": val_tokens,
            "data": data.info,
            "scorer_parameters": scorer_parameter_values(model),
            "timing_s": {"data_and_model": round(t_data - t0, 2), "train": round(t_train - t_data, 2),
                         "zorro": round(t_zorro - t_train, 2), "validation": round(t_val - t_zorro, 2)},
            "cpu_time_s": {"data_and_model": round(c_data - c0, 2), "train": round(c_train - c_data, 2),
                           "zorro": round(c_zorro - c_train, 2), "validation": round(c_val - c_zorro, 2)},
            "threads": torch.get_num_threads(),
        }
        return TaskResult(metrics=metrics, items=items, extra=extra, step=log["steps"])
