"""BabyBERTa's data for ``encoder_mlm``: the tokenizer, the tokenized AO-CHILDES, validation and
Zorro sentences (cached on disk), batching and the MLM objectives (docs/tasks.md#encoder_mlm).

- ``babyberta``: each non-special token selected with probability ``mask_probability`` (the row
  drawn again while nothing is selected); each selected token replaced by a random token (uniform
  over ids >= 6) with probability 0.1, else by ``<mask>``; none left unchanged. ``mask_copies``
  masked copies of every sentence, shuffled together.
- ``hf``: HF ``DataCollatorForLanguageModeling``: selection with ``mask_probability``; of the
  selected, 80% ``<mask>``, 10% a random id (uniform over the whole vocabulary), 10% unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import aochildes, zorro
from .cache import cache_key, cached, load_json, load_ragged, save_json, save_ragged
from .files import data_path

TOKENIZER_FILE = "tokenizers/babyberta.json"
MASK_ID, PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3, 4
FIRST_RANDOM_ID = 6  # BabyBERTa draws random replacements from ids >= 6 (num_special_tokens = 6)
RANDOM_TOKEN_PROB = 0.1
OBJECTIVES = ("babyberta", "hf")
ORDERS = ("shuffled", "age_ordered")
DATA_VERSION = 2  # 2: AO-CHILDES merges "don't cha" -> "don't you"


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
