"""lm-evaluation-harness 0.4 rules, checked on hand-worked items with toy tokenizers and models
whose log-probabilities are chosen numbers: request encoding, scoring, prompt formats, k-shot,
left truncation, rolling windows."""
from __future__ import annotations

import math
import random
import re

import numpy as np
import pytest

from tasks.lmeval.benchmarks import (BENCHMARKS, Doc, aggregate, build_requests, boolq_text,
                                     fewshot_prefixes, get_benchmark, hellaswag_capitalize,
                                     hellaswag_docs, hellaswag_preprocess, majority_baseline,
                                     score_item)
from tasks.lmeval.scoring import (LogLikelihoodScorer, get_rolling_token_windows,
                                  make_disjoint_window, rolling_requests)

from decoder_support import BigramModel, FirstTokenModel, GreedyTokenizer, bigram_table, needs_data

ALPHABET = "abcdefghijklmnopqrstuvwxyzQA :?.\n"


def scorer_for(model, tok, L=64, **kw):
    return LogLikelihoodScorer(model, tok, max_length=L, **kw)


# --- request encoding -----------------------------------------------------------------------

def test_trailing_whitespace_moves_to_the_continuation():
    tok = GreedyTokenizer(ALPHABET, merges=(" y",))
    llm = scorer_for(BigramModel(bigram_table(tok, {})), tok)
    # "x " + "y": the space joins the continuation, which then tokenizes as the merge " y".
    assert llm.encode_pair("x ", "y") == ([tok.ids["x"]], [tok.ids[" y"]])
    # without the move the context would end in " " and the continuation would be empty
    assert tok.encode("x ") == [tok.ids["x"], tok.ids[" "]]
    assert llm.encode_pair("x \n ", "y") == ([tok.ids["x"]], tok.encode(" \n y"))


def test_continuation_is_whole_minus_context_tokens():
    tok = GreedyTokenizer(ALPHABET, merges=("ab",))
    llm = scorer_for(BigramModel(bigram_table(tok, {})), tok)
    # tok("abc") = [ab, c] and tok("a") = [a]: the continuation is [c] (lm-eval's rule), not [b, c]
    assert llm.encode_pair("a", "bc") == ([tok.ids["a"]], [tok.ids["c"]])
    # an empty context is replaced by the end-of-text token
    assert llm.encode_pair("", " ab") == ([tok.eot_id], [tok.ids[" "], tok.ids["ab"]])
    bos = scorer_for(BigramModel(bigram_table(tok, {})), tok, add_bos=True)
    assert bos.encode_pair("c", " d") == ([tok.eot_id, tok.ids["c"]], tok.encode(" d"))


# --- scoring rules --------------------------------------------------------------------------

def test_acc_and_acc_norm_differ_on_a_constructed_item():
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {(":", " "): 0.5, (" ", "a"): 0.5, (" ", "b"): 0.3,
                                           ("b", "b"): 0.6}))
    llm = scorer_for(model, tok)
    doc = Doc("Q:", ("a", "bbbb"), gold=1)
    reqs = build_requests("multiple_choice", doc)
    assert reqs == [("Q:", " a"), ("Q:", " bbbb")]
    results = llm.loglikelihood(reqs)
    ll_a = math.log(0.5) + math.log(0.5)
    ll_b = math.log(0.5) + math.log(0.3) + 3 * math.log(0.6)
    assert results[0][0] == pytest.approx(ll_a, abs=1e-5)
    assert results[1][0] == pytest.approx(ll_b, abs=1e-5)
    # acc: argmax ll = "a" (wrong); acc_norm: argmax ll / len(choice) = "bbbb" (right)
    assert ll_a > ll_b and ll_b / 4 > ll_a / 1
    assert score_item("multiple_choice", doc, results) == {"acc": 0.0, "acc_norm": 1.0}


def test_winogrande_partial_scoring_scores_only_the_shared_continuation():
    tok = GreedyTokenizer(ALPHABET)
    chosen = {("p", " "): 0.1, ("x", " "): 0.6, ("o", "x"): 0.001, ("u", "p"): 0.5}
    model = BigramModel(bigram_table(tok, chosen))
    llm = scorer_for(model, tok)
    doc = Doc("", ("the cup", "the box"), gold=1, target="is big.")
    reqs = build_requests("multiple_input", doc)
    assert reqs == [("the cup", " is big."), ("the box", " is big.")]
    results = llm.loglikelihood(reqs)
    ids = tok.ids
    tail = sum(model.logp(ids[a], ids[b]) for a, b in zip(" is big", "is big."))
    assert results[0][0] == pytest.approx(math.log(0.1) + tail, abs=1e-5)
    assert results[1][0] == pytest.approx(math.log(0.6) + tail, abs=1e-5)

    def sentence_ll(text):  # full-sentence scoring, which partial scoring is not
        t = [tok.eot_id] + tok.encode(text)
        return sum(model.logp(a, b) for a, b in zip(t[:-1], t[1:]))

    assert sentence_ll("the cup is big.") > sentence_ll("the box is big.")
    assert score_item("multiple_input", doc, results) == {"acc": 1.0}


def test_lambada_acc_is_the_greedy_match_and_perplexity_exp_minus_mean_ll():
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {("b", " "): 0.5, (" ", "a"): 0.6, ("a", "b"): 0.7,
                                           ("a", "x"): 0.2}))
    llm = scorer_for(model, tok)
    bench = get_benchmark("lambada_openai")
    docs = [Doc("ab", target=" ab"), Doc("ab", target=" ax")]
    items = {}
    for d in docs:
        res = llm.loglikelihood(build_requests("loglikelihood", d))
        for k, v in score_item("loglikelihood", d, res).items():
            items.setdefault(k, []).append(v)
    # " ab": every token is the argmax (0.5, 0.6, 0.7 are each the largest of their row)
    # " ax": 'x' (0.2) is not the argmax after 'a' (that is 'b', 0.7) -> not greedy
    assert items["acc"] == [1.0, 0.0]
    lls = [math.log(0.5 * 0.6 * 0.7), math.log(0.5 * 0.6 * 0.2)]
    assert items["ll"] == pytest.approx(lls, abs=1e-5)
    agg = aggregate(bench, items)
    assert agg["acc"] == 0.5
    assert agg["perplexity"] == pytest.approx(math.exp(-np.mean(lls)), rel=1e-5)


def test_left_truncation_keeps_the_last_L_plus_1_tokens_and_feeds_the_first_L():
    tok = GreedyTokenizer(ALPHABET)
    P = bigram_table(tok, {})
    llm = scorer_for(FirstTokenModel(P), tok, L=4)
    ids = tok.ids
    (ll_long, _), (ll_short, _) = llm.loglikelihood([("abcdefg", "h"), ("abc", "d")])
    # "abcdefgh" -> keep "defgh", feed "defg": the model's first token is 'd'
    assert ll_long == pytest.approx(math.log(P[ids["d"], ids["h"]]), abs=1e-6)
    assert ll_short == pytest.approx(math.log(P[ids["a"], ids["d"]]), abs=1e-6)
    bigram = BigramModel(P)
    scorer_for(bigram, tok, L=4).loglikelihood([("abcdefg", "h")])
    assert bigram.inputs[0] == [tok.encode("defg")]


def test_long_continuations_are_scored_in_pieces_that_sum_to_the_whole():
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {}))
    llm = scorer_for(model, tok, L=3)
    (ll, _), = llm.loglikelihood([("a", "bcdefgh")])
    t = tok.encode("abcdefgh")
    assert ll == pytest.approx(sum(model.logp(a, b) for a, b in zip(t[:-1], t[1:])), abs=1e-5)
    assert llm.split_requests == 2  # 7 continuation tokens in pieces of 3, 3, 1


def test_batched_scoring_matches_one_by_one_and_hand_sums():
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {}, seed=3))
    rng = random.Random(0)
    words = ["q", "ab", "xyz", "hello", "a b c", "answer", "z"]
    reqs = [(" ".join(rng.choices(words, k=rng.randint(1, 6))), " " + rng.choice(words))
            for _ in range(40)]
    one = scorer_for(model, tok, L=16, batch_tokens=1).loglikelihood(reqs)
    many = scorer_for(model, tok, L=16, batch_tokens=4096).loglikelihood(reqs)
    assert one == many
    for (ctx, cont), (ll, _) in zip(reqs, many):
        t = tok.encode(ctx + cont)
        n = len(tok.encode(ctx + cont)) - len(tok.encode(ctx))
        ref = sum(model.logp(a, b) for a, b in zip(t[-n - 1:-1], t[-n:]))
        assert ll == pytest.approx(ref, abs=1e-5)


# --- rolling windows ------------------------------------------------------------------------

@pytest.mark.parametrize("L", [1, 2, 3, 5, 8])
def test_rolling_windows_predict_every_token_exactly_once(L):
    for n in range(0, 30):
        tokens = list(range(100, 100 + n))
        reqs = rolling_requests(tokens, 7, L)
        predicted = [t for _, cont in reqs for t in cont]
        assert predicted == tokens
        stream = [7] + tokens
        end = 1
        for ctx, cont in reqs:
            end += len(cont)
            inp = (ctx + cont)[-(L + 1):][:-1]
            assert 1 <= len(inp) <= L
            # the window reads exactly the tokens before its predictions (no gaps, no repeats)
            assert ctx + cont == stream[end - len(ctx) - len(cont):end]
            assert inp == stream[end - 1 - len(inp):end - 1]


def test_rolling_loglikelihood_equals_the_sum_over_every_token():
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {}, seed=5))
    docs = ["the quick brown fox", "a", "jumps over the lazy dog again and again"]
    token_lists = [tok.encode(d) for d in docs]
    lls = scorer_for(model, tok, L=4, batch_tokens=8).loglikelihood_rolling(token_lists)
    for t, ll in zip(token_lists, lls):
        t = [tok.eot_id] + t
        assert ll == pytest.approx(sum(model.logp(a, b) for a, b in zip(t[:-1], t[1:])), abs=1e-5)


def test_rolling_windows_match_lm_eval():
    utils = pytest.importorskip("lm_eval.utils")
    for L in (1, 4, 7):
        for n in (0, 1, 6, 7, 8, 20):
            tokens = list(range(n))
            ours = [make_disjoint_window(w) for w in get_rolling_token_windows(tokens, -1, L)]
            theirs = [utils.make_disjoint_window(w)
                      for w in utils.get_rolling_token_windows(tokens, -1, L, 1)]
            assert ours == [tuple(map(list, w)) for w in theirs]


# --- k-shot ---------------------------------------------------------------------------------

def test_fewshot_prefix_draws_like_lm_eval_and_excludes_the_item():
    docs = [Doc(f"Q{i}\nAnswer:", ("no", "yes"), gold=i % 2) for i in range(4)]
    # random.Random(1234).sample(range(4), 3) gives [3, 0, 2] then [0, 2, 3]
    r = random.Random(1234)
    assert r.sample(range(4), 3) == [3, 0, 2] and r.sample(range(4), 3) == [0, 2, 3]
    prefixes = fewshot_prefixes("multiple_choice", docs, [0, 2], n_shot=2)
    # item 0: draws [3, 0, 2], drop 0 -> shots 3, 2; item 2: draws [0, 2, 3], drop 2 -> shots 0, 3
    assert prefixes[0] == "Q3\nAnswer: yes\n\nQ2\nAnswer: no\n\n"
    assert prefixes[1] == "Q0\nAnswer: no\n\nQ3\nAnswer: yes\n\n"
    assert build_requests("multiple_choice", docs[0], prefixes[0])[1] == \
        ("Q3\nAnswer: yes\n\nQ2\nAnswer: no\n\nQ0\nAnswer:", " yes")
    assert fewshot_prefixes("multiple_choice", docs, [0, 1], 0) == ["", ""]


def test_fewshot_shots_of_winogrande_and_lambada():
    wino = [Doc("", (f"s{i} A", f"s{i} B"), gold=i % 2, target=f"t{i}.") for i in range(4)]
    p = fewshot_prefixes("multiple_input", wino, [0], n_shot=1)[0]
    assert p == "s3 B t3.\n\n"  # the gold context, " ", the continuation
    assert build_requests("multiple_input", wino[0], p) == [("s3 B t3.\n\ns0 A", " t0."),
                                                           ("s3 B t3.\n\ns0 B", " t0.")]
    lam = [Doc(f"c{i}", target=f" w{i}") for i in range(4)]
    # lm-eval writes text + target_delimiter + target, and lambada's target starts with " "
    assert fewshot_prefixes("loglikelihood", lam, [0], n_shot=1)[0] == "c3  w3\n\n"


# --- prompt formats and preprocessing -------------------------------------------------------

def test_hellaswag_preprocess_and_capitalisation_on_hand_examples():
    assert hellaswag_preprocess(" How to cook [title] Boil water. [step] Add salt.  ") == \
        "How to cook. Boil water. Add salt."
    assert hellaswag_preprocess("a [header] b") == "a b"
    assert hellaswag_capitalize("Roof shingle removal: A man is on a roof. he") == \
        "Roof shingle removal: A man is on a roof. He"
    assert hellaswag_capitalize("Skiing: a man skis? she! they. we") == "Skiing: a man skis? she! they. We"
    assert hellaswag_capitalize("Skiing: a man skis") == "Skiing: A man skis"
    docs = hellaswag_docs(["Act: x. the man", "2", " e0 ", "e1 [title] f", "e2", "e3", ""])
    assert docs == [Doc("Act: x. The man", ("e0", "e1. f", "e2", "e3"), 2)]


def test_boolq_text_keeps_every_question_in_the_passage():
    q = "Passage: He asked\nQuestion: why not?\nQuestion: is it so?"
    assert boolq_text(q) == "He asked\nQuestion: why not?\nQuestion: is it so?\nAnswer:"
    with pytest.raises(ValueError, match="Passage"):
        boolq_text("He asked")


@needs_data
def test_prompt_formats_on_the_staged_files():
    arc = get_benchmark("arc_easy").docs()[0]
    assert arc.text == ("Question: Which statement best explains why photosynthesis is the "
                        "foundation of most food webs?\nAnswer:")
    assert build_requests("multiple_choice", arc)[0] == \
        (arc.text, " Sunlight is the source of energy for nearly all ecosystems.")
    boolq = get_benchmark("boolq").docs()
    assert boolq[2417].text.count("\nQuestion: ") == 2 and boolq[2417].text.endswith("?\nAnswer:")
    assert build_requests("multiple_choice", boolq[0])[1][1] == " yes"
    piqa = get_benchmark("piqa").docs()[0]
    assert piqa.text == "Question: How do I ready a guinea pig cage for it's new occupants?\nAnswer:"
    hs = get_benchmark("hellaswag").docs()
    assert len(hs) == 10042
    assert hs[0].text == "Roof shingle removal: A man is sitting on a roof. He"
    assert hs[0].choices[3] == "starts pulling up roofing on a roof." and hs[0].gold == 3
    tagged = re.compile(r"\[.*?\]")  # every complete [...] tag is removed (lone "[" stay)
    assert not any(tagged.search(t) for d in hs for t in (d.text, *d.choices))
    wino = get_benchmark("winogrande").docs()[0]
    assert build_requests("multiple_input", wino) == [
        ("Sarah was a much better surgeon than Maria so Sarah", " always got the easier cases."),
        ("Sarah was a much better surgeon than Maria so Maria", " always got the easier cases.")]
    lam = get_benchmark("lambada_openai").docs()[0]
    assert lam.target == " signs" and lam.text.endswith("I don't care about")


@needs_data
def test_hellaswag_capitalisation_count_and_brackets_match_tasks_md():
    import bz2

    from tasks.data.files import data_path
    with bz2.open(data_path("zeroshot/hellaswag_val_full.txt.bz2"), "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    contexts = lines[0:len(lines) - 1:6]
    assert len(contexts) == 10042
    changed = sum(hellaswag_capitalize(c) != c for c in contexts)
    # docs/tasks.md#decoder_lm counts 3,236 items ending in a lower-case fragment; the approximation also
    # upper-cases the 7 items whose lower-case fragment is followed by more punctuation
    assert 3236 <= changed <= 3250
    assert sum("[" in ln for ln in lines) == 18


@needs_data
def test_sanity_baselines_equal_the_checked_rates():
    checked = {"arc_easy": 0.2668, "arc_challenge": 0.2654, "boolq": 0.6217, "piqa": 0.5049,
               "winogrande": 0.5043, "hellaswag": 0.2573}
    for name, rate in checked.items():
        bench = BENCHMARKS[name]
        docs = bench.docs()
        assert len(docs) == bench.size
        assert majority_baseline(bench, docs) == pytest.approx(rate, abs=6e-5)


# --- perplexity protocols -------------------------------------------------------------------

def toy_documents(tok, texts):
    from tasks.data.lm_data import TokenizedDocuments
    return TokenizedDocuments("toy", [f"d{i}" for i in range(len(texts))],
                              [np.array(tok.encode(t)) for t in texts],
                              np.array([len(t.split()) for t in texts]),
                              np.array([len(t.encode()) for t in texts]))


def test_rolling_perplexity_metrics_follow_their_formulas():
    from tasks.lmeval.perplexity import perplexity
    tok = GreedyTokenizer(ALPHABET)
    model = BigramModel(bigram_table(tok, {}, seed=7))
    texts = ["the cat sat", "on the mat\nand more words here", "z"]
    docs = toy_documents(tok, texts)
    res = perplexity(scorer_for(model, tok, L=5), docs, "rolling")
    ll = 0.0
    for t in texts:
        ids = [tok.eot_id] + tok.encode(t)
        ll += sum(model.logp(a, b) for a, b in zip(ids[:-1], ids[1:]))
    n_tok, n_words, n_bytes = sum(len(t) for t in texts), 3 + 7 + 1, sum(len(t) for t in texts)
    m = res.metrics
    assert m["perplexity"] == pytest.approx(math.exp(-ll / n_tok), rel=1e-5)
    assert m["word_perplexity"] == pytest.approx(math.exp(-ll / n_words), rel=1e-5)
    assert m["byte_perplexity"] == pytest.approx(math.exp(-ll / n_bytes), rel=1e-5)
    assert m["bits_per_byte"] == pytest.approx(-ll / (n_bytes * math.log(2)), rel=1e-5)
    assert np.mean(res.items["bits_per_byte"]) == pytest.approx(m["bits_per_byte"], rel=1e-9)
    assert res.n_tokens == n_tok and res.n_docs == 3


def test_windows_protocol_draws_one_window_per_long_document():
    from tasks.lmeval.perplexity import windows_perplexity
    tok = GreedyTokenizer(ALPHABET)
    model = FirstTokenModel(bigram_table(tok, {}, seed=8))
    texts = ["abcdefghij" * k for k in (1, 2, 3)] + ["abc", "abcdef"]
    docs = toy_documents(tok, texts)
    L = 8
    llm = scorer_for(model, tok, L=L)
    res = windows_perplexity(llm, docs, max_docs=2)
    eligible = {i for i, t in enumerate(docs.tokens) if len(t) >= L + 1}
    assert eligible == {0, 1, 2} and res.n_docs == 2 and res.n_tokens == 2 * (L - 1)
    ce = []
    for doc, start in res.windows:
        assert doc in eligible and 0 <= start <= len(docs.tokens[doc]) - L
        w = docs.tokens[doc][start:start + L]
        ce += [-math.log(model.P[w[0], b]) for b in w[1:]]  # the model reads the window's first token
    assert res.metrics["perplexity"] == pytest.approx(math.exp(np.mean(ce)), rel=1e-5)
    assert windows_perplexity(llm, docs, max_docs=2).windows == res.windows
    assert len(windows_perplexity(llm, docs).windows) == 3
    with pytest.raises(ValueError, match="rolling"):
        windows_perplexity(scorer_for(model, tok, L=64), docs)
