"""``icl_mqar``: multi-query associative recall (Zoology, Arora et al. 2023, arXiv 2312.04927).

Data (the task of HazyResearch/zoology's ``multiquery_ar``; our generator): vocabulary
``V``, keys from ``1 .. V/2 - 1``, values from ``V/2 .. V - 1`` (disjoint halves). A sequence of
length ``L`` with ``n`` pairs is

    k_1 v_1 k_2 v_2 ... k_n v_n | x x k_a x x x k_b ...      (query region, L - 2n tokens)

with the n keys (and the n values) distinct within a sequence. Every key is queried once: its
query sits at an even offset ``2 g`` of the query region, the gaps ``g`` drawn without
replacement from ``{0, .., (L - 2n)/2 - 1}`` with

    P(g) ∝ (g + 1)^(power_a - 1)                         (power_a -> 0: queries near the pairs)

and every other token of the query region is uniform over the whole vocabulary. The label of
a query position is the queried key's value; every other position is ``IGNORE`` (no loss, no
accuracy). A prediction is the argmax over the vocabulary at the query token.

Model: the decoder backbone (tasks/models/decoder.py: token embedding, RoPE, pre-norm blocks,
tied read-out) at ``n_layer`` x ``n_embd``, built for ``n_positions`` tokens (the longest
evaluated length, so every scorer's length constants are the same at every grid cell),
trained from scratch at ``train_len`` with the ICL training loop (Adam, constant learning rate,
fresh batches; every batch draws its pair count from ``train_pairs``); cross-entropy at the
query positions only.

Validation (the tuning protocol's metric and the learning curve; tasks/validation.py):
``val_accuracy``, the query accuracy at L = ``train_len`` over fresh sequences of every training
pair count, drawn from the stream (cell seed, "icl_mqar", "validation", n), which the reported
evaluation never draws from. Sweep cells (``RunContext.sweep``) skip the reported evaluation.

Evaluation: accuracy per ``eval_pairs`` x ``eval_lengths`` cell (cells with 4 n > L are left
empty), ``eval_sequences`` sequences per cell from a stream seeded by (cell seed, n, L), the
same for every scorer. In distribution = L = ``train_len`` and n in ``train_pairs``; longest =
L = max(``eval_lengths``). Per-item outcomes are per-sequence accuracies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from .base import Metric, RunContext, Task, TaskResult
from .config import ConfigError, setting
from .icl_training import (
    VALIDATION_SEQUENCES,
    ICLTaskConfig,
    ValidationData,
    grid,
    mean_of,
    save_checkpoint,
    evaluated,
    stopping_of,
    train,
)
from .models.decoder import Decoder, DecoderConfig
from .resume import resume_path
from .registry import TaskError, register_task
from .training import (derive_seed, generator, prepare_model, scorer_parameter_values,
                       training_dtype)
from .validation import Validation

IGNORE = -100


def power_law(space: int, power_a: float) -> torch.Tensor:
    """P(g) ∝ (g + 1)^(power_a - 1) for g = 0 .. space - 1 (float64, sums to 1)."""
    p = torch.arange(1, space + 1, dtype=torch.float64) ** (power_a - 1)
    return p / p.sum()


def sample_mqar(gen: torch.Generator, batch: int, length: int, num_pairs: int, vocab_size: int,
                power_a: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels), each (batch, length) int64; labels are ``IGNORE`` off the queries."""
    check_shape(length, num_pairs, vocab_size)
    half = vocab_size // 2
    keys = 1 + torch.rand(batch, half - 1, generator=gen).argsort(dim=1)[:, :num_pairs]
    values = half + torch.rand(batch, vocab_size - half, generator=gen).argsort(dim=1)[:, :num_pairs]
    context = 2 * num_pairs
    space = (length - context) // 2
    gaps = torch.multinomial(power_law(space, power_a).float().expand(batch, space), num_pairs,
                             replacement=False, generator=gen)
    inputs = torch.randint(vocab_size, (batch, length), generator=gen)
    inputs[:, 0:context:2] = keys
    inputs[:, 1:context:2] = values
    where = context + 2 * gaps
    inputs.scatter_(1, where, keys)
    labels = torch.full((batch, length), IGNORE, dtype=torch.int64)
    labels.scatter_(1, where, values)
    return inputs, labels


def distractor_rate(inputs: torch.Tensor, labels: torch.Tensor, num_pairs: int) -> float:
    """The fraction of queries whose key also stands in the filler between the context and the
    query: a token the model must not bind to the key's value (its share grows as the vocabulary
    shrinks towards the sequence length)."""
    context = 2 * num_pairs
    hits = total = 0
    for row, label in zip(inputs, labels):
        for where in (label != IGNORE).nonzero().flatten().tolist():
            total += 1
            hits += bool((row[context:where] == row[where]).any())
    return hits / total if total else 0.0


def check_shape(length: int, num_pairs: int, vocab_size: int) -> None:
    if num_pairs < 1 or 4 * num_pairs > length:
        raise TaskError(f"icl_mqar: {num_pairs} pairs do not fit a sequence of {length} tokens "
                        f"(needs 1 <= 4 x pairs <= length)")
    if vocab_size // 2 - 1 < num_pairs:
        raise TaskError(f"icl_mqar: vocab_size={vocab_size} has {vocab_size // 2 - 1} keys, fewer "
                        f"than {num_pairs} pairs; raise vocab_size")


def fits(length: int, num_pairs: int) -> bool:
    return 4 * num_pairs <= length


def query_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the query positions."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)


@dataclass
class MQARConfig(ICLTaskConfig):
    """The ICL fields (``n_positions`` = the longest evaluated length; the curriculum is unused)
    and the MQAR data and grid."""

    n_layer: int = setting(2, ge=1)
    n_head: int = setting(2, ge=1)
    n_embd: int = setting(256, ge=1)
    n_positions: int = setting(512, ge=1)
    train_steps: int = setting(20_000, ge=1, role="steps")
    lr: float = setting(1e-3, gt=0, tunable=True, role="rate")
    vocab_size: int = setting(8192, ge=1)
    train_len: int = setting(128, ge=1)
    train_pairs: tuple[int, ...] = setting((4, 8, 16, 32), ge=1, nonempty=True)
    power_a: float = setting(0.01, gt=0)
    eval_lengths: tuple[int, ...] = setting((128, 256, 512), ge=1, nonempty=True)
    eval_pairs: tuple[int, ...] = setting((4, 8, 16, 32, 64), ge=1, nonempty=True)
    eval_sequences: int = setting(256, ge=1)
    rotary_fraction: float = setting(1.0, ge=0, le=1)
    rope_base: float = setting(10000.0, gt=0)

    validation_range: ClassVar[tuple[float, float]] = (0.0, 1.0)   # an accuracy

    def __post_init__(self):
        self.curriculum_start = self.curriculum_end = min(self.train_len, self.n_positions)
        super().__post_init__()

    def check(self) -> None:
        super().check()
        if not self.mlp:
            raise ConfigError("icl_mqar: the decoder backbone always has an MLP; set mlp = true",
                              "mlp")
        for n in self.train_pairs:
            check_shape(self.train_len, n, self.vocab_size)
        if self.train_len not in self.eval_lengths:
            raise ConfigError(f"icl_mqar: eval_lengths {self.eval_lengths} must contain train_len="
                              f"{self.train_len} (the in-distribution column)", "eval_lengths")
        if not any(n in self.eval_pairs for n in self.train_pairs):
            raise ConfigError(f"icl_mqar: eval_pairs {self.eval_pairs} must contain one of "
                              f"train_pairs {self.train_pairs} (the in-distribution cells)",
                              "eval_pairs")
        for n in self.eval_pairs:
            if not any(fits(t, n) for t in self.eval_lengths):
                raise ConfigError(f"icl_mqar: {n} pairs fit none of eval_lengths "
                                  f"{self.eval_lengths}", "eval_pairs")
            check_shape(max(self.eval_lengths), n, self.vocab_size)
        self.check_points("eval_lengths", self.eval_lengths)

    def model_config(self, scorer: str, scorer_kwargs: dict) -> DecoderConfig:
        return DecoderConfig(vocab_size=self.vocab_size, max_len=self.n_positions,
                             n_layer=self.n_layer, dim=self.n_embd, n_head=self.n_head,
                             n_kv_head=self.n_head, ffn_dim=4 * self.n_embd,
                             rotary_fraction=self.rotary_fraction, rope_base=self.rope_base,
                             init_std=0.02,
                             scorer=scorer, scorer_kwargs=dict(scorer_kwargs))


class TokenModel(nn.Module):
    """The decoder under the ICL training loop's ``model(inputs, labels)`` call."""

    def __init__(self, decoder: Decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(inputs)

    def scorer_modules(self):
        return [block.attn.scorer for block in self.decoder.blocks]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(cfg: MQARConfig, scorer: str, scorer_kwargs: dict, seed: int,
                device: torch.device, ctx: RunContext | None = None) -> TokenModel:
    """The backbone for ``scorer`` on its fast path (``ctx.fast``); shared parameters depend only
    on ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "scorer-construction"))
        decoder = Decoder(cfg.model_config(scorer, scorer_kwargs), seed=derive_seed(seed, "init"))
    model = TokenModel(decoder).to(device)
    if ctx is not None:
        prepare_model(model, ctx)
    return model


def validation_data(cfg: MQARConfig, seed: int) -> ValidationData:
    """Fresh in-distribution sequences: every training pair count at ``train_len``, about
    ``VALIDATION_SEQUENCES`` in all, from their own stream."""
    per_pairs = -(-VALIDATION_SEQUENCES // len(cfg.train_pairs))
    draws = [sample_mqar(generator(seed, "icl_mqar", "validation", n), per_pairs, cfg.train_len,
                         n, cfg.vocab_size, cfg.power_a) for n in cfg.train_pairs]
    return ValidationData(torch.cat([d[0] for d in draws]), torch.cat([d[1] for d in draws]),
                          lambda model, xs, ys: sequence_accuracy(model, xs, ys,
                                                                  cfg.eval_batch_tokens))


def training_sampler(cfg: MQARConfig):
    pairs = torch.tensor(cfg.train_pairs)

    def sample(gen: torch.Generator, batch: int, length: int):
        n = int(pairs[torch.randint(len(pairs), (1,), generator=gen)])
        return sample_mqar(gen, batch, length, n, cfg.vocab_size, cfg.power_a)

    return sample


@torch.no_grad()
def sequence_accuracy(model: TokenModel, inputs: torch.Tensor, labels: torch.Tensor,
                      batch_tokens: int) -> torch.Tensor:
    """(B,) share of each sequence's queries whose argmax prediction is the value."""
    device = next(model.parameters()).device
    chunk = max(1, batch_tokens // inputs.shape[1])
    out = []
    for i in range(0, len(inputs), chunk):
        logits = model(inputs[i:i + chunk].to(device)).float().cpu()
        lab = labels[i:i + chunk]
        query = lab != IGNORE
        correct = (logits.argmax(-1) == lab) & query
        out.append(correct.sum(1).double() / query.sum(1).double())
    return torch.cat(out)


METRICS = {
    "accuracy_id": Metric("higher", True, "query accuracy in distribution (L = train_len, pairs in "
                                          "train_pairs), mean over those grid cells; floor: guessing "
                                          "one of the context's values (mean 1/pairs)",
                          floor=0.0, ceiling=1.0, min_effect=0.01),
    "accuracy_longest": Metric("higher", True, "query accuracy at the longest evaluated length "
                                               "(every pair count that fits), mean over cells; floor: "
                                               "mean 1/pairs", floor=0.0, ceiling=1.0,
                               min_effect=0.01),
    "accuracy_more_pairs": Metric("higher", False, "query accuracy at L = train_len with more pairs "
                                                   "than trained"),
    "accuracy_longer": Metric("higher", False, "query accuracy at L > train_len, mean over cells"),
    "accuracy_all": Metric("higher", False, "query accuracy, mean over every grid cell"),
}


@register_task("icl_mqar")
class ICLMQAR(Task):
    """Multi-query associative recall; accuracy over pairs x length, beyond training (Zoology)."""

    version = 3
    track = "icl"
    supports_accumulation = True
    Config = MQARConfig
    metrics = METRICS
    validation = Validation("val_accuracy", "higher", "query accuracy at L = train_len on fresh "
                            "sequences of every training pair count (validation stream)")

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config: MQARConfig,
            ctx: RunContext) -> TaskResult:
        cfg = config
        total = cfg.train_steps + 1
        model = build_model(cfg, scorer, scorer_kwargs, seed, ctx.device, ctx)
        val = validation_data(cfg, seed)
        log = train(model, cfg, training_sampler(cfg), query_loss,
                    generator(seed, "icl_mqar", "train"), ctx, progress_total=total,
                    validation=val, direction=self.validation.direction,
                    resume=resume_path(ctx.workdir, "icl_mqar"))
        grids: dict = {}
        items, chance = ({}, {}) if not evaluated(cfg, ctx) else evaluate(model, cfg, seed, grids)
        metrics = {k: mean_of(v) for k, v in items.items()}
        extra = {
            "eval_sequences": cfg.eval_sequences, "dtype": training_dtype(cfg.precision == "bf16"),
            "eval_dtype": "float32", "ignore_label": IGNORE,
            "validation": self.validation.block(log.validation, len(val.xs), log.curve),
            "anchors": {k: {"floor": chance[k], "ceiling": 1.0}
                        for k in ("accuracy_id", "accuracy_longest") if k in chance},
            "train": {"steps": log.steps, "length": cfg.train_len, "pairs": list(cfg.train_pairs),
                      "first_loss": log.first_loss, "last_loss": log.last_loss,
                      "loss_curve": log.loss_curve, "parameters": model.num_parameters(),
                      **stopping_of(log)},
            "scorer_parameters": scorer_parameter_values(model),
        }
        checkpoint = save_checkpoint(model, ctx, "icl_mqar")
        if checkpoint:
            extra["checkpoint"] = checkpoint
        ctx.report(total, total)
        return TaskResult(metrics=metrics, grids=grids, items=items, extra=extra, step=log.steps)


def evaluate(model: TokenModel, cfg: MQARConfig, seed: int,
             grids: dict) -> tuple[dict[str, list], dict[str, float]]:
    """Fill the accuracy grid (pairs x length); return per-sequence items of each metric and the
    chance accuracy (mean 1/pairs over the metric's cells) of the headline metrics."""
    longest = max(cfg.eval_lengths)
    items = {k: [] for k in METRICS}
    floors = {"accuracy_id": [], "accuracy_longest": []}
    values, distractors = [], []
    for n in cfg.eval_pairs:
        row, rates = [], []
        for t in cfg.eval_lengths:
            if not fits(t, n):
                row.append(None)
                rates.append(float("nan"))
                continue
            inputs, labels = sample_mqar(generator(seed, "icl_mqar", "eval", n, t),
                                         cfg.eval_sequences, t, n, cfg.vocab_size, cfg.power_a)
            acc = sequence_accuracy(model, inputs, labels, cfg.eval_batch_tokens).tolist()
            row.append(sum(acc) / len(acc))
            rates.append(distractor_rate(inputs, labels, n))
            items["accuracy_all"] += acc
            if t == cfg.train_len and n in cfg.train_pairs:
                items["accuracy_id"] += acc
                floors["accuracy_id"].append(1 / n)
            if t == cfg.train_len and n > max(cfg.train_pairs):
                items["accuracy_more_pairs"] += acc
            if t > cfg.train_len:
                items["accuracy_longer"] += acc
            if t == longest:
                items["accuracy_longest"] += acc
                floors["accuracy_longest"].append(1 / n)
        values.append(row)
        distractors.append(rates)
    grids["accuracy"] = grid("pairs", cfg.eval_pairs, "length", cfg.eval_lengths,
                             [[float("nan") if v is None else v for v in row] for row in values])
    grids["distractor_rate"] = grid("pairs", cfg.eval_pairs, "length", cfg.eval_lengths,
                                    distractors)
    return ({k: v for k, v in items.items() if v},
            {k: sum(v) / len(v) for k, v in floors.items() if v})
