"""Tokenized forms of the decoder corpora, cached under source hashes + tokenizer hash.

- :func:`training_data`: the tokenizer trained on the training split, the training token
  stream (``<|endoftext|>`` before every document) and the tokenized held-out documents.
- :func:`eval_documents`: a perplexity set (held-out split or an out-of-distribution text)
  as token arrays with the word and byte counts of each document.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import cache, corpora, fineweb
from .bpe import TextTokenizer, cached_bpe

TOKENS_VERSION = 1


@dataclass
class TokenizedDocuments:
    """Documents as token arrays, with the word and byte counts of each original document."""

    name: str
    doc_ids: list[str]
    tokens: list[np.ndarray]
    words: np.ndarray
    bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.tokens)

    def subset(self, indices) -> "TokenizedDocuments":
        idx = list(indices)
        return TokenizedDocuments(self.name, [self.doc_ids[i] for i in idx],
                                  [self.tokens[i] for i in idx], self.words[idx], self.bytes[idx])


@dataclass
class TrainingData:
    tokenizer: TextTokenizer
    train: np.ndarray  # int32 stream
    validation: TokenizedDocuments
    test: TokenizedDocuments


def _save_documents(directory: Path, name: str, docs: list[corpora.Document],
                    tokenizer: TextTokenizer) -> None:
    cache.save_ragged(directory, name, tokenizer.encode_batch([d.text for d in docs]))
    cache.save_arrays(directory, **{f"{name}.words": np.array([d.words for d in docs], np.int64),
                                    f"{name}.bytes": np.array([d.bytes for d in docs], np.int64)})
    cache.save_json(directory, f"{name}.ids", [d.doc_id for d in docs])


def _load_documents(directory: Path, name: str, label: str) -> TokenizedDocuments:
    arrays = cache.load_arrays(directory, f"{name}.words", f"{name}.bytes")
    return TokenizedDocuments(label, cache.load_json(directory, f"{name}.ids"),
                              cache.load_ragged(directory, name),
                              arrays[f"{name}.words"], arrays[f"{name}.bytes"])


def training_data(corpus: str, vocab_size: int, max_train_tokens: int | None = None
                  ) -> TrainingData:
    """Tokenizer + tokenized splits of ``corpus`` (``nltk_mix``, ``tinyshakespeare``, or
    ``fineweb_edu``, prepared up to ``max_train_tokens`` training tokens: :mod:`.fineweb`)."""
    if corpus == fineweb.NAME:
        if max_train_tokens is None:
            raise ValueError("fineweb_edu: give max_train_tokens (the tokens the run processes)")
        return fineweb.training_data(vocab_size, max_train_tokens)
    if corpus not in corpora.TRAINING_CORPORA:
        raise ValueError(f"unknown training corpus {corpus!r}; "
                         f"known: {', '.join(corpora.TRAINING_CORPORA)}")
    sources = corpora.TRAINING_CORPORA[corpus][1]
    tokenizer = cached_bpe(corpus, sources,
                           lambda: (d.text for d in corpora.training_corpus(corpus, "train")),
                           vocab_size)
    key = cache.cache_key("lm-corpus", sources=sources, corpus=corpus,
                          tokenizer=tokenizer.sha256, version=TOKENS_VERSION)

    def build(directory: Path) -> None:
        train_docs = corpora.training_corpus(corpus, "train")
        ids = tokenizer.encode_batch([d.text for d in train_docs])
        eot = tokenizer.eot_id
        stream = np.concatenate([np.array([eot] + seq, dtype=np.int32) for seq in ids])
        cache.save_arrays(directory, train=stream)
        for split in ("validation", "test"):
            _save_documents(directory, split, corpora.training_corpus(corpus, split), tokenizer)

    path = cache.cached("lm-corpus", key, build, info={"corpus": corpus,
                                                        "tokenizer": tokenizer.sha256})
    return TrainingData(tokenizer, cache.load_arrays(path, "train")["train"],
                        _load_documents(path, "validation", f"{corpus}:validation"),
                        _load_documents(path, "test", f"{corpus}:test"))


def eval_documents(name: str, tokenizer: TextTokenizer) -> TokenizedDocuments:
    """An out-of-distribution perplexity set (``wikipedia``, ``wikitext``, ``c4``), tokenized."""
    if name not in corpora.EVAL_CORPORA:
        raise ValueError(f"unknown perplexity set {name!r}; known: {', '.join(corpora.EVAL_CORPORA)}")
    reader, sources = corpora.EVAL_CORPORA[name]
    key = cache.cache_key("lm-eval-text", sources=sources, name=name,
                          tokenizer=tokenizer.sha256, version=TOKENS_VERSION)
    path = cache.cached("lm-eval-text", key,
                        lambda d: _save_documents(d, "docs", reader(), tokenizer),
                        info={"name": name, "tokenizer": tokenizer.sha256})
    return _load_documents(path, "docs", name)
