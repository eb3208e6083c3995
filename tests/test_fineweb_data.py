"""The fineweb_edu corpus on small parquet shards written here with FineWeb-Edu's schema: pinned
shards are checked, an unpinned one is an error before any download, the streaming pass writes
a memory-mapped token file and a held-out split that shares no document with it."""
import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.data import fineweb
from tasks.data.bpe import train_bpe
from tasks.data.files import DataFileError

WORDS = "the of and a to in is was for on as with by at from light water energy cell".split()


def fineweb_table(start: int, n: int) -> pa.Table:
    """Rows shaped like sample-10BT: text, id, dump, url, date, file_path, language,
    language_score, token_count, score, int_score."""
    rng = np.random.default_rng(start)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(20, 60)))) + f" doc{start + i}."
             for i in range(n)]
    return pa.table({
        "text": texts,
        "id": [f"<urn:uuid:{start + i:08d}-0000-4000-8000-000000000000>" for i in range(n)],
        "dump": ["CC-MAIN-2024-10"] * n, "url": [f"https://example.org/{start + i}" for i in range(n)],
        "date": ["2024-02-21T00:00:00Z"] * n,
        "file_path": ["s3://commoncrawl/crawl-data/x.warc.gz"] * n,
        "language": ["en"] * n, "language_score": [0.97] * n,
        "token_count": [len(t.split()) for t in texts], "score": [3.1] * n, "int_score": [3] * n})


@pytest.fixture
def shards(tmp_path, monkeypatch):
    """Two shards in a SCOREBENCH_DATA mirror, pinned by their real size and sha256."""
    mirror = tmp_path / "data"
    folder = mirror / "fineweb-edu" / fineweb.SUBSET
    folder.mkdir(parents=True)
    pinned = []
    for i, (start, n) in enumerate([(0, 1500), (1500, 1500)]):
        path = folder / f"{i:03d}_00000.parquet"
        pq.write_table(fineweb_table(start, n), path, row_group_size=200)
        pinned.append(fineweb.Shard(path.name, path.stat().st_size,
                                    hashlib.sha256(path.read_bytes()).hexdigest()))
    monkeypatch.setenv("SCOREBENCH_DATA", str(mirror))
    monkeypatch.setenv("SCOREBENCH_CACHE", str(tmp_path / "cache"))
    return pinned


def test_split_is_by_document_id_and_about_one_percent_held_out():
    ids = [f"<urn:uuid:{i:08d}>" for i in range(20000)]
    splits = [fineweb.split_of(i) for i in ids]
    assert splits == [fineweb.split_of(i) for i in ids]  # deterministic
    for name in ("test", "validation"):
        assert 0.0035 < splits.count(name) / len(ids) < 0.0065
    expected = int(hashlib.sha256(ids[0].encode()).hexdigest()[:8], 16) % 1000
    assert splits[0] == ("test" if expected < 5 else "validation" if expected < 10 else "train")


def test_prepare_streams_tokens_into_a_memmap_with_a_disjoint_heldout(shards, tmp_path):
    paths = [fineweb.shard_path(s) for s in shards]
    tokenizer = train_bpe((t for t in fineweb_table(0, 3000)["text"].to_pylist()), 400)
    out = tmp_path / "prepared"
    out.mkdir()
    meta = fineweb.prepare(out, paths, tokenizer, max_train_tokens=10**9, heldout_docs=50)
    stream = fineweb.train_tokens(out)
    assert isinstance(stream, np.memmap) and stream.dtype == np.uint16
    # independent reference: every train document of both shards, in order, eot-prefixed
    rows = [r for p in paths for r in pq.read_table(p, columns=["id", "text"]).to_pylist()]
    train = [r for r in rows if fineweb.split_of(r["id"]) == "train"]
    expected = [t for r in train for t in [tokenizer.eot_id, *tokenizer.encode(r["text"])]]
    assert np.array_equal(np.asarray(stream), np.array(expected, dtype=np.uint16))
    assert meta["train_docs"] == len(train) and meta["train_tokens"] == len(expected)
    held = {r["id"] for r in rows if fineweb.split_of(r["id"]) != "train"}
    kept_ids = set()
    for split in ("test", "validation"):
        ids = fineweb.cache.load_json(out, f"{split}.ids")
        assert 0 < len(ids) <= 50
        kept_ids |= set(ids)
    assert kept_ids <= held and not kept_ids & {r["id"] for r in train}


def test_prepare_stops_at_the_token_budget(shards, tmp_path):
    paths = [fineweb.shard_path(s) for s in shards]
    tokenizer = train_bpe((t for t in fineweb_table(0, 500)["text"].to_pylist()), 300)
    out = tmp_path / "prepared"
    out.mkdir()
    meta = fineweb.prepare(out, paths, tokenizer, max_train_tokens=5000)
    stream = fineweb.train_tokens(out)
    assert 5000 <= len(stream) < 5000 + 200  # stops after the document that crosses the budget
    assert meta["train_tokens"] == len(stream)
    assert int((np.asarray(stream) == tokenizer.eot_id).sum()) == meta["train_docs"]


def test_training_data_is_cached_and_feeds_the_decoder_format(shards):
    data = fineweb.training_data(300, 20000, shards=shards)
    again = fineweb.training_data(300, 20000, shards=shards)
    assert data.tokenizer.sha256 == again.tokenizer.sha256
    assert np.array_equal(np.asarray(data.train), np.asarray(again.train))
    assert len(data.train) >= 20000 and len(data.validation) > 0 and len(data.test) > 0
    assert data.validation.name == "fineweb_edu:validation"
    doc = data.validation.tokens[0]
    assert data.tokenizer.decode(doc).endswith(".")


def test_a_changed_shard_is_rejected(shards, tmp_path):
    bad = fineweb.Shard(shards[0].name, shards[0].bytes, "0" * 64)
    with pytest.raises(DataFileError, match="sha256 .* expected 0000"):
        fineweb.shard_path(bad)


def test_an_unpinned_shard_is_an_error_naming_how_to_pin_it(monkeypatch, tmp_path):
    monkeypatch.setenv("SCOREBENCH_CACHE", str(tmp_path))
    unpinned = fineweb.Shard("004_00000.parquet", None, None)
    with pytest.raises(DataFileError, match="no pinned sha256") as err:
        fineweb.shard_path(unpinned)
    assert "oid sha256:" in str(err.value) and fineweb.REVISION in str(err.value)
    assert not list(tmp_path.rglob("*.part"))  # nothing was downloaded


def test_pinned_shards_are_well_formed():
    names = [s.name for s in fineweb.SHARDS]
    assert names == [f"{i:03d}_00000.parquet" for i in range(14)]
    for s in fineweb.SHARDS:
        assert len(s.sha256) == 64 and int(s.sha256, 16) >= 0
    assert len({s.sha256 for s in fineweb.SHARDS}) == 14
    assert fineweb.SHARDS[0].sha256.startswith("b1ba7b2c")
    assert sum(s.bytes for s in fineweb.SHARDS) == 28_518_193_415  # the listing of REVISION


def test_the_decoder_accepts_the_corpus():
    from tasks import create_task

    task = create_task("decoder_lm")
    assert task.config({"corpus": "fineweb_edu"}).corpus == "fineweb_edu"
