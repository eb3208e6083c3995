"""Evaluation of a masked LM (``encoder_mlm``), as BabyBERTa does it:

- Zorro (``tasks.data.zorro``), holistic scoring: the mean token cross-entropy of each unmasked
  sentence (``<s>`` and ``</s>`` included), the lower of a pair wins, ties wrong.
- the MLM loss on held-out sentences masked once with a fixed seed (the same corruption for every
  cell), mean cross-entropy over the corrupted positions.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch.nn import functional as F

from ..data import zorro
from ..data.mlm_data import corrupt, load_data, pad_batch
from ..training import autocast


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
        with autocast(device, device.type == "cuda"):
            hidden = model(ids_t, torch.from_numpy(valid).to(device))
            logits = model.logits(hidden)
        ce = F.cross_entropy(logits.float().flatten(0, 1), ids_t.flatten(), reduction="none")
        out[idx] = ce.view(ids_t.shape).mean(1).double().cpu().numpy()
    return out


# The last held-out sentences: the validation metric's (tuning, learning curves), never reported.
VALIDATION_SENTENCES = 2000


@lru_cache(maxsize=4)
def masked_validation(objective: str, mask_probability: float, mask_seed: int, count: int,
                      vocab_size: int, part: str = "reported") -> tuple:
    """Held-out sentences corrupted once, sentence by sentence, from ``mask_seed``: the same
    inputs for every cell, whatever the batch size. ``part = "reported"``: the first ``count``
    (0: all) of the held-out sentences before the last ``VALIDATION_SENTENCES``; ``"validation"``:
    the first ``count`` (0: all) of those last ones."""
    seqs = load_data().val
    if part not in ("reported", "validation"):
        raise ValueError(f"part must be 'reported' or 'validation', got {part!r}")
    cut = max(0, len(seqs) - VALIDATION_SENTENCES)
    seqs = seqs[cut:] if part == "validation" else seqs[:cut]
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
        with autocast(device, device.type == "cuda"):
            hidden = model(torch.from_numpy(inputs).to(device), torch.from_numpy(valid).to(device))
            logits = model.logits(hidden[torch.from_numpy(selected).to(device)])
        target = torch.from_numpy(targets[selected]).to(device)
        total += float(F.cross_entropy(logits.float(), target, reduction="sum"))
        count += int(selected.sum())
    return total / max(count, 1), count


def zorro_scores(model, pairs: dict[str, tuple[list, list]], n: int, device: torch.device,
                 batch_size: int = 256, report=None) -> tuple[dict, dict, dict]:
    """Per paradigm of ``pairs`` (paradigm -> (grammatical, ungrammatical)), the first ``n`` pairs
    scored holistically: metrics ``zorro.<paradigm>`` (% correct) and ``zorro_overall`` (mean of the
    paradigms), per-pair outcomes (100 correct / 0 wrong) and the ties of each paradigm.
    ``report(k)`` is called after the k-th paradigm."""
    metrics, items, ties, overall = {}, {}, {}, []
    for k, (paradigm, (good, bad)) in enumerate(pairs.items()):
        ce_good = holistic_cross_entropy(model, good[:n], device, batch_size)
        ce_bad = holistic_cross_entropy(model, bad[:n], device, batch_size)
        correct, ties[paradigm] = zorro.pair_outcomes(ce_good, ce_bad)
        outcome = [100 if c else 0 for c in correct]
        metrics[f"zorro.{paradigm}"] = float(np.mean(outcome))
        items[f"zorro.{paradigm}"] = outcome
        overall += outcome
        if report is not None:
            report(k + 1)
    metrics["zorro_overall"] = float(np.mean([metrics[f"zorro.{p}"] for p in pairs]))
    items["zorro_overall"] = overall
    return metrics, items, ties
