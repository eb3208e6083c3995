"""The zero-shot / k-shot benchmarks, prompted and scored exactly as lm-evaluation-harness 0.4.

Three request kinds, as lm-eval's ``ConfigurableTask``:

- ``multiple_choice`` (arc_easy, arc_challenge, boolq, piqa, hellaswag): one request per
  choice, ``(context, " " + choice)``; ``acc`` = [argmax ll == gold], ``acc_norm`` = [argmax
  ll / len(choice) == gold] with ``len`` in characters of the choice without the delimiter.
- ``multiple_input`` (winogrande, partial scoring): the choices are contexts and one target
  ``" " + continuation`` is scored under each; ``acc`` = [argmax ll == gold].
- ``loglikelihood`` (lambada_openai): ``(context, " " + last word)``; ``acc`` = is_greedy and
  ``perplexity`` = exp(-mean ll).

k-shot: the shots (``"\\n\\n"``-separated, each rendered as ``text + " " + target``) precede the
item. lm-eval draws ``k + 1`` documents per item from one ``random.Random(1234)`` when the
shots come from the evaluated split and drops the item itself; the staged files have no train
split, so this is how scorebench draws them too (a recorded deviation from lm-eval's train-split
shots).
"""
from __future__ import annotations

import bz2
import json
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..data.files import data_path

TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
FEWSHOT_SEED = 1234


@dataclass(frozen=True)
class Doc:
    """One evaluation item in lm-eval's terms.

    ``text`` is ``doc_to_text`` (empty for ``multiple_input``), ``choices`` is ``doc_to_choice``
    (the contexts for ``multiple_input``), ``gold`` the index of the right choice, ``target``
    the scored continuation of ``multiple_input`` and ``loglikelihood`` items.
    """

    text: str
    choices: tuple[str, ...] = ()
    gold: int = 0
    target: str = ""


@dataclass(frozen=True)
class Benchmark:
    name: str
    source: str
    kind: str  # multiple_choice | multiple_input | loglikelihood
    metrics: tuple[str, ...]
    headline: str
    size: int

    def docs(self) -> list[Doc]:
        return list(_load(self.name))


MC, ACC, BOTH = "multiple_choice", ("acc",), ("acc", "acc_norm")
BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in [
    Benchmark("arc_easy", "zeroshot/arc_easy.jsonl", MC, BOTH, "acc_norm", 2376),
    Benchmark("arc_challenge", "zeroshot/arc_challenge.jsonl", MC, BOTH, "acc_norm", 1172),
    Benchmark("boolq", "zeroshot/boolq.jsonl", MC, ACC, "acc", 3270),
    Benchmark("piqa", "zeroshot/piqa.jsonl", MC, BOTH, "acc_norm", 1838),
    Benchmark("hellaswag", "zeroshot/hellaswag_val_full.txt.bz2", MC, BOTH, "acc_norm", 10042),
    Benchmark("winogrande", "zeroshot/winogrande.jsonl", "multiple_input", ACC, "acc", 1267),
    Benchmark("lambada_openai", "zeroshot/lambada_openai.jsonl", "loglikelihood",
              ("acc", "perplexity"), "acc", 5153),
]}


def _jsonl(source: str) -> list[dict]:
    with data_path(source).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hellaswag_preprocess(text: str) -> str:
    """lm-eval ``hellaswag.utils.preprocess``."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


def hellaswag_capitalize(context: str) -> str:
    """Approximates lm-eval's ``ctx_b.capitalize()`` on the staged ``ctx_a + " " + ctx_b``.

    Upper-cases the first letter after the last ``". "``, ``"! "`` or ``"? "`` (after the first
    ``": "``, the activity label's separator, when there is none).
    """
    cut = max(context.rfind(". "), context.rfind("! "), context.rfind("? "))
    if cut < 0:
        cut = context.find(": ")
    if cut < 0:
        return context
    start = cut + 2
    return context[:start] + context[start:start + 1].upper() + context[start + 1:]


def hellaswag_docs(lines: Sequence[str]) -> list[Doc]:
    """Items of 6 lines: ``"{activity_label}: {ctx}"``, gold label, 4 endings."""
    lines = list(lines)
    while lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 6:
        raise ValueError(f"HellaSwag file has {len(lines)} lines, not a multiple of 6")
    docs = []
    for i in range(0, len(lines), 6):
        context, gold, *endings = lines[i:i + 6]
        docs.append(Doc(hellaswag_preprocess(hellaswag_capitalize(context)),
                        tuple(hellaswag_preprocess(e) for e in endings), int(gold)))
    return docs


def boolq_text(query: str) -> str:
    """``"{passage}\\nQuestion: {question}?\\nAnswer:"`` from the staged
    ``"Passage: {passage}\\nQuestion: {question}?"``."""
    prefix = "Passage: "
    if not query.startswith(prefix):
        raise ValueError(f"BoolQ query does not start with {prefix!r}: {query[:60]!r}")
    return query[len(prefix):] + "\nAnswer:"


@lru_cache(maxsize=None)
def _load(name: str) -> tuple[Doc, ...]:
    bench = BENCHMARKS[name]
    if name == "hellaswag":
        with bz2.open(data_path(bench.source), "rt", encoding="utf-8") as f:
            return tuple(hellaswag_docs(f.read().split("\n")))
    rows = _jsonl(bench.source)
    if name in ("arc_easy", "arc_challenge"):
        docs = [Doc(r["query"] + "\nAnswer:", tuple(r["choices"]), r["gold"]) for r in rows]
    elif name == "boolq":
        docs = [Doc(boolq_text(r["query"]), ("no", "yes"), r["gold"]) for r in rows]
    elif name == "piqa":
        docs = [Doc(r["query"] + "Answer:", tuple(r["choices"]), r["gold"]) for r in rows]
    elif name == "winogrande":
        docs = [Doc("", tuple(r["context_options"]), r["gold"], r["continuation"]) for r in rows]
    else:  # lambada_openai
        docs = [Doc(r["context"], (), 0, " " + r["continuation"]) for r in rows]
    return tuple(docs)


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def render_shot(kind: str, doc: Doc) -> str:
    """One labelled example as lm-eval's sampler writes it, without the trailing delimiter."""
    if kind == "multiple_choice":
        return doc.text + TARGET_DELIMITER + doc.choices[doc.gold]
    if kind == "multiple_input":
        return doc.choices[doc.gold] + TARGET_DELIMITER + doc.target
    return doc.text + TARGET_DELIMITER + doc.target  # lambada's target starts with " " too


def fewshot_prefixes(kind: str, docs: Sequence[Doc], indices: Sequence[int], n_shot: int,
                     seed: int = FEWSHOT_SEED) -> list[str]:
    """The k-shot prefix of each evaluated item (``""`` when ``n_shot`` is 0), drawn as lm-eval
    draws them."""
    if n_shot == 0:
        return ["" for _ in indices]
    if n_shot + 1 > len(docs):
        raise ValueError(f"n_shot={n_shot} needs at least {n_shot + 1} documents, have {len(docs)}")
    rnd = random.Random(seed)
    prefixes = []
    for i in indices:
        drawn = rnd.sample(range(len(docs)), n_shot + 1)
        shots = [docs[j] for j in drawn if docs[j] != docs[i]][:n_shot]
        prefixes.append("".join(render_shot(kind, s) + FEWSHOT_DELIMITER for s in shots))
    return prefixes


def build_requests(kind: str, doc: Doc, prefix: str = "") -> list[tuple[str, str]]:
    """The (context, continuation) requests of one item."""
    if kind == "multiple_choice":
        ctx = prefix + doc.text
        return [(ctx, TARGET_DELIMITER + c) for c in doc.choices]
    if kind == "multiple_input":
        return [(prefix + c, TARGET_DELIMITER + doc.target) for c in doc.choices]
    if kind == "loglikelihood":
        return [(prefix + doc.text, doc.target)]
    raise ValueError(f"unknown request kind {kind!r}")


def score_item(kind: str, doc: Doc, results: Sequence[tuple[float, bool]]) -> dict[str, float]:
    """Per-item outcomes from the (ll, is_greedy) results of :func:`build_requests`."""
    if kind == "loglikelihood":
        (ll, greedy), = results
        return {"acc": float(greedy), "ll": ll}
    lls = np.array([r[0] for r in results])
    out = {"acc": float(int(np.argmax(lls)) == doc.gold)}
    if kind == "multiple_choice":
        lengths = np.array([float(len(c)) for c in doc.choices])
        out["acc_norm"] = float(int(np.argmax(lls / lengths)) == doc.gold)
    return out


def aggregate(bench: Benchmark, items: dict[str, list[float]]) -> dict[str, float]:
    """Benchmark metrics from per-item outcomes (means; lambada perplexity = exp(-mean ll))."""
    out = {m: float(np.mean(items[m])) for m in bench.metrics if m in items}
    if "perplexity" in bench.metrics:
        out["perplexity"] = math.exp(-float(np.mean(items["ll"])))
    return out


def majority_baseline(bench: Benchmark, docs: Sequence[Doc]) -> float | None:
    """The best always-the-same-position accuracy on ``docs`` (None for lambada)."""
    if bench.kind == "loglikelihood":
        return None
    golds = np.array([d.gold for d in docs])
    return float(max(np.mean(golds == k) for k in range(max(len(d.choices) for d in docs))))


def select_items(bench: Benchmark, limit: int | None) -> list[int]:
    """The evaluated items: the first ``limit`` of the file (lm-eval's ``--limit``), or all."""
    n = bench.size if limit is None or limit < 0 else min(limit, bench.size)
    return list(range(n))
