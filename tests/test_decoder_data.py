"""Decoder data: corpora preparation and counts (docs/tasks.md#decoder_lm), the WikiText detokenizer, data
file verification errors, the tokenizer and the processed-form cache keys."""
from __future__ import annotations

import hashlib
import shutil
import zipfile

import numpy as np
import pytest

from tasks.data import cache, corpora
from tasks.data.bpe import EOT, TextTokenizer, train_bpe
from tasks.data.files import DataFileError, data_path, manifest

from decoder_support import needs_data


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCOREBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- preparation rules on hand examples -----------------------------------------------------

def test_brown_tags_are_stripped_and_quotes_mapped():
    raw = "\n\n\tThe/at Fulton/np-tl said/vbd ``/`` no/at ''/'' ./.\n\n\tA/at b/c/nn\n"
    assert corpora.brown_detag(raw) == 'The Fulton said " no " .\nA b/c'


def test_text_decoding_falls_back_to_cp1252():
    assert corpora.decode_text("café".encode("utf-8")) == "café"
    assert corpora.decode_text(b"caf\xe9 \x93q\x94") == "café \u201cq\u201d"


def test_split_bucket_is_the_sha256_rule():
    for doc_id in ("brown/ca01#0", "abc/rural.txt#3", "movie_reviews/neg/cv000_29416.txt#0"):
        bucket = int.from_bytes(hashlib.sha256(doc_id.encode()).digest(), "big") % 100
        expected = "test" if bucket < 2 else "validation" if bucket < 4 else "train"
        assert corpora.split_of(doc_id) == expected


def test_wikitext_detokenizer_on_hand_examples():
    d = corpora.wikitext_detokenizer
    assert d(" = Robert <unk> = \n \n He was a guest @-@ starring actor , born 1 @,@ 000 "
             "years ago . \n") == " = Robert <unk> =\n\nHe was a guest-starring actor, born 1,000 years ago.\n"
    assert d("it is 3 @.@ 5 m ( about 11 ft ) long ; \" very \" long") == \
        'it is 3.5 m (about 11 ft) long; "very" long'
    assert d(" = = Career = = \n") == " == Career ==\n"
    assert d(" = = = 2000 – 2005 = = = ") == " === 2000 – 2005 === "
    assert d("the players ' union") == "the players' union"
    assert d("John 's car , 5 ° C , a N b") == "John's car, 5°C, a 1 b"
    assert d("why ? because ! yes : no") == "why? because! yes: no"
    assert d("a [ b ] { c }") == "a [b] {c}"


def test_wikitext_detokenizer_matches_lm_eval():
    wikitext = pytest.importorskip("lm_eval.tasks.wikitext.preprocess_wikitext")
    samples = [" = A = \n \n x @-@ y , z ' s ( q ) \" w \" 's N . \n", "a ; b : c ! d ? [ e ]",
               " = = = = T = = = = \n 1 @,@ 2 @.@ 3 ° C "]
    for s in samples:
        assert corpora.wikitext_detokenizer(s) == wikitext.wikitext_detokenizer({"page": s})


# --- the staged corpora ---------------------------------------------------------------------

@needs_data
def test_nltk_mix_word_counts_match_tasks_md():
    checked = {"brown": 1.16e6, "movie_reviews": 1.49e6, "abc": 0.66e6, "state_union": 0.35e6,
               "webtext": 0.30e6, "inaugural": 0.14e6}
    non_utf8 = 0
    for name, words in checked.items():
        docs = corpora.nltk_documents(name)
        assert sum(d.words for d in docs) == pytest.approx(words, abs=0.005e6)
        with zipfile.ZipFile(data_path(f"nltk/{name}.zip")) as zf:
            for member in zf.namelist():
                try:
                    zf.read(member).decode("utf-8")
                except UnicodeDecodeError:
                    non_utf8 += 1
        if name in corpora.LINE_CHUNKED:
            assert max(d.text.count("\n") + 1 for d in docs) == corpora.LINES_PER_CHUNK
    assert non_utf8 == 12


@needs_data
def test_nltk_split_is_deterministic_disjoint_and_by_document():
    splits = {s: corpora.nltk_mix(s) for s in ("train", "validation", "test")}
    ids = {s: [d.doc_id for d in docs] for s, docs in splits.items()}
    assert ids["test"] == [d.doc_id for d in corpora.nltk_mix("test")]
    all_ids = ids["train"] + ids["validation"] + ids["test"]
    assert len(all_ids) == len(set(all_ids))
    n = len(all_ids)
    assert n == sum(len(corpora.nltk_documents(c)) for c in corpora.NLTK_CORPORA)
    for s, lo, hi in (("test", 0, 2), ("validation", 2, 4)):
        for doc_id in ids[s]:
            assert lo <= int(hashlib.sha256(doc_id.encode()).hexdigest(), 16) % 100 < hi
        assert 0.01 < len(ids[s]) / n < 0.035
    assert sum(d.words for d in splits["train"]) > 3.8e6


@needs_data
def test_ood_corpora_counts_match_tasks_md():
    wiki = corpora.wikipedia()
    assert (len(wiki), sum(d.words for d in wiki)) == (614, 277_789)
    assert min(d.words for d in wiki) >= 50
    pages = corpora.wikitext_pages()
    assert len(pages) == 62 and pages[0].startswith(" = Robert <unk> = \n")
    wt = corpora.wikitext()
    assert wt[0].words == len(pages[0].split()) + 2  # lm-eval's re.split also counts the empty ends
    assert wt[0].text == corpora.wikitext_detokenizer(pages[0])
    c4 = corpora.c4()
    assert (len(c4), sum(d.words for d in c4)) == (118, 53_603)
    train, test = corpora.tinyshakespeare("train"), corpora.tinyshakespeare("test")
    assert len(train[0].text) + len(test[0].text) == 1_115_394
    assert len(train[0].text) == int(1_115_394 * 0.9)


# --- data file errors -----------------------------------------------------------------------

@needs_data
def test_altered_and_missing_files_are_errors_naming_file_hash_and_fixes(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "text").mkdir(parents=True)
    real = data_path(corpora.C4_SOURCE)
    bad = mirror / corpora.C4_SOURCE
    shutil.copy(real, bad)
    with bad.open("ab") as f:
        f.write(b"x")
    monkeypatch.setenv("SCOREBENCH_DATA", str(mirror))
    expected = manifest()[corpora.C4_SOURCE].sha256
    with pytest.raises(DataFileError) as err:
        corpora.c4()
    msg = str(err.value)
    assert corpora.C4_SOURCE in msg and expected in msg
    assert "SCOREBENCH_DATA" in msg and manifest()[corpora.C4_SOURCE].url in msg
    with pytest.raises(DataFileError) as err:
        corpora.wikipedia()
    msg = str(err.value)
    assert "missing" in msg and corpora.WIKIPEDIA_SOURCE in msg
    assert manifest()[corpora.WIKIPEDIA_SOURCE].sha256 in msg


# --- tokenizer and cache ----------------------------------------------------------------------

TEXTS = ["the cat sat on the mat", "the dog sat on the log", "café — naïve 😀 text"] * 20


def test_bpe_has_end_of_text_and_round_trips_bytes():
    tok = train_bpe(TEXTS, 300)
    assert tok.tokenizer.token_to_id(EOT) == tok.eot_id
    assert tok.vocab_size <= 300
    for text in TEXTS[:3] + ["unseen ✓ ünïcödé\n\n  spaces"]:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("the cat") == tok.encode_batch(["the cat"])[0]
    again = TextTokenizer.from_str(tok.json)
    assert again.sha256 == tok.sha256 and again.encode("the mat") == tok.encode("the mat")
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe(TEXTS, 100)


def test_cache_key_changes_with_tokenizer_and_sources_and_builds_once(tmp_cache):
    tok_a, tok_b = train_bpe(TEXTS, 280), train_bpe(TEXTS, 300)
    assert tok_a.sha256 != tok_b.sha256
    src = [corpora.C4_SOURCE]
    key_a = cache.cache_key("toks", sources=src, tokenizer=tok_a.sha256)
    key_b = cache.cache_key("toks", sources=src, tokenizer=tok_b.sha256)
    assert key_a != key_b
    assert key_a == cache.cache_key("toks", sources=src, tokenizer=tok_a.sha256)
    assert key_a != cache.cache_key("toks", sources=[corpora.WIKIPEDIA_SOURCE], tokenizer=tok_a.sha256)
    with pytest.raises(DataFileError, match="not in the data manifest"):
        cache.cache_key("toks", sources=["nope.txt"])
    builds = []

    def build_with(tok):
        def build(d):
            builds.append(tok.sha256)
            cache.save_ragged(d, "ids", tok.encode_batch(TEXTS[:3]))
        return build

    path_a = cache.cached("toks", key_a, build_with(tok_a))
    assert cache.cached("toks", key_a, build_with(tok_a)) == path_a
    path_b = cache.cached("toks", key_b, build_with(tok_b))
    assert path_a != path_b and builds == [tok_a.sha256, tok_b.sha256]
    assert [r.tolist() for r in cache.load_ragged(path_a, "ids")] == tok_a.encode_batch(TEXTS[:3])
    assert [r.tolist() for r in cache.load_ragged(path_b, "ids")] == tok_b.encode_batch(TEXTS[:3])
    assert not list(path_a.parent.glob(".toks-*"))  # no temporary build directory left


@needs_data
def test_tokenized_eval_text_is_rebuilt_for_another_tokenizer(tmp_cache):
    from tasks.data.lm_data import eval_documents
    tok_a, tok_b = train_bpe(TEXTS, 280), train_bpe(TEXTS, 300)
    docs_a = eval_documents("c4", tok_a)
    docs_b = eval_documents("c4", tok_b)
    dirs = sorted(p.name for p in (tmp_cache / "processed").iterdir())
    assert len(dirs) == 2 and all(d.startswith("lm-eval-text-") for d in dirs)
    c4 = corpora.c4()
    assert len(docs_a) == len(docs_b) == 118
    assert [t.tolist() for t in docs_a.tokens[:5]] == tok_a.encode_batch([d.text for d in c4[:5]])
    assert docs_a.words.sum() == 53_603 and docs_a.bytes.tolist() == [d.bytes for d in c4]
    again = eval_documents("c4", tok_a)
    assert all(np.array_equal(x, y) for x, y in zip(again.tokens, docs_a.tokens))
    assert len(list((tmp_cache / "processed").iterdir())) == 2


def test_training_tokenizer_is_trained_on_the_training_split_only(tmp_cache, monkeypatch):
    from tasks.data.lm_data import training_data
    splits = {"train": [corpora.document("a#0", "the cat sat on the mat " * 30),
                        corpora.document("a#1", "a dog and a log " * 30)],
              "validation": [corpora.document("b#0", "validation words " * 30)],
              "test": [corpora.document("c#0", "zebrazebra quokkaquokka " * 30)]}
    monkeypatch.setitem(corpora.TRAINING_CORPORA, "toy",
                        (lambda split: splits[split], (corpora.SHAKESPEARE_SOURCE,)))
    data = training_data("toy", 300)
    reference = train_bpe([d.text for d in splits["train"]], 300)
    assert data.tokenizer.json == reference.json
    assert "zebra" not in "".join(data.tokenizer.tokenizer.get_vocab())
    eot = data.tokenizer.eot_id
    expected = [eot] + reference.encode(splits["train"][0].text) + [eot] + \
        reference.encode(splits["train"][1].text)
    assert data.train.tolist() == expected
    assert data.tokenizer.decode(data.test.tokens[0].tolist()) == splits["test"][0].text
    assert data.validation.doc_ids == ["b#0"] and data.test.words.tolist() == [60]
