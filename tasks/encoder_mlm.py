"""``encoder_mlm``: BabyBERTa trained on AO-CHILDES by masked language modelling, probed with Zorro.

One cell: build the RoBERTa-style encoder with the cell's scorer, train it on the AO-CHILDES
sentences (``tasks.data.aochildes``), then evaluate

- Zorro (``tasks.data.zorro``), 23 paradigms, holistic scoring: the mean token cross-entropy of
  each unmasked sentence (``<s>`` and ``</s>`` included), the lower of a pair wins, ties wrong.
  Metrics ``zorro.<paradigm>`` (% correct) and ``zorro_overall`` (mean of the 23); per-pair
  outcomes (100 correct / 0 wrong) in ``items``.
- ``val_mlm_loss``: the MLM loss on the held-out AO-CHILDES sentences, masked once with a fixed
  seed (the same corruption for every cell), mean cross-entropy over the corrupted positions.

MLM objectives (TASKS.md (e)):

- ``babyberta``: each non-special token selected with probability ``mask_probability`` (the row
  drawn again while nothing is selected); each selected token replaced by a random token (uniform
  over ids >= 6) with probability 0.1, else by ``<mask>``; none left unchanged. ``mask_copies``
  masked copies of every sentence, shuffled together.
- ``hf``: HF ``DataCollatorForLanguageModeling``: selection with ``mask_probability``; of the
  selected, 80% ``<mask>``, 10% a random id (uniform over the whole vocabulary), 10% unchanged.

The loss is the cross-entropy on the selected positions. Every batch holds ``batch_size``
sentences: the last, partial batch of a pass is completed from the next pass. Seeds: the data
order, the masks and the shared initial weights come from streams derived from the cell seed only,
so every scorer at a seed sees the same batches and starts from the same backbone.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from .base import Metric, RunContext, Task, TaskResult, TrainingFailure, micro_batches
from .data import aochildes, zorro
from .data.cache import cache_key, cached, load_json, load_ragged, save_json, save_ragged
from .data.files import data_path
from .models.encoder import Encoder, EncoderConfig
from .registry import TaskError, register_task

TOKENIZER_FILE = "tokenizers/babyberta.json"
MASK_ID, PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3, 4
FIRST_RANDOM_ID = 6  # BabyBERTa draws random replacements from ids >= 6 (num_special_tokens = 6)
RANDOM_TOKEN_PROB = 0.1
OBJECTIVES = ("babyberta", "hf")
ORDERS = ("shuffled", "age_ordered")
DATA_VERSION = 1


@dataclass
class EncoderMLMConfig:
    """Defaults: BabyBERTa (phueb/BabyBERTa ``params.py``) on the staged AO-CHILDES; TASKS.md (e)."""

    # model
    n_layer: int = 8
    n_head: int = 8
    n_embd: int = 256
    ffn_dim: int = 1024
    max_position_embeddings: int = 130
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    init_std: float = 0.02
    # data and objective
    order: str = "shuffled"            # or "age_ordered": sentences in corpus order, copies together
    objective: str = "babyberta"       # or "hf"
    mask_probability: float = 0.15
    mask_copies: int = 10
    # training: AdamW, linear warm-up then linear decay to 0 at the last step, clipping
    batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-6
    warmup_steps: int = 24_000
    max_steps: int = 0                 # 0: one pass over the masked copies
    grad_clip: float = 1.0
    diverge_loss: float = 0.0          # EMA(loss) above this is "diverged"; 0: 2 ln(vocab size)
    # evaluation
    zorro_pairs: int = 2000            # the first n pairs of every paradigm
    val_sentences: int = 0             # the first n validation sentences; 0: all
    val_mask_seed: int = 0
    eval_batch_size: int = 256
    log_every: int = 100

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
                setattr(self, f.name, value)
            ok = {"int": isinstance(value, int) and not isinstance(value, bool),
                  "float": isinstance(value, float), "str": isinstance(value, str)}[kind]
            if not ok:
                raise TaskError(f"encoder_mlm: config key {f.name!r} must be {kind}, got {value!r}")
        positive = ("n_layer", "n_head", "n_embd", "ffn_dim", "mask_copies", "batch_size",
                    "zorro_pairs", "eval_batch_size", "log_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise TaskError(f"encoder_mlm: config key {name!r} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "max_steps", "val_sentences", "weight_decay", "grad_clip",
                     "diverge_loss", "dropout"):
            if getattr(self, name) < 0:
                raise TaskError(f"encoder_mlm: config key {name!r} must be >= 0, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise TaskError(f"encoder_mlm: n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        if self.objective not in OBJECTIVES:
            raise TaskError(f"encoder_mlm: objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.order not in ORDERS:
            raise TaskError(f"encoder_mlm: order must be one of {ORDERS}, got {self.order!r}")
        if not 0 < self.mask_probability < 1:
            raise TaskError(f"encoder_mlm: mask_probability must be in (0, 1), got {self.mask_probability}")
        if not self.lr > 0:
            raise TaskError(f"encoder_mlm: lr must be > 0, got {self.lr}")
        if self.zorro_pairs > zorro.PAIRS_PER_PARADIGM:
            raise TaskError(f"encoder_mlm: zorro_pairs={self.zorro_pairs} exceeds the "
                            f"{zorro.PAIRS_PER_PARADIGM} pairs of a paradigm")
        if self.max_position_embeddings < 2 + PAD_ID + 2:
            raise TaskError("encoder_mlm: max_position_embeddings must leave room for <s> x </s>")

    def model_config(self, scorer: str, scorer_kwargs: dict, vocab_size: int) -> EncoderConfig:
        return EncoderConfig(vocab_size=vocab_size, max_position_embeddings=self.max_position_embeddings,
                             n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd,
                             ffn_dim=self.ffn_dim, dropout=self.dropout,
                             layer_norm_eps=self.layer_norm_eps, init_std=self.init_std,
                             pad_token_id=PAD_ID, scorer=scorer, scorer_kwargs=dict(scorer_kwargs))


def derive_seed(seed: int, *labels) -> int:
    """A 63-bit seed for the random stream named ``labels`` of the cell seeded with ``seed``."""
    digest = hashlib.sha256(json.dumps([int(seed), *labels]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


# ----------------------------------------------------------------------------------------- data

def load_tokenizer():
    """BabyBERTa's byte-level BPE (8,192 ids) with padding and truncation switched off."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(data_path(TOKENIZER_FILE)))
    tok.no_padding()
    tok.no_truncation()
    expected = {"<mask>": MASK_ID, "<pad>": PAD_ID, "<unk>": UNK_ID, "<s>": BOS_ID, "</s>": EOS_ID}
    found = {t: tok.token_to_id(t) for t in expected}
    if found != expected:
        raise ValueError(f"{TOKENIZER_FILE}: special token ids {found}, expected {expected}")
    return tok


def encode(tok, sentences) -> list[np.ndarray]:
    """Token ids of each sentence without ``<s>``/``</s>`` (added when batching)."""
    return [np.asarray(e.ids, dtype=np.int32)
            for e in tok.encode_batch(list(sentences), add_special_tokens=False)]


@dataclass(frozen=True)
class EncoderData:
    train: list[np.ndarray]     # training sentences in AO-CHILDES (age) order
    val: list[np.ndarray]       # held-out sentences from transcripts not in training
    zorro: dict[str, tuple[list[np.ndarray], list[np.ndarray]]]  # paradigm -> (grammatical, ungrammatical)
    vocab_size: int
    info: dict                  # corpus counts and checks


def _build_data(directory: Path) -> None:
    tok = load_tokenizer()
    corpus = aochildes.load_aochildes()
    sentences = corpus.training_sentences()
    validation = aochildes.load_validation()
    train = encode(tok, sentences)
    val = encode(tok, validation.sentences)
    save_ragged(directory, "train", train)
    save_ragged(directory, "val", val)
    zorro_unk, zorro_max = 0, 0
    for paradigm in zorro.paradigms():
        pairs = zorro.load_paradigm(paradigm)
        good = encode(tok, [p.grammatical for p in pairs])
        bad = encode(tok, [p.ungrammatical for p in pairs])
        save_ragged(directory, f"zorro.{paradigm}.grammatical", good)
        save_ragged(directory, f"zorro.{paradigm}.ungrammatical", bad)
        zorro_unk += sum(int(np.sum(s == UNK_ID)) for s in good + bad)
        zorro_max = max(zorro_max, max(len(s) for s in good + bad) + 2)
    info = {
        "corpus": corpus.counts(),
        "validation": {"rows": validation.rows_total, "dropped_rows": validation.rows_dropped,
                       "dropped_transcripts": validation.transcripts_dropped,
                       "sentences": len(validation.sentences),
                       "words": sum(len(s.split()) - 1 for s in validation.sentences)},
        "tokens": {"train": int(sum(len(s) for s in train)),
                   "train_unk": int(sum(np.sum(s == UNK_ID) for s in train)),
                   "train_max_len": int(max(len(s) for s in train)) + 2,
                   "val": int(sum(len(s) for s in val)),
                   "zorro_unk": zorro_unk, "zorro_max_len": zorro_max},
        "vocab_size": tok.get_vocab_size(),
    }
    save_json(directory, "info", info)


@lru_cache(maxsize=1)
def load_data() -> EncoderData:
    """Tokenized training, validation and Zorro sentences, cached on disk (key: the sha256 of every
    source file and of the tokenizer, and the preparation's version)."""
    sources = [*aochildes.transcript_files(), aochildes.VALIDATION_FILE, TOKENIZER_FILE,
               *(f"{zorro.PREFIX}{p}.txt" for p in zorro.paradigms())]
    for name in sources:
        data_path(name)
    key = cache_key("encoder-mlm", sources=sources, version=DATA_VERSION,
                    min_tokens=aochildes.MIN_SENTENCE_TOKENS)
    directory = cached("encoder-mlm", key, _build_data)
    info = load_json(directory, "info")
    return EncoderData(
        train=load_ragged(directory, "train"),
        val=load_ragged(directory, "val"),
        zorro={p: (load_ragged(directory, f"zorro.{p}.grammatical"),
                   load_ragged(directory, f"zorro.{p}.ungrammatical")) for p in zorro.paradigms()},
        vocab_size=int(info["vocab_size"]),
        info=info,
    )


def pad_batch(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``<s> ids </s>`` right-padded with ``<pad>``: (ids, valid), both (B, max len + 2)."""
    length = max(len(s) for s in seqs) + 2
    ids = np.full((len(seqs), length), PAD_ID, dtype=np.int64)
    valid = np.zeros((len(seqs), length), dtype=bool)
    for row, s in enumerate(seqs):
        ids[row, 0], ids[row, 1:len(s) + 1], ids[row, len(s) + 1] = BOS_ID, s, EOS_ID
        valid[row, :len(s) + 2] = True
    return ids, valid


def maskable_positions(ids: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Real tokens other than ``<s>``/``</s>``: the positions an objective may select."""
    return valid & (ids != BOS_ID) & (ids != EOS_ID)


def corrupt(ids: np.ndarray, valid: np.ndarray, objective: str, rng: np.random.Generator,
            vocab_size: int, mask_probability: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """(corrupted inputs, selected positions) for one batch under ``objective``."""
    maskable = maskable_positions(ids, valid)
    selected = maskable & (rng.random(ids.shape) < mask_probability)
    if objective == "babyberta":
        empty = maskable.any(1) & ~selected.any(1)
        while empty.any():
            rows = np.flatnonzero(empty)
            selected[rows] = maskable[rows] & (rng.random((len(rows), ids.shape[1])) < mask_probability)
            empty = maskable.any(1) & ~selected.any(1)
        inputs = np.where(selected, MASK_ID, ids)
        random_ = selected & (rng.random(ids.shape) < RANDOM_TOKEN_PROB)
        inputs[random_] = rng.integers(FIRST_RANDOM_ID, vocab_size, size=int(random_.sum()))
    elif objective == "hf":
        while maskable.any() and not selected.any():
            selected = maskable & (rng.random(ids.shape) < mask_probability)
        replaced = selected & (rng.random(ids.shape) < 0.8)
        random_ = selected & ~replaced & (rng.random(ids.shape) < 0.5)
        inputs = np.where(replaced, MASK_ID, ids)
        inputs[random_] = rng.integers(0, vocab_size, size=int(random_.sum()))
    else:
        raise ValueError(f"unknown MLM objective {objective!r}; choose one of {OBJECTIVES}")
    return inputs, selected


def training_items(num_sentences: int, copies: int, order: str, rng: np.random.Generator) -> np.ndarray:
    """Sentence index of each masked copy, in training order (one pass)."""
    if order == "shuffled":
        return rng.permutation(num_sentences * copies) // copies
    return np.repeat(np.arange(num_sentences), copies)


# ----------------------------------------------------------------------------------- evaluation

def length_batches(seqs: list[np.ndarray], batch_size: int):
    """Indices of equal-length sequences, ``batch_size`` at a time: batches without padding."""
    lengths = np.array([len(s) for s in seqs])
    for length in np.unique(lengths):
        idx = np.flatnonzero(lengths == length)
        for start in range(0, len(idx), batch_size):
            yield idx[start:start + batch_size]


@torch.no_grad()
def holistic_cross_entropy(model, seqs: list[np.ndarray], device: torch.device,
                           batch_size: int = 256) -> np.ndarray:
    """Per sentence: mean over positions (``<s>``, tokens, ``</s>``) of -log p(input id | unmasked
    input), as BabyBERTa's ``predict_forced_choice``. Sentences of one length share a batch, so no
    padding enters any score."""
    model.eval()
    out = np.empty(len(seqs), dtype=np.float64)
    for idx in length_batches(seqs, batch_size):
        ids, valid = pad_batch([seqs[i] for i in idx])
        ids_t = torch.from_numpy(ids).to(device)
        with autocast(device):
            hidden = model(ids_t, torch.from_numpy(valid).to(device))
            logits = model.logits(hidden)
        ce = F.cross_entropy(logits.float().flatten(0, 1), ids_t.flatten(), reduction="none")
        out[idx] = ce.view(ids_t.shape).mean(1).double().cpu().numpy()
    return out


@lru_cache(maxsize=4)
def masked_validation(objective: str, mask_probability: float, mask_seed: int, count: int,
                      vocab_size: int) -> tuple:
    """The validation sentences corrupted once, sentence by sentence, from ``mask_seed``: the same
    inputs for every cell, whatever the batch size; the first ``count`` sentences (0: all)."""
    seqs = load_data().val
    seqs = seqs[:count] if count else seqs
    rng = np.random.default_rng(mask_seed)
    out = []
    for s in seqs:
        ids, valid = pad_batch([s])
        inputs, selected = corrupt(ids, valid, objective, rng, vocab_size, mask_probability)
        out.append((inputs[0, 1:-1], selected[0, 1:-1], s))
    return tuple(out)


@torch.no_grad()
def validation_loss(model, masked: tuple, batch_size: int, device: torch.device) -> tuple[float, int]:
    """Mean CE over the corrupted positions of ``masked`` (from :func:`masked_validation`) and
    the number of those positions; batches of equal-length sentences, so no padding."""
    model.eval()
    total, count = 0.0, 0
    for idx in length_batches([m[2] for m in masked], batch_size):
        inputs, valid = pad_batch([masked[i][0] for i in idx])
        targets, _ = pad_batch([masked[i][2] for i in idx])
        selected = np.zeros_like(valid)
        selected[:, 1:-1] = np.stack([masked[i][1] for i in idx])
        with autocast(device):
            hidden = model(torch.from_numpy(inputs).to(device), torch.from_numpy(valid).to(device))
            logits = model.logits(hidden[torch.from_numpy(selected).to(device)])
        target = torch.from_numpy(targets[selected]).to(device)
        total += float(F.cross_entropy(logits.float(), target, reduction="sum"))
        count += int(selected.sum())
    return total / max(count, 1), count


# ------------------------------------------------------------------------------------- training

def autocast(device: torch.device):
    """bf16 autocast on CUDA; full precision elsewhere."""
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


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


def scorer_state(model: Encoder) -> dict:
    """Small learned scorer parameters per layer (e.g. SSA's exponent), for the record."""
    out = {}
    for i, layer in enumerate(model.layers):
        for name, p in layer.attn.scorer.named_parameters():
            if p.numel() <= 64:
                out[f"layer{i}.{name}"] = p.detach().float().cpu().flatten().tolist()
    return out


def train(model: Encoder, data: EncoderData, cfg: EncoderMLMConfig, seed: int,
          ctx: RunContext, total_units: int) -> dict:
    """AdamW with warm-up and linear decay; raises TrainingFailure on NaN or divergence."""
    device = ctx.device
    item_rng = np.random.default_rng(derive_seed(seed, "order"))
    mask_rng = np.random.default_rng(derive_seed(seed, "mask"))
    per_pass = math.ceil(len(data.train) * cfg.mask_copies / cfg.batch_size)
    steps = cfg.max_steps or per_pass
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2),
                            eps=cfg.adam_eps, weight_decay=cfg.weight_decay, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup_decay(cfg.warmup_steps, steps))
    diverge = cfg.diverge_loss or 2 * math.log(data.vocab_size)
    torch.manual_seed(derive_seed(seed, "dropout"))
    ema, curve, window, items, cursor = None, [], [], np.zeros(0, dtype=np.int64), 0
    passes = 0
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
        loss = 0.0
        for part in micro_batches(len(batch), ctx.accumulation):
            with autocast(device):
                hidden = model(inputs[part], valid[part])
                logits = model.logits(hidden[sel[part]])
            # a sum over this micro-batch's selected tokens / all selected: the batch mean
            part_loss = F.cross_entropy(logits.float(), targets[part][sel[part]],
                                        reduction="sum") / n_selected
            part_loss.backward()
            loss = loss + part_loss.detach()
        value = float(loss)
        if not math.isfinite(value):
            raise TrainingFailure("nan", step, f"training loss became {value} at step {step} "
                                  f"(lr={cfg.lr:g}, objective={cfg.objective})")
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or float("inf")))
        if not math.isfinite(norm):
            raise TrainingFailure("nan", step, f"gradient norm became {norm} at step {step}")
        opt.step()
        sched.step()
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        if ema > diverge:
            raise TrainingFailure("diverged", step, f"smoothed training loss {ema:.3f} at step {step} "
                                  f"exceeds {diverge:.3f} (diverge_loss; 2 ln V by default)")
        window.append(value)
        if step % cfg.log_every == 0 or step == steps:
            curve.append([step, float(np.mean(window))])
            window = []
        ctx.report(step, total_units)
    return {"steps": steps, "steps_per_pass": per_pass, "passes_started": passes,
            "loss_curve": curve, "final_train_loss": curve[-1][1] if curve else None}


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
    """BabyBERTa on AO-CHILDES (masked LM), probed with Zorro; TASKS.md (e)."""

    version = 1
    track = "encoder"
    supports_accumulation = True
    Config = EncoderMLMConfig
    metrics = _metrics()

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
        steps = cfg.max_steps or math.ceil(len(data.train) * cfg.mask_copies / cfg.batch_size)
        paradigms = zorro.paradigms()
        total_units = steps + len(paradigms) + 1
        t_data, c_data = time.perf_counter(), time.process_time()
        log = train(model, data, cfg, seed, ctx, total_units)
        t_train, c_train = time.perf_counter(), time.process_time()

        metrics, items, ties = {}, {}, {}
        overall_items = []
        for k, paradigm in enumerate(paradigms):
            good, bad = data.zorro[paradigm]
            n = cfg.zorro_pairs
            ce_good = holistic_cross_entropy(model, good[:n], device, cfg.eval_batch_size)
            ce_bad = holistic_cross_entropy(model, bad[:n], device, cfg.eval_batch_size)
            correct, ties[paradigm] = zorro.pair_outcomes(ce_good, ce_bad)
            outcome = [100 if c else 0 for c in correct]
            metrics[f"zorro.{paradigm}"] = float(np.mean(outcome))
            items[f"zorro.{paradigm}"] = outcome
            overall_items += outcome
            ctx.report(steps + k + 1, total_units)
        metrics["zorro_overall"] = float(np.mean([metrics[f"zorro.{p}"] for p in paradigms]))
        items["zorro_overall"] = overall_items
        t_zorro, c_zorro = time.perf_counter(), time.process_time()

        val = masked_validation(cfg.objective, cfg.mask_probability, cfg.val_mask_seed,
                                cfg.val_sentences, data.vocab_size)
        metrics["val_mlm_loss"], val_tokens = validation_loss(model, val, cfg.eval_batch_size, device)
        ctx.report(total_units, total_units)
        t_val, c_val = time.perf_counter(), time.process_time()

        extra = {
            "dtype": "bfloat16" if device.type == "cuda" else "float32",
            "parameters": model.num_parameters(),
            "parameters_backbone": model.num_parameters(include_scorers=False),
            "train": log,
            "zorro_pairs_per_paradigm": cfg.zorro_pairs,
            "zorro_ties": ties,
            "zorro_ties_total": int(sum(ties.values())),
            "val_sentences": len(val),
            "val_masked_tokens": val_tokens,
            "data": data.info,
            "scorer_parameters": scorer_state(model),
            "timing_s": {"data_and_model": round(t_data - t0, 2), "train": round(t_train - t_data, 2),
                         "zorro": round(t_zorro - t_train, 2), "validation": round(t_val - t_zorro, 2)},
            "cpu_time_s": {"data_and_model": round(c_data - c0, 2), "train": round(c_train - c_data, 2),
                           "zorro": round(c_zorro - c_train, 2), "validation": round(c_val - c_zorro, 2)},
            "threads": torch.get_num_threads(),
        }
        return TaskResult(metrics=metrics, items=items, extra=extra, step=log["steps"])
