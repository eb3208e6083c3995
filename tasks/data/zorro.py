"""Zorro: 23 paradigms of grammatical minimal pairs in child-directed vocabulary (phueb/Zorro).

Each staged file ``zorro/<phenomenon>-<paradigm>.txt`` has 4,000 lines: line 2k-1 (odd) is the
ungrammatical sentence of pair k, line 2k (even) its grammatical twin.

Holistic scoring (BabyBERTa ``probing.py``): every sentence is scored alone, unmasked, by the mean
token cross-entropy of the model's logits against its own input ids (``<s>`` and ``</s>``
included); a pair is correct iff CE(grammatical) < CE(ungrammatical). A tie counts as wrong.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .files import data_path, manifest

PREFIX = "zorro/"
PAIRS_PER_PARADIGM = 2000


@dataclass(frozen=True)
class MinimalPair:
    grammatical: str
    ungrammatical: str


def paradigms() -> list[str]:
    """The staged paradigm names (file stems), sorted: 23 of them."""
    return sorted(n[len(PREFIX):-len(".txt")] for n in manifest()
                  if n.startswith(PREFIX) and n.endswith(".txt"))


def phenomenon(paradigm: str) -> str:
    """``filler-gap-wh_question_object`` -> ``filler-gap``: the part before the last hyphen."""
    return paradigm.rsplit("-", 1)[0]


def parse_pairs(lines: list[str], source: str = "input") -> list[MinimalPair]:
    """Pairs from alternating lines: odd line (1st, 3rd, ...) ungrammatical, next line grammatical."""
    lines = [line.strip() for line in lines]
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if len(lines) % 2:
        raise ValueError(f"{source}: {len(lines)} lines; Zorro files alternate ungrammatical/"
                         f"grammatical lines, so the count must be even")
    empty = [i + 1 for i, line in enumerate(lines) if not line]
    if empty:
        raise ValueError(f"{source}: empty line(s) at {empty[:5]}; every line must be a sentence")
    return [MinimalPair(grammatical=lines[i + 1], ungrammatical=lines[i])
            for i in range(0, len(lines), 2)]


def load_paradigm(paradigm: str) -> list[MinimalPair]:
    """The 2,000 pairs of one paradigm, in file order."""
    known = paradigms()
    if paradigm not in known:
        raise ValueError(f"unknown Zorro paradigm {paradigm!r}; known: {', '.join(known)}")
    path = data_path(f"{PREFIX}{paradigm}.txt")
    pairs = parse_pairs(path.read_text(encoding="utf-8").split("\n"), source=str(path))
    if len(pairs) != PAIRS_PER_PARADIGM:
        raise ValueError(f"{path}: {len(pairs)} pairs, expected {PAIRS_PER_PARADIGM}")
    return pairs


def pair_outcomes(ce_grammatical, ce_ungrammatical) -> tuple[np.ndarray, int]:
    """Per-pair correctness (CE(grammatical) < CE(ungrammatical), ties wrong) and the tie count."""
    good = np.asarray(ce_grammatical, dtype=np.float64)
    bad = np.asarray(ce_ungrammatical, dtype=np.float64)
    if good.shape != bad.shape:
        raise ValueError(f"{good.shape} grammatical scores vs {bad.shape} ungrammatical ones")
    return good < bad, int(np.sum(good == bad))
