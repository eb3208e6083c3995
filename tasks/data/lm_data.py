"""Tokenized forms of the decoder corpora, cached under source hashes + tokenizer hash.

- :func:`training_data`: the tokenizer trained on the training split, the training token
  stream (``<|endoftext|>`` before every document) and the tokenized held-out documents.
- :func:`eval_documents`: a perplexity set (held-out split or an out-of-distribution text)
  as token arrays with the word and byte counts of each document.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import cache, corpora, fineweb
from .bpe import TextTokenizer, cached_bpe
from .documents import TokenizedDocuments, TrainingData, load_documents, save_documents

TOKENS_VERSION = 1


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
            save_documents(directory, split, corpora.training_corpus(corpus, split), tokenizer)

    path = cache.cached("lm-corpus", key, build, info={"corpus": corpus,
                                                        "tokenizer": tokenizer.sha256})
    return TrainingData(tokenizer, cache.load_arrays(path, "train")["train"],
                        load_documents(path, "validation", f"{corpus}:validation"),
                        load_documents(path, "test", f"{corpus}:test"))


def eval_documents(name: str, tokenizer: TextTokenizer) -> TokenizedDocuments:
    """An out-of-distribution perplexity set (``wikipedia``, ``wikitext``, ``c4``), tokenized."""
    if name not in corpora.EVAL_CORPORA:
        raise ValueError(f"unknown perplexity set {name!r}; known: {', '.join(corpora.EVAL_CORPORA)}")
    reader, sources = corpora.EVAL_CORPORA[name]
    key = cache.cache_key("lm-eval-text", sources=sources, name=name,
                          tokenizer=tokenizer.sha256, version=TOKENS_VERSION)
    path = cache.cached("lm-eval-text", key,
                        lambda d: save_documents(d, "docs", reader(), tokenizer),
                        info={"name": name, "tokenizer": tokenizer.sha256})
    return load_documents(path, "docs", name)
