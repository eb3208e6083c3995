"""lm-evaluation-harness adapter: the ``lm_eval`` model ``scorebench`` loads a decoder_lm checkpoint.

Optional extra ``scorebench[lmeval]``. Importing this module registers the model, so either

    import tasks.lmeval.harness, lm_eval
    lm_eval.simple_evaluate(model="scorebench", model_args="checkpoint=RESULTS/…/workdir",
                            tasks=["arc_easy"])

or, from a shell (the ``lm_eval`` command line with the model registered first)

    python -m tasks.lmeval.harness --model scorebench --model_args checkpoint=DIR --tasks arc_easy

The checkpoint directory is a decoder_lm cell's workdir (``decoder.safetensors``,
``decoder.json``, ``tokenizer.json``). Log-likelihoods go through the same
:class:`~tasks.lmeval.scoring.LogLikelihoodScorer` as scorebench's own evaluation, so both
give the same numbers on the same requests.
"""
from __future__ import annotations

import torch

try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the lm-evaluation-harness adapter needs the optional extra: "
                      "pip install 'scorebench[lmeval]' (or pip install lm_eval)") from err

from ..models.checkpoint import load_checkpoint
from .scoring import LogLikelihoodScorer


@register_model("scorebench")
class ScorebenchLM(LM):
    """``model_args``: ``checkpoint`` (required), ``device``, ``batch_tokens``, ``max_length``
    (at most the model's context), ``add_bos``; lm-eval's ``batch_size`` is ignored (batches
    are packed by token count)."""

    def __init__(self, checkpoint: str, device: str | None = None, batch_tokens: int = 8192,
                 max_length: int | None = None, add_bos: bool = False, **_ignored):
        super().__init__()
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model, tokenizer, meta = load_checkpoint(checkpoint, device)
        context = model.cfg.max_len
        max_length = int(max_length or context)
        if max_length > context:
            raise ValueError(f"max_length={max_length} exceeds the checkpoint's context {context}")
        self.model, self.tokenizer, self.meta = model, tokenizer, meta
        self.llm = LogLikelihoodScorer(model, tokenizer, max_length=max_length, device=device,
                                       batch_tokens=int(batch_tokens),
                                       add_bos=str(add_bos).lower() in ("1", "true", "yes"))

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eot_id

    @property
    def max_length(self) -> int:
        return self.llm.max_length

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        return self.llm.loglikelihood([req.args for req in requests])

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        return self.llm.loglikelihood_rolling([self.tokenizer.encode(req.args[0])
                                               for req in requests])

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy decoding until a stop string or ``max_gen_toks`` tokens (default 256)."""
        out = []
        for req in requests:
            context, kwargs = req.args
            until = kwargs.get("until") or [self.tokenizer.decode([self.eot_token_id])]
            until = [until] if isinstance(until, str) else list(until)
            max_gen = int(kwargs.get("max_gen_toks", 256))
            ids = self.tokenizer.encode(context) or [self.eot_token_id]
            generated: list[int] = []
            text = ""
            for _ in range(max_gen):
                window = (ids + generated)[-self.max_length:]
                with torch.no_grad():
                    logits = self.model(torch.tensor([window], device=self.llm.device))
                nxt = int(logits[0, -1].argmax())
                if nxt == self.eot_token_id:
                    break
                generated.append(nxt)
                text = self.tokenizer.decode(generated)
                if any(s in text for s in until):
                    break
            for s in until:
                text = text.split(s)[0]
            out.append(text)
        return out


def main() -> None:
    """The ``lm_eval`` command line, with the ``scorebench`` model registered."""
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
