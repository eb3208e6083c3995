"""``decoder_lm``: train a Nemotron-style decoder from scratch, then perplexity and zero-shot.

One cell = one scorer x one seed: tokenizer (byte-level BPE on the training split, cached),
training (AdamW, linear warm-up + cosine decay, gradient clipping, bf16 autocast on CUDA),
a safetensors checkpoint in the cell's workdir, then one evaluation path for every scorer:

- perplexity (``rolling`` protocol by default, ``windows`` for paper parity) on the held-out
  documents of the training corpus and on Wikipedia, WikiText-2 test and C4;
- length generalization: held-out perplexity (rolling) in windows of m x ``max_len`` tokens for
  m in ``context_multiples``, the same tokens at every m (``heldout_perplexity_<m>x``;
  ``heldout_perplexity_1x`` equals ``heldout_perplexity`` under the rolling protocol), anchored
  at the held-out unigram perplexity;
- arc_easy, arc_challenge, boolq, piqa, hellaswag, winogrande, lambada_openai scored as
  lm-evaluation-harness 0.4 does, ``n_shot``-shot, per-item outcomes in ``items``; a benchmark
  metric at or below the best constant-answer accuracy on the same items is flagged in
  ``extra["below_baseline"]``.

Validation (tasks/validation.py): ``val_loss``, the mean next-token cross-entropy on the corpus's
validation split (documents neither trained on nor in the reported held-out test split), its first
``VALIDATION_TOKENS`` tokens cut into windows of ``max_len`` + 1; the learning curve uses every 4th
window. Sweep cells skip the reported evaluation.

A workdir that already holds the checkpoint of the same training configuration is evaluated
without retraining.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .base import Metric, RunContext, Task, TaskResult
from .config import TaskConfig, setting
from .validation import Curve, Validation
from .data import corpora, fineweb
from .data.bpe import TextTokenizer
from .data.lm_data import TokenizedDocuments, eval_documents, training_data
from .lmeval.benchmarks import BENCHMARKS
from .lmeval.perplexity import PROTOCOLS, context_perplexities, perplexity, unigram_perplexity
from .lmeval.scoring import LogLikelihoodScorer
from .lmeval.zeroshot import run_benchmark
from .models.checkpoint import CHECKPOINT_META, load_checkpoint, save_checkpoint
from .models.decoder import Decoder, DecoderConfig, parameter_counts
from .registry import TaskError, register_task
from .training import (Divergence, accumulated_backward, autocast as autocast_to, prepare_model,
                       row_share, scorer_parameter_values, training_dtype)

PPL_SETS = ("heldout", "wikipedia", "wikitext", "c4")
CONTEXT_MULTIPLES = (1, 2, 4, 8)
MODEL_FIELDS = ("n_layer", "dim", "n_head", "n_kv_head", "ffn_dim", "max_len", "rotary_fraction",
                "rope_base", "zero_centered_gamma", "norm_eps", "init_std")
TRAIN_FIELDS = ("corpus", "vocab_size", *MODEL_FIELDS, "steps", "batch_size", "lr", "min_lr",
                "warmup_steps", "weight_decay", "beta1", "beta2", "adam_eps", "grad_clip", "bf16",
                "diverge_factor")


@dataclass
class DecoderLMConfig(TaskConfig):
    # data and tokenizer
    corpus: str = setting("nltk_mix", choices=lambda: (*corpora.TRAINING_CORPORA, fineweb.NAME))
    vocab_size: int = setting(8192, ge=1)
    # model (defaults: a small CPU model; the paper profile sets the 114M configuration)
    n_layer: int = setting(4, ge=1)
    dim: int = setting(256, ge=1)
    n_head: int = setting(8, ge=1)
    n_kv_head: int = setting(4, ge=1)
    ffn_dim: int = setting(1024, ge=1)
    max_len: int = setting(256, ge=1)
    rotary_fraction: float = setting(0.5, ge=0, le=1)
    rope_base: float = setting(10000.0, gt=0)
    zero_centered_gamma: bool = True
    norm_eps: float = setting(1e-5, gt=0)
    init_std: float = setting(0.0134, gt=0)
    # training
    steps: int = setting(1000, ge=1, role="steps")
    batch_size: int = setting(16, ge=1)
    lr: float = setting(3e-4, gt=0, tunable=True, role="rate")
    min_lr: float = setting(3e-5, ge=0, role="rate")
    warmup_steps: int = setting(100, ge=0)
    weight_decay: float = setting(0.1, ge=0, tunable=True)
    beta1: float = setting(0.9, ge=0, lt=1)
    beta2: float = setting(0.95, ge=0, lt=1)
    adam_eps: float = setting(1e-5, gt=0)
    grad_clip: float = setting(1.0, ge=0)
    bf16: bool = True                     # autocast to bfloat16 on CUDA (CPU runs in fp32)
    diverge_factor: float = setting(1.5, gt=0)   # diverged: smoothed loss > factor * ln(V)
    log_every: int = setting(50, ge=1)
    # validation evaluations evenly spaced to the last step, beside the curve's log-spaced ones
    dense_curve_points: int = setting(0, ge=0, off_at_default=True)
    # evaluation
    ppl_protocol: str = setting("rolling", choices=PROTOCOLS)
    ppl_sets: tuple[str, ...] = setting(PPL_SETS, choices=PPL_SETS)
    ppl_max_docs: int = setting(-1, ge=-1)        # first N documents of each OOD set (-1: all)
    ppl_max_tokens: int = setting(-1, ge=-1)      # then the first documents within N tokens
    heldout_max_tokens: int = setting(-1, ge=-1)  # the same token cap for the held-out split
    benchmarks: tuple[str, ...] = setting(tuple(BENCHMARKS), choices=tuple(BENCHMARKS))
    n_shot: int = setting(0, ge=0)
    max_items: int = setting(-1, ge=-1)           # first N items of each benchmark (-1: all)
    add_bos: bool = False
    eval_batch_tokens: int = setting(8192, ge=1)
    context_multiples: tuple[int, ...] = setting((1, 2, 4), choices=CONTEXT_MULTIPLES)  # () : none
    headline_metrics: tuple[str, ...] = ()        # () : the declared headline metrics

    def model_config(self, vocab_size: int, scorer: str, scorer_kwargs: dict) -> DecoderConfig:
        return DecoderConfig(vocab_size=vocab_size, scorer=scorer, scorer_kwargs=dict(scorer_kwargs),
                             **{k: getattr(self, k) for k in MODEL_FIELDS})


def _metrics() -> dict[str, Metric]:
    out = {"train_loss": Metric("lower", description="mean training loss of the last log interval")}
    for s in PPL_SETS:
        out[f"{s}_perplexity"] = Metric("lower", headline=s in ("heldout", "wikipedia"),
                                        description=f"{s} token perplexity", ceiling=1.0, log_scale=True)
        out[f"{s}_word_perplexity"] = Metric("lower", description=f"{s} word perplexity (rolling)")
        out[f"{s}_byte_perplexity"] = Metric("lower", description=f"{s} byte perplexity (rolling)")
        out[f"{s}_bits_per_byte"] = Metric("lower", description=f"{s} bits per UTF-8 byte (rolling)")
        out[f"{s}_mean_cross_entropy"] = Metric("lower", description=f"{s} mean CE (windows)")
    for b in BENCHMARKS.values():
        for m in b.metrics:
            direction = "lower" if m == "perplexity" else "higher"
            out[f"{b.name}_{m}"] = Metric(direction, headline=m == b.headline,
                                          description=f"{b.name} {m} (lm-eval 0.4 rules)",
                                          ceiling=1.0 if m in ("acc", "acc_norm") else None)
    out["lambada_openai_nll"] = Metric("lower", description="lambada mean -log p(last word)")
    for m in CONTEXT_MULTIPLES:
        out[f"heldout_perplexity_{m}x"] = Metric(
            "lower", description=f"held-out token perplexity (rolling) in windows of {m} x max_len "
                                 "tokens, RoPE as trained; floor: the held-out unigram perplexity",
            ceiling=1.0, log_scale=True)
        out[f"heldout_bits_per_byte_{m}x"] = Metric(
            "lower", description=f"held-out bits per byte (rolling) in windows of {m} x max_len")
    return out


def fingerprint(cfg: DecoderLMConfig, scorer: str, scorer_kwargs: dict, seed: int,
                tokenizer_sha: str) -> str:
    ident = {"train": {k: getattr(cfg, k) for k in TRAIN_FIELDS}, "scorer": scorer,
             "scorer_kwargs": scorer_kwargs, "seed": seed, "tokenizer": tokenizer_sha}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def context_metrics(results: dict, unigram: float, metrics: dict, items: dict,
                    extra: dict) -> None:
    """Write the length-generalization metrics of ``results`` (multiple -> result, or the reason
    the scorer cannot read that length): ``heldout_perplexity_<m>x`` (anchored at ``unigram``)
    and ``heldout_bits_per_byte_<m>x``; a multiple the scorer cannot read leaves both out, with
    the reason in ``extra["not_applicable"]`` (n/a on the board, not a failure)."""
    for m, res in results.items():
        names = (f"heldout_perplexity_{m}x", f"heldout_bits_per_byte_{m}x")
        if isinstance(res, str):
            extra.setdefault("not_applicable", {}).update(dict.fromkeys(names, res))
            continue
        metrics[names[0]] = res.metrics["perplexity"]
        metrics[names[1]] = res.metrics["bits_per_byte"]
        items[names[1]] = res.items["bits_per_byte"]
        extra.setdefault("anchors", {})[names[0]] = {"floor": unigram, "ceiling": 1.0}


def leading_documents(docs: TokenizedDocuments, max_docs: int, max_tokens: int,
                      tokenizer: TextTokenizer) -> TokenizedDocuments:
    """An evaluation cap: the first ``max_docs`` documents, then the longest run of leading
    documents with at most ``max_tokens`` tokens in all; a first document longer than that is
    cut to its first ``max_tokens`` tokens (words and bytes recounted on the decoded text)."""
    n = len(docs) if max_docs < 0 else min(max_docs, len(docs))
    if max_tokens < 0 or n == 0:
        return docs.subset(range(n))
    total = np.cumsum([len(t) for t in docs.tokens[:n]])
    n = int(np.searchsorted(total, max_tokens, side="right"))
    if n:
        return docs.subset(range(n))
    head = docs.tokens[0][:max_tokens]
    text = tokenizer.decode(head.tolist())
    return TokenizedDocuments(docs.name, [docs.doc_ids[0] + f"[:{max_tokens}]"], [head],
                              np.array([len(text.split())]), np.array([len(text.encode("utf-8"))]))


def lr_at(step: int, cfg: DecoderLMConfig) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, then cosine decay to ``min_lr`` at ``steps``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(cfg.steps - cfg.warmup_steps, 1)
    progress = min((step - cfg.warmup_steps) / span, 1.0)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


VALIDATION_TOKENS = 32768
CURVE_STRIDE = 4


class ValidationWindows:
    """The validation split's first ``VALIDATION_TOKENS`` tokens (documents concatenated, as the
    training stream is) in windows of ``max_len`` + 1; ``value`` is the mean next-token loss."""

    def __init__(self, docs, cfg: DecoderLMConfig, autocast: bool):
        stream = (np.concatenate(docs.tokens)[:max(VALIDATION_TOKENS, cfg.max_len + 1)]
                  if len(docs) else np.zeros(0, dtype=np.int64))
        L = min(cfg.max_len + 1, len(stream))     # a split shorter than a window: one window
        if L < 2:
            raise TaskError(f"decoder_lm: the validation split of {cfg.corpus!r} has "
                            f"{len(stream)} tokens; the validation metric needs at least 2")
        n = len(stream) // L
        self.windows = torch.from_numpy(stream[:n * L].reshape(n, L).astype(np.int64))
        self.rows = max(1, cfg.eval_batch_tokens // L)
        self.autocast = autocast

    def subset_size(self) -> int:
        return len(self.windows[::CURVE_STRIDE])

    def value(self, model: Decoder, subset: bool = False) -> float:
        windows = self.windows[::CURVE_STRIDE] if subset else self.windows
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        total = 0.0
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                for i in range(0, len(windows), self.rows):
                    batch = windows[i:i + self.rows].to(device)
                    with autocast_to(device, self.autocast):
                        total += float(model.loss(batch[:, :-1], batch[:, 1:])) * len(batch)
        finally:
            model.train(was_training)
        return total / len(windows)


def train(model: Decoder, stream: np.ndarray, cfg: DecoderLMConfig, seed: int,
          ctx: RunContext, autocast: bool, validation: ValidationWindows | None = None) -> dict:
    """Train in place; raises :class:`TrainingFailure` by the rule of
    :class:`tasks.training.Divergence` (reference ln V). With ``validation``, the learning curve
    (``validation_curve``) and the final ``validation_value``."""
    device = ctx.device
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and ".scorer." not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or ".scorer." in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps)
    rng = np.random.default_rng(seed)
    L = cfg.max_len
    rule = Divergence(cfg.diverge_factor, math.log(model.cfg.vocab_size))
    if len(stream) < L + 2:
        raise TaskError(f"decoder_lm: the training stream has {len(stream)} tokens, fewer than "
                        f"max_len + 2 = {L + 2}")
    offsets_col = np.arange(L + 1)
    curve_steps, curve_loss, window = [], [], []
    curve = None if validation is None else Curve(cfg.steps, validation.subset_size(),
                                                  even=cfg.dense_curve_points)
    model.train()
    for step in range(cfg.steps):
        starts = rng.integers(0, len(stream) - L - 1, size=cfg.batch_size)
        batch = torch.from_numpy(stream[starts[:, None] + offsets_col].astype(np.int64)).to(device)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        opt.zero_grad(set_to_none=True)

        def part_loss(part, batch=batch):
            with autocast_to(device, autocast):
                return model.loss(batch[part, :-1], batch[part, 1:]) * row_share(part, len(batch))

        loss = accumulated_backward(len(batch), ctx.accumulation, part_loss)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        value = loss.item()
        rule.check(step, value, float(grad_norm))
        opt.step()
        if curve is not None:
            curve.maybe(step + 1, lambda: validation.value(model, subset=True))
        window.append(value)
        if len(window) == cfg.log_every or step == cfg.steps - 1:
            curve_steps.append(step + 1)
            curve_loss.append(float(np.mean(window)))
            window = []
        ctx.report(step + 1, cfg.steps)
    model.eval()
    out = {"loss_curve": {"step": curve_steps, "loss": curve_loss}}
    if validation is not None:
        out["validation_curve"] = curve.as_dict()
        out["validation_value"] = validation.value(model)
        out["validation_items"] = len(validation.windows)
    return out


@register_task("decoder_lm")
class DecoderLM(Task):
    version = 1
    track = "decoder"
    supports_accumulation = True
    Config = DecoderLMConfig
    metrics = _metrics()
    validation = Validation("val_loss", "lower", "mean next-token cross-entropy on the corpus's "
                            "validation split (not the reported held-out test split)")

    def run(self, scorer, scorer_kwargs, seed, config, ctx):
        cfg: DecoderLMConfig = config
        device = ctx.device
        autocast = bool(cfg.bf16 and device.type == "cuda")
        t0 = time.perf_counter()
        data = training_data(cfg.corpus, cfg.vocab_size,
                             max_train_tokens=cfg.steps * cfg.batch_size * cfg.max_len)
        tok = data.tokenizer
        data_seconds = time.perf_counter() - t0
        model_cfg = cfg.model_config(tok.vocab_size, scorer, scorer_kwargs)
        fp = fingerprint(cfg, scorer, scorer_kwargs, seed, tok.sha256)
        extra: dict = {"dtype": training_dtype(autocast), "fingerprint": fp,
                       "tokenizer_sha256": tok.sha256, "vocab_size": tok.vocab_size,
                       "train_tokens": int(len(data.train)),
                       "tokens_seen": cfg.steps * cfg.batch_size * cfg.max_len,
                       "data_seconds": data_seconds}
        meta_path = ctx.workdir / CHECKPOINT_META if ctx.workdir else None
        if meta_path is not None and meta_path.is_file() and \
                json.loads(meta_path.read_text()).get("fingerprint") == fp:
            model, _, meta = load_checkpoint(ctx.workdir, device)
            prepare_model(model, ctx)
            extra.update(meta["train_extra"], resumed_from_checkpoint=True)
        else:
            model = Decoder(model_cfg, seed=seed).to(device)
            prepare_model(model, ctx)
            t1 = time.perf_counter()
            train_extra = train(model, data.train, cfg, seed, ctx, autocast,
                                ValidationWindows(data.validation, cfg, autocast))
            train_extra["train_seconds"] = time.perf_counter() - t1
            extra.update(train_extra, resumed_from_checkpoint=False)
            if ctx.workdir is not None and not ctx.sweep:   # a sweep cell is never evaluated
                save_checkpoint(ctx.workdir, model, tok,
                                {"fingerprint": fp, "model": asdict(model_cfg), "seed": seed,
                                 "step": cfg.steps, "train_extra": train_extra})
        extra["parameters"] = parameter_counts(model)
        extra["scorer_parameters"] = scorer_parameter_values(model)
        extra["validation"] = self.validation.block(
            extra.pop("validation_value", None), extra.pop("validation_items", 0),
            Curve.from_dict(extra.pop("validation_curve", {"step": [], "value": [], "items": 0})))
        metrics: dict[str, float] = {"train_loss": extra["loss_curve"]["loss"][-1]}
        items: dict[str, list] = {}
        if ctx.sweep:
            return TaskResult(metrics=metrics, items=items, extra=extra, step=cfg.steps)
        t1 = time.perf_counter()
        llm = LogLikelihoodScorer(model, tok, max_length=cfg.max_len, device=device,
                                  batch_tokens=cfg.eval_batch_tokens, add_bos=cfg.add_bos,
                                  autocast_dtype=torch.bfloat16 if autocast else None)
        extra["anchors"] = {}
        extra["perplexity"] = self._perplexity(llm, data, cfg, metrics, items, extra["anchors"])
        extra["context_perplexity"] = self._context(model, data, cfg, metrics, items, extra, llm)
        extra["benchmarks"] = self._benchmarks(llm, cfg, metrics, items, extra)
        extra["long_continuations_split"] = llm.split_requests
        extra["eval_seconds"] = time.perf_counter() - t1
        return TaskResult(metrics=metrics, items=items, extra=extra, step=cfg.steps)

    @staticmethod
    def _perplexity(llm, data, cfg, metrics, items, anchors) -> dict:
        """Perplexity on each of ``cfg.ppl_sets``; the anchor floor of each is the perplexity of
        the add-one unigram model of the training tokens on the same documents."""
        info = {"protocol": cfg.ppl_protocol, "context": cfg.max_len}
        for name in cfg.ppl_sets:
            if name == "heldout":
                docs = leading_documents(data.test, -1, cfg.heldout_max_tokens, data.tokenizer)
            else:
                docs = leading_documents(eval_documents(name, data.tokenizer), cfg.ppl_max_docs,
                                         cfg.ppl_max_tokens, data.tokenizer)
            res = perplexity(llm, docs, cfg.ppl_protocol)
            anchors[f"{name}_perplexity"] = {
                "floor": unigram_perplexity(data.train, docs, data.tokenizer.vocab_size)}
            for key, value in res.metrics.items():
                metrics[f"{name}_{key}"] = value
            for key, values in res.items.items():
                items[f"{name}_{key}"] = values
            info[name] = {"documents": res.n_docs, "tokens": res.n_tokens,
                          "words": int(docs.words.sum()), "bytes": int(docs.bytes.sum())}
        return info

    @staticmethod
    def _context(model, data, cfg, metrics, items, extra, llm) -> dict:
        if not cfg.context_multiples:
            return {}
        docs = leading_documents(data.test, -1, cfg.heldout_max_tokens, data.tokenizer)
        unigram = unigram_perplexity(data.train, docs, data.tokenizer.vocab_size)
        results = context_perplexities(model, data.tokenizer, docs, cfg.max_len,
                                       cfg.context_multiples, batch_tokens=cfg.eval_batch_tokens,
                                       device=llm.device, add_bos=cfg.add_bos,
                                       autocast_dtype=llm.autocast_dtype)
        context_metrics(results, unigram, metrics, items, extra)
        return {"unigram_perplexity": unigram, "tokens": int(sum(map(len, docs.tokens)))}

    @staticmethod
    def _benchmarks(llm, cfg, metrics, items, extra) -> dict:
        info: dict = {"n_shot": cfg.n_shot, "add_bos": cfg.add_bos, "max_items": cfg.max_items,
                      "fewshot_source": "the evaluated file itself (random.Random(1234)), "
                                        "the item excluded"}
        baselines, below = {}, []
        limit = None if cfg.max_items < 0 else cfg.max_items
        for name in cfg.benchmarks:
            res = run_benchmark(llm, name, n_shot=cfg.n_shot, limit=limit)
            for m, value in res.metrics.items():
                metrics[f"{name}_{m}"] = value
            for m in ("acc", "acc_norm"):
                if m in res.items and m in res.metrics:
                    items[f"{name}_{m}"] = res.items[m]
            if "ll" in res.items:
                items[f"{name}_nll"] = [-x for x in res.items["ll"]]
                metrics[f"{name}_nll"] = float(np.mean(items[f"{name}_nll"]))
            if res.baseline is not None:
                for m in ("acc", "acc_norm"):
                    if m in res.metrics:
                        baselines[f"{name}_{m}"] = res.baseline
                        if res.metrics[m] <= res.baseline:
                            below.append(f"{name}_{m}")
            info[name] = {"items": res.n_items, "requests": res.n_requests}
        extra["baselines"] = baselines
        extra["below_baseline"] = below
        extra.setdefault("anchors", {}).update({m: {"floor": b} for m, b in baselines.items()})
        return info
