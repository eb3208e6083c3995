"""AO-CHILDES corpus, validation split, Zorro pairs and the BabyBERTa tokenizer, on the real data."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("SCOREBENCH_DATA") and REPO_DATA.is_dir():
    os.environ["SCOREBENCH_DATA"] = str(REPO_DATA)

from tasks.data import aochildes, zorro  # noqa: E402
from tasks.data.files import data_path  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return aochildes.read_transcripts()


@pytest.fixture(scope="module")
def kept(rows):
    return aochildes.select_utterances(rows)


@pytest.fixture(scope="module")
def corpus():
    return aochildes.load_aochildes()


# ----------------------------------------------------------------------------- utterance rules

@pytest.mark.parametrize("gloss, kind, expected", [
    ("what's that", "declarative", "what's that ?"),           # question opening beats the type
    ("what a mess", "declarative", "what a mess ."),           # "what a " is not a question
    ("whatever you like", "imperative_emphatic", "whatever you like ?"),  # prefix match, as the pipeline
    ("you wanna play", "declarative", "you wanna play ?"),
    ("is it red", "question", "is it red ?"),
    ("is it red", "trail off question", "is it red ?"),
    ("sit down", "imperative_emphatic", "sit down !"),
    ("oh boy", "question exclamation", "oh boy !"),
    ("it fell", "trail off", "it fell ."),
    ("it fell", "self interruption", "it fell ."),
    ("What is it", "declarative", "what is it ."),             # openings are case-sensitive
])
def test_end_marks(gloss, kind, expected):
    assert aochildes.clean_utterance(gloss, kind) == expected


@pytest.mark.parametrize("gloss, expected", [
    ("lets go", "let us go ."),                                # spelling map splits
    ("a coca cola for mot", "a cocacola for mother ."),        # merge + speaker code
    ("it's all_gone", "it's all gone ."),                      # underscore entry of the map
    ("a bandaid", "a band aid ."),                             # map to band_aid, then split
    ("the choo+choo train", "the choo choo train ."),          # + split outside the map
    ("Chi likes Kitty", "child likes kittie ."),               # lower case before the map
    ("chi+fat", "chi fat ."),                                  # codes only as whole words
    ("g_i joe", "gijoe ."),                                    # merge of the raw gloss
    ("don't cha want it", "don't you want it ."),              # merge (spelling.py string2w)
])
def test_cleaning(gloss, expected):
    assert aochildes.clean_utterance(gloss, "declarative") == expected


# ------------------------------------------------------------------------------ the real corpus

def test_child_speech_excluded(rows, kept):
    child = rows["speaker_role"].isin(["Target_Child", "Child"])
    assert child.sum() == 3543                                 # docs/tasks.md#encoder_mlm: child rows in the export
    assert (rows.loc[child, "speaker_code"] == "CHI").any()
    assert not kept["speaker_role"].isin(["Target_Child", "Child"]).any()
    assert not (kept["speaker_code"] == "CHI").any()


def test_filters(rows, kept):
    assert kept["target_child_age"].notna().all() and (kept["target_child_age"] <= 2190).all()
    assert (kept["num_tokens"] >= 1).all() and (kept["collection_name"] == "Eng-NA").all()
    for marker in ("xxx", "yyy", "www", "\ufffd"):
        assert not kept["gloss"].str.contains(marker, regex=False).any()
    no_age = set(rows.loc[rows["target_child_age"].isna(), "corpus"])
    assert {"Sawyer", "Bloom73", "Gathercole", "Garvey"} <= no_age
    assert not {"Sawyer", "Bloom73", "Gathercole", "Garvey"} & set(kept["corpus"])


def test_age_ordering(kept, corpus):
    age, tid, order = (kept[c].to_numpy() for c in ("target_child_age", "transcript_id", "utterance_order"))
    assert np.array_equal(np.lexsort((order, tid, age)), np.arange(len(kept)))
    assert not kept.duplicated(["transcript_id", "utterance_order"]).any()
    ages = np.asarray(corpus.ages)
    assert np.all(np.diff(ages) >= 0)
    # one transcript is one contiguous block of the corpus
    ids = np.asarray(corpus.transcript_ids)
    starts = ids[np.r_[True, ids[1:] != ids[:-1]]]
    assert len(starts) == len(set(starts)) == 877


def test_corpus_counts_match_tasks_md(kept, corpus):
    counts = corpus.counts()
    assert counts["utterances"] == 162_129
    assert counts["raw_words"] == 654_211 == int(kept["num_tokens"].sum())
    assert counts["transcripts"] == 877 and counts["corpora"] == 17
    assert round(counts["min_age_days"]) == 91 and round(counts["max_age_days"]) == 2131
    # docs/tasks.md#encoder_mlm's 128,093 counts whitespace tokens of the raw gloss plus the end mark
    raw_tokens = kept["gloss"].str.split().str.len() + 1
    assert int((raw_tokens >= 3).sum()) == 128_093
    # the processed text has more: the spelling map and compound splits only add words, and every
    # sentence that reaches 3 tokens only after processing is a 1-word gloss that was expanded
    processed = np.array([len(s.split()) for s in corpus.sentences])
    assert np.all(processed >= raw_tokens.to_numpy())
    gained = (processed >= 3) & (raw_tokens.to_numpy() < 3)
    assert counts["training_sentences"] == 128_093 + int(gained.sum())
    assert all(len(g.split()) == 1 for g in kept.loc[gained, "gloss"])
    assert max(processed) <= 126  # all fit 128 tokens with <s> and </s> even one token per word


def test_validation_dedup(corpus):
    val = aochildes.load_validation()
    frame = pd.read_csv(data_path(aochildes.VALIDATION_FILE), keep_default_na=False)
    train_transcripts = set(corpus.transcript_ids)
    overlap = frame["transcript_id"].isin(corpus.source_transcript_ids)
    assert val.rows_total == 48_452 and val.rows_dropped == 7_600 and val.transcripts_dropped == 81
    assert len(val.sentences) == 40_852
    assert list(val.sentences) == list(frame.loc[~overlap, "text"].str.strip())
    assert not set(frame.loc[~overlap, "transcript_id"]) & train_transcripts
    # the dropped rows really are training utterances: same words as a training gloss
    words = {s.rsplit(" ", 1)[0] for s in corpus.sentences}
    assert frame.loc[overlap, "text"].map(lambda s: s.rsplit(" ", 1)[0]).isin(words).all()
    assert sum(len(s.split()) - 1 for s in val.sentences) == 259_084


# ------------------------------------------------------------------------------------- Zorro

def test_parse_pairs_odd_line_ungrammatical():
    pairs = zorro.parse_pairs(["bad one .", "good one .", "bad two .", "good two .", ""])
    assert pairs == [zorro.MinimalPair("good one .", "bad one ."),
                     zorro.MinimalPair("good two .", "bad two .")]
    with pytest.raises(ValueError, match="must be even"):
        zorro.parse_pairs(["a .", "b .", "c ."])
    with pytest.raises(ValueError, match="empty line"):
        zorro.parse_pairs(["a .", "", "c .", "d ."])


def test_real_paradigms():
    names = zorro.paradigms()
    assert len(names) == 23 and len({zorro.phenomenon(p) for p in names}) == 13
    assert zorro.phenomenon("filler-gap-wh_question_object") == "filler-gap"
    for name in names:
        pairs = zorro.load_paradigm(name)
        lines = data_path(f"zorro/{name}.txt").read_text().splitlines()
        assert len(pairs) == 2000 and len(lines) == 4000
        assert [p.ungrammatical for p in pairs] == lines[0::2]
        assert [p.grammatical for p in pairs] == lines[1::2]
        assert all(p.grammatical != p.ungrammatical for p in pairs)
    # hand-checked first pairs: line 1 is the ungrammatical sentence
    first = {n: zorro.load_paradigm(n)[0] for n in
             ("agreement_subject_verb-across_prepositional_phrase", "case-subjective_pronoun",
              "argument_structure-swapped_arguments")}
    assert first["agreement_subject_verb-across_prepositional_phrase"] == zorro.MinimalPair(
        grammatical="the lie on the foot is flat .", ungrammatical="the lies on the foot is flat .")
    assert first["case-subjective_pronoun"].grammatical == "i brought the wolf my hill ."
    assert first["argument_structure-swapped_arguments"].ungrammatical == "the slave made her label he ."
    with pytest.raises(ValueError, match="unknown Zorro paradigm"):
        zorro.load_paradigm("binding")


def test_pair_outcomes_ties_wrong():
    correct, ties = zorro.pair_outcomes([1.0, 2.0, 3.0], [2.0, 2.0, 1.0])
    assert correct.tolist() == [True, False, False] and ties == 1


# --------------------------------------------------------------------------------- tokenizer

def test_tokenizer_round_trip_on_zorro():
    from tasks.data.mlm_data import BOS_ID, EOS_ID, UNK_ID, encode, load_tokenizer, pad_batch

    tok = load_tokenizer()
    assert tok.get_vocab_size() == 8192
    sentences = [s for p in zorro.paradigms() for pair in zorro.load_paradigm(p)
                 for s in (pair.ungrammatical, pair.grammatical)]
    assert len(sentences) == 92_000
    ids = encode(tok, sentences)
    assert not any((s == UNK_ID).any() for s in ids)
    assert max(len(s) for s in ids) + 2 <= 15
    assert sum(len(s) != len(text.split()) for s, text in zip(ids, sentences)) == 1020
    decoded = tok.decode_batch([s.tolist() for s in ids])
    assert [d.strip() for d in decoded] == [s.lower() for s in sentences]
    # <s> ids </s> as batched equals the tokenizer's own post-processor
    with_specials = tok.encode_batch(sentences[:50])
    padded, valid = pad_batch(ids[:50])
    for row, e in enumerate(with_specials):
        assert padded[row, valid[row]].tolist() == e.ids
        assert e.ids[0] == BOS_ID and e.ids[-1] == EOS_ID
