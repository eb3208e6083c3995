"""Byte-level BPE tokenizers trained with Hugging Face ``tokenizers`` on a training split, cached.

The tokenizer is GPT-2-like: byte-level pre-tokenization without a prefix space, no
normalization, and one special token ``<|endoftext|>`` that separates training documents and
prefixes what the model reads first. Its identity (``sha256``) is the hash of its JSON form,
which keys every processed form built with it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from . import cache

EOT = "<|endoftext|>"
TOKENIZER_FILE = "tokenizer.json"
BPE_VERSION = 1


class TextTokenizer:
    """A trained tokenizer: ``encode``, ``encode_batch``, ``decode`` and the end-of-text id."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        eot = tokenizer.token_to_id(EOT)
        if eot is None:
            raise ValueError(f"tokenizer has no {EOT!r} token; train it with bpe.train_bpe")
        self.eot_id = eot
        self.json = tokenizer.to_str()
        self.sha256 = cache.sha256_text(self.json)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def save(self, path: Path) -> None:
        Path(path).write_text(self.json, encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "TextTokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file {path} does not exist")
        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def from_str(cls, text: str) -> "TextTokenizer":
        return cls(Tokenizer.from_str(text))


def train_bpe(texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2) -> TextTokenizer:
    """A byte-level BPE with ``vocab_size`` entries (256 bytes + ``<|endoftext|>`` + merges)."""
    if vocab_size < 258:
        raise ValueError(f"vocab_size={vocab_size} is too small for a byte-level BPE; "
                         f"use at least 258 (256 bytes, {EOT}, one merge)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return TextTokenizer(tok)


def cached_bpe(corpus: str, sources: Sequence[str], texts: Callable[[], Iterable[str]],
               vocab_size: int) -> TextTokenizer:
    """The BPE trained on ``texts()`` (the training split of ``corpus``), built once and cached."""
    key = cache.cache_key("bpe", sources=sources, corpus=corpus, vocab_size=vocab_size,
                          version=BPE_VERSION)

    def build(directory: Path) -> None:
        train_bpe(texts(), vocab_size).save(directory / TOKENIZER_FILE)

    path = cache.cached("bpe", key, build, info={"corpus": corpus, "vocab_size": vocab_size})
    return TextTokenizer.load(path / TOKENIZER_FILE)
