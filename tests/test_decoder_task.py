"""The decoder_lm task: config validation, schedule, training failures, checkpoint round-trip, an
end-to-end run with resume from the checkpoint, and the lm-evaluation-harness adapter."""
from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
import torch

from suite.profiles import PROFILE_DIR
from leaderboard.loading.schema import validate_items
from tasks import RunContext, TaskError, TrainingFailure, create_task
from tasks.data.bpe import train_bpe
from tasks.decoder_lm import DecoderLMConfig, lr_at, train
from tasks.models.checkpoint import (CHECKPOINT, CHECKPOINT_META, TOKENIZER, load_checkpoint,
                                     save_checkpoint)
from tasks.lmeval.scoring import LogLikelihoodScorer
from tasks.models.decoder import Decoder, DecoderConfig
from tasks.training import scorer_parameter_values

from decoder_support import needs_data

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TEXTS = ["the cat sat on the mat. ", "a dog and a log. ", "Question: what?\nAnswer: yes"] * 30
TINY = dict(max_len=32, n_layer=1, dim=32, n_head=4, n_kv_head=2, ffn_dim=64)


def tiny_model(vocab, scorer="softmax", seed=0):
    return Decoder(DecoderConfig(vocab_size=vocab, scorer=scorer, **TINY), seed=seed)


def test_config_validation_names_the_bad_key_or_value():
    task = create_task("decoder_lm")
    assert task.track == "decoder"
    with pytest.raises(TaskError, match="n_shots"):
        task.config({"n_shots": 5})
    with pytest.raises(TaskError, match="'mmlu'"):
        task.config({"benchmarks": ["arc_easy", "mmlu"]})
    with pytest.raises(TaskError, match="ppl_protocol"):
        task.config({"ppl_protocol": "strided"})
    with pytest.raises(TaskError, match="corpus"):
        task.config({"corpus": "fineweb"})
    for name in ("smoke", "cpu", "gpu", "paper"):
        section = tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text())["tasks"]["decoder_lm"]
        task.config(section)
    assert {m.direction for n, m in task.metrics.items() if "perplexity" in n} == {"lower"}
    assert task.metrics["arc_easy_acc_norm"].direction == "higher"
    assert task.metrics["arc_easy_acc_norm"].headline and not task.metrics["arc_easy_acc"].headline


def test_learning_rate_warms_up_linearly_then_decays_by_cosine():
    cfg = DecoderLMConfig(steps=110, warmup_steps=10, lr=1e-3, min_lr=1e-4)
    assert lr_at(0, cfg) == pytest.approx(1e-4)
    assert lr_at(9, cfg) == pytest.approx(1e-3)
    assert lr_at(10, cfg) == pytest.approx(1e-3)
    assert lr_at(60, cfg) == pytest.approx(1e-4 + 0.5 * 9e-4)
    assert lr_at(110, cfg) == pytest.approx(1e-4)
    assert lr_at(35, cfg) == pytest.approx(1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * 0.25)))


def test_non_finite_and_diverging_losses_raise_training_failure():
    stream = np.arange(400, dtype=np.int32) % 50
    cfg = DecoderLMConfig(steps=5, batch_size=2, warmup_steps=0, log_every=1, **TINY)
    model = tiny_model(50)
    with torch.no_grad():
        model.ln_f.bias[0] = float("nan")
    with pytest.raises(TrainingFailure) as err:
        train(model, stream, cfg, 0, RunContext(), autocast=False)
    assert err.value.status == "nan" and err.value.step == 0
    cfg = DecoderLMConfig(steps=5, batch_size=2, warmup_steps=0, log_every=1,
                          diverge_factor=0.5, **TINY)  # threshold below the initial loss ln(50)
    with pytest.raises(TrainingFailure) as err:
        train(tiny_model(50), stream, cfg, 0, RunContext(), autocast=False)
    assert err.value.status == "diverged" and err.value.step == 0


def test_training_is_seeded():
    stream = (np.arange(2000, dtype=np.int64) * 7919 % 50).astype(np.int32)
    cfg = DecoderLMConfig(steps=4, batch_size=2, warmup_steps=1, log_every=2, **TINY)
    a, b, c = tiny_model(50, seed=1), tiny_model(50, seed=1), tiny_model(50, seed=2)
    curves = [train(m, stream, cfg, s, RunContext(), autocast=False)["loss_curve"]["loss"]
              for m, s in ((a, 1), (b, 1), (c, 2))]
    assert curves[0] == curves[1] != curves[2]
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_a_dense_curve_adds_evenly_spaced_validation_points_and_enters_the_cell_only_when_set():
    from registry.settings import effective
    from tasks.decoder_lm import ValidationWindows
    from tasks.encoder_mlm import EncoderMLMConfig

    stream = (np.arange(4000, dtype=np.int64) * 7919 % 50).astype(np.int32)
    cfg = DecoderLMConfig(steps=40, batch_size=2, warmup_steps=1, log_every=10,
                          dense_curve_points=8, **TINY)
    class Docs(list):
        tokens = [stream[:2000]]

    windows = ValidationWindows(Docs([0]), cfg, autocast=False)
    out = train(tiny_model(50), stream, cfg, 0, RunContext(), autocast=False, validation=windows)
    steps = out["validation_curve"]["step"]
    assert {5, 10, 15, 20, 25, 30, 35, 40} <= set(steps)             # every 40 / 8 steps
    assert {1, 2, 3} <= set(steps)                                     # and the log-spaced ones
    for config in (DecoderLMConfig, EncoderMLMConfig):
        assert "dense_curve_points" not in effective(config())         # cell ids as before
        assert effective(config(dense_curve_points=20))["dense_curve_points"] == 20


@pytest.mark.parametrize("scorer", ["softmax", "ssa"])
def test_checkpoint_round_trip_gives_identical_loglikelihoods(tmp_path, scorer):
    tok = train_bpe(TEXTS, 300)
    stream = np.array([t for s in tok.encode_batch(TEXTS) for t in [tok.eot_id] + s], np.int32)
    cfg = DecoderLMConfig(steps=3, batch_size=2, warmup_steps=1, lr=1e-2, **TINY)
    model = tiny_model(tok.vocab_size, scorer)
    train(model, stream, cfg, 0, RunContext(), autocast=False)
    save_checkpoint(tmp_path, model, tok, {"model": {**model.cfg.__dict__}, "fingerprint": "x"})
    assert {p.name for p in tmp_path.iterdir()} == {CHECKPOINT, CHECKPOINT_META, TOKENIZER}
    loaded, tok2, meta = load_checkpoint(tmp_path)
    assert tok2.sha256 == tok.sha256 and meta["fingerprint"] == "x"
    requests = [("Question: what?\nAnswer:", " yes"), ("the cat", " sat on the mat."), ("", "a dog")]
    before = LogLikelihoodScorer(model, tok, max_length=32).loglikelihood(requests)
    after = LogLikelihoodScorer(loaded, tok2, max_length=32).loglikelihood(requests)
    assert before == after
    assert scorer_parameter_values(loaded) == scorer_parameter_values(model)
    with pytest.raises(FileNotFoundError, match=CHECKPOINT):
        load_checkpoint(tmp_path / "nowhere")


SMOKE = dict(corpus="toy", vocab_size=300, steps=4, batch_size=2, warmup_steps=1,
             log_every=2, ppl_sets=["heldout", "c4"], ppl_max_docs=3,
             benchmarks=["arc_easy", "boolq", "winogrande", "lambada_openai"], max_items=6, **TINY)


def toy_corpus(split):
    from tasks.data.corpora import document
    texts = {"train": TEXTS, "validation": TEXTS[:2], "test": ["the dog sat on a log. " * 20] * 3}
    return [document(f"toy/{split}#{i}", t) for i, t in enumerate(texts[split])]


@needs_data
def test_end_to_end_cell_writes_items_baselines_and_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    from tasks.data import corpora
    monkeypatch.setenv("SCOREBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(corpora.TRAINING_CORPORA, "toy", (toy_corpus, (corpora.SHAKESPEARE_SOURCE,)))
    task = create_task("decoder_lm")
    ctx = RunContext(workdir=tmp_path / "cell")
    first = task.run("softmax", {}, 0, task.config(SMOKE), ctx)
    assert first.step == 4 and not first.extra["resumed_from_checkpoint"]
    expected = {"train_loss", "heldout_perplexity", "heldout_bits_per_byte", "c4_word_perplexity",
                "arc_easy_acc", "arc_easy_acc_norm", "winogrande_acc", "lambada_openai_acc",
                "lambada_openai_perplexity", "lambada_openai_nll"}
    assert expected <= set(first.metrics) <= set(task.metrics)
    validate_items(first.items, first.metrics)  # the record rule: the mean of items is the metric
    assert len(first.items["arc_easy_acc"]) == 6 and len(first.items["c4_bits_per_byte"]) == 3
    assert first.metrics["heldout_bits_per_byte"] == pytest.approx(
        math.log(first.metrics["heldout_byte_perplexity"]) / math.log(2))
    assert set(first.extra["baselines"]) == {"arc_easy_acc", "arc_easy_acc_norm", "boolq_acc",
                                             "winogrande_acc"}
    assert "boolq_acc_norm" not in first.items  # boolq is scored by acc only
    assert set(first.extra["below_baseline"]) <= set(first.extra["baselines"])
    json.dumps(first.extra)
    val = first.extra["validation"]
    assert val["metric"] == "val_loss" and val["curve"]["step"][-1] == 4 and 0 < val["value"]
    second = task.run("softmax", {}, 0, task.config(SMOKE), ctx)
    assert second.extra["resumed_from_checkpoint"] and second.metrics == first.metrics
    assert second.extra["validation"] == val
    sweep = task.run("softmax", {}, 0, task.config(SMOKE),
                     RunContext(workdir=tmp_path / "sweep", sweep=True))
    assert set(sweep.metrics) == {"train_loss"} and sweep.extra["validation"] == val
    shots = task.run("softmax", {}, 0, task.config({**SMOKE, "n_shot": 2}), ctx)
    assert shots.extra["resumed_from_checkpoint"]
    assert shots.metrics["heldout_perplexity"] == first.metrics["heldout_perplexity"]
    retrained = task.run("softmax", {}, 1, task.config(SMOKE), ctx)
    assert not retrained.extra["resumed_from_checkpoint"]


LOCAL_TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{query}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{gold}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""

ROLLING_TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{page}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""


def test_lm_eval_adapter_scores_a_local_task_like_scorebench(tmp_path, monkeypatch):
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    import tasks.lmeval.harness  # noqa: F401  (registers the "scorebench" model)
    from tasks.lmeval.benchmarks import Doc, build_requests, score_item
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    tok = train_bpe(TEXTS, 300)
    model = tiny_model(tok.vocab_size)
    ckpt = tmp_path / "ckpt"
    save_checkpoint(ckpt, model, tok, {"model": {**model.cfg.__dict__}, "fingerprint": "x"})
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "mat", "log", "sat", "a", "the", "yes", "no"]
    docs = [{"query": "Question: " + " ".join(rng.choice(words, 4)) + "?\nAnswer:",
             "choices": [" ".join(rng.choice(words, k)) for k in (1, 2, 3)],
             "gold": int(rng.integers(3))} for _ in range(12)]
    pages = [{"page": " ".join(rng.choice(words, 60)) + " ."} for _ in range(3)]
    for name, rows, template in (("sb_mc", docs, LOCAL_TASK), ("sb_roll", pages, ROLLING_TASK)):
        data = tmp_path / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tmp_path / f"{name}.yaml").write_text(template.format(name=name, data=data))
    out = lm_eval.simple_evaluate(model="scorebench", model_args=f"checkpoint={ckpt},device=cpu",
                                  tasks=["sb_mc", "sb_roll"],
                                  task_manager=TaskManager(include_path=str(tmp_path),
                                                           include_defaults=False))
    got = out["results"]
    llm = LogLikelihoodScorer(model.eval(), tok, max_length=32)
    ours = {"acc": [], "acc_norm": []}
    for d in docs:
        doc = Doc(d["query"], tuple(d["choices"]), d["gold"])
        reqs = build_requests("multiple_choice", doc)
        for k, v in score_item("multiple_choice", doc, llm.loglikelihood(reqs)).items():
            ours[k].append(v)
    assert got["sb_mc"]["acc,none"] == pytest.approx(np.mean(ours["acc"]))
    assert got["sb_mc"]["acc_norm,none"] == pytest.approx(np.mean(ours["acc_norm"]))
    lls = llm.loglikelihood_rolling([tok.encode(p["page"]) for p in pages])
    n_bytes = sum(len(p["page"].encode()) for p in pages)
    assert got["sb_roll"]["byte_perplexity,none"] == pytest.approx(math.exp(-sum(lls) / n_bytes),
                                                                   rel=1e-6)


@pytest.mark.slow
@needs_data
def test_smoke_profile_cell_runs_end_to_end(tmp_path):
    # The smoke profile's training (CI runs its softmax cell); evaluation on fewer items.
    task = create_task("decoder_lm")
    section = tomllib.loads((PROFILE_DIR / "smoke.toml").read_text())["tasks"]["decoder_lm"]
    section = {**section, "max_items": 10, "heldout_max_tokens": 2000, "ppl_max_tokens": 1000,
               "ppl_sets": ["heldout", "wikipedia"]}
    res = task.run("ssa", {}, 0, task.config(section), RunContext(workdir=tmp_path))
    validate_items(res.items, res.metrics)
    assert all(math.isfinite(v) for v in res.metrics.values())
    assert res.metrics["heldout_perplexity"] < res.extra["vocab_size"]  # it learned something
    assert len(res.items["hellaswag_acc_norm"]) == section["max_items"]


def test_evaluation_caps_keep_leading_documents_within_the_budget():
    from tasks.decoder_lm import leading_documents
    from tasks.data.lm_data import TokenizedDocuments
    tok = train_bpe(TEXTS, 300)
    texts = ["the cat sat on the mat. " * 3, "a dog and a log. ", "yes"]
    ids = [np.array(t) for t in tok.encode_batch(texts)]
    docs = TokenizedDocuments("x", ["a", "b", "c"], ids, np.array([18, 5, 1]),
                              np.array([len(t) for t in texts]))
    n0, n1 = len(ids[0]), len(ids[1])
    assert leading_documents(docs, -1, -1, tok).doc_ids == ["a", "b", "c"]
    assert leading_documents(docs, 2, -1, tok).doc_ids == ["a", "b"]
    assert leading_documents(docs, -1, n0 + n1, tok).doc_ids == ["a", "b"]
    assert leading_documents(docs, -1, n0 + n1 - 1, tok).doc_ids == ["a"]
    cut = leading_documents(docs, -1, 4, tok)  # the first document is cut to its first 4 tokens
    text = tok.decode(ids[0][:4].tolist())
    assert cut.tokens[0].tolist() == ids[0][:4].tolist() and text == texts[0][:len(text)]
    assert (cut.words.tolist(), cut.bytes.tolist()) == ([len(text.split())], [len(text.encode())])


def test_lm_eval_adapter_generates_greedily_until_a_stop_string(tmp_path):
    pytest.importorskip("lm_eval")
    from types import SimpleNamespace

    from tasks.lmeval.harness import ScorebenchLM
    tok = train_bpe(TEXTS, 300)
    model = tiny_model(tok.vocab_size, seed=4)
    save_checkpoint(tmp_path, model, tok, {"model": {**model.cfg.__dict__}, "fingerprint": "x"})
    lm = ScorebenchLM(checkpoint=str(tmp_path), device="cpu", batch_size=8)
    ids = tok.encode("the cat")
    greedy = []
    with torch.no_grad():
        for _ in range(6):
            nxt = int(model.eval()(torch.tensor([ids + greedy]))[0, -1].argmax())
            if nxt == tok.eot_id:
                break
            greedy.append(nxt)
    full = tok.decode(greedy)
    req = SimpleNamespace(args=("the cat", {"until": ["\n\n"], "max_gen_toks": 6}))
    assert lm.generate_until([req]) == [full.split("\n\n")[0]]
    if len(full) > 1:
        stop = full[1:]  # a stop string found in the generation cuts it there
        req = SimpleNamespace(args=("the cat", {"until": [stop], "max_gen_toks": 6}))
        assert lm.generate_until([req]) == [full.split(stop)[0]]
    with pytest.raises(ValueError, match="max_length"):
        ScorebenchLM(checkpoint=str(tmp_path), device="cpu", max_length=64)
