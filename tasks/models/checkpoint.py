"""The decoder's checkpoint: the directory a ``decoder_lm`` cell leaves in its workdir and the
lm-evaluation-harness adapter (:mod:`tasks.lmeval.harness`) loads.

    decoder.safetensors   the weights (safetensors)
    decoder.json          metadata: ``model`` (the :class:`DecoderConfig` fields), ``fingerprint``
                          of the training configuration, and what the writer adds
    tokenizer.json        the byte-level BPE tokenizer
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model

from ..data.bpe import TextTokenizer
from .decoder import Decoder, DecoderConfig

CHECKPOINT = "decoder.safetensors"
CHECKPOINT_META = "decoder.json"
TOKENIZER = "tokenizer.json"


def save_checkpoint(workdir: Path, model: Decoder, tokenizer: TextTokenizer, meta: dict) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    save_model(model, str(workdir / CHECKPOINT))
    tokenizer.save(workdir / TOKENIZER)
    (workdir / CHECKPOINT_META).write_text(json.dumps(meta, indent=1, sort_keys=True))


def load_checkpoint(workdir: Path, device: torch.device | str = "cpu"
                    ) -> tuple[Decoder, TextTokenizer, dict]:
    """A trained decoder, its tokenizer and its metadata from a checkpoint directory."""
    workdir = Path(workdir)
    for name in (CHECKPOINT, CHECKPOINT_META, TOKENIZER):
        if not (workdir / name).is_file():
            raise FileNotFoundError(f"{workdir} is not a decoder_lm checkpoint: {name} is missing "
                                    f"(a decoder_lm cell writes {CHECKPOINT}, {CHECKPOINT_META} and "
                                    f"{TOKENIZER} into its workdir)")
    meta = json.loads((workdir / CHECKPOINT_META).read_text())
    model = Decoder(DecoderConfig(**meta["model"]), seed=None)
    load_model(model, str(workdir / CHECKPOINT), device=str(device))
    return model.to(device).eval(), TextTokenizer.load(workdir / TOKENIZER), meta
