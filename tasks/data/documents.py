"""Tokenized documents of the decoder corpora and their cache format: token arrays with the word
and byte counts of each original document (:class:`TokenizedDocuments`), a training set
(:class:`TrainingData`), and how both corpora (:mod:`.lm_data`, :mod:`.fineweb`) save and load
held-out documents in a cache directory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import cache
from .bpe import TextTokenizer
from .corpora import Document


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


def save_documents(directory: Path, name: str, docs: list[Document],
                   tokenizer: TextTokenizer) -> None:
    """Tokenize ``docs`` and save them, with their word and byte counts and ids, as ``name``."""
    cache.save_ragged(directory, name, tokenizer.encode_batch([d.text for d in docs]))
    cache.save_arrays(directory, **{f"{name}.words": np.array([d.words for d in docs], np.int64),
                                    f"{name}.bytes": np.array([d.bytes for d in docs], np.int64)})
    cache.save_json(directory, f"{name}.ids", [d.doc_id for d in docs])


def load_documents(directory: Path, name: str, label: str) -> TokenizedDocuments:
    """The documents :func:`save_documents` saved as ``name``, named ``label``."""
    arrays = cache.load_arrays(directory, f"{name}.words", f"{name}.bytes")
    return TokenizedDocuments(label, cache.load_json(directory, f"{name}.ids"),
                              cache.load_ragged(directory, name),
                              arrays[f"{name}.words"], arrays[f"{name}.bytes"])
