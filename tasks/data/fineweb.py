"""FineWeb-Edu ``sample-10BT``, the SSA paper's decoder corpus (docs/tasks.md#decoder_lm), prepared on
first use: never needed by the ``smoke`` and ``cpu`` profiles or by CI.

Source: the 14 public parquet shards ``sample/10BT/000_00000.parquet`` ... ``013_00000.parquet``
of the Hugging Face dataset ``HuggingFaceFW/fineweb-edu`` at revision ``REVISION`` (the commit
that uploaded them; 28,518,193,415 bytes in all, about 2.15 GB and 0.7B GPT-2 tokens each), each pinned by size and sha256
(the git-LFS object id of the file). A shard is read from ``$SCOREBENCH_DATA/fineweb-edu/
sample/10BT/<name>`` when that mirror has it, else downloaded into the cache, and checked; a
shard without a pinned hash (a ``Shard`` built by hand) is an error that says how to pin it, before any
download. Shards are fetched in order, only as far as the token budget reaches.

Preparation (one streaming pass, :func:`prepare`): parquet record batches (columns ``text``,
``id``) -> a document-disjoint split by the document id,

    bucket = int(sha256(id)[:8], 16) mod 1000;  0-4 test, 5-9 validation, else train,

-> the training documents tokenized in batches and appended to a flat token file
(``<|endoftext|>`` before each document; uint16 when the vocabulary fits, else uint32) that is
opened as a ``numpy.memmap``; the first ``HELDOUT_DOCS`` documents of each held-out split are kept
as token arrays. The pass stops after the document that reaches ``max_train_tokens`` training
tokens, or at the end of the sample. The BPE is trained on the first ``BPE_DOCS`` training
documents.
"""
from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from . import cache
from .bpe import TextTokenizer, cached_bpe
from .corpora import Document, document
from .documents import TrainingData, load_documents, save_documents
from .files import DataFileError, cache_dir, sha256_file

NAME = "fineweb_edu"
REPO = "HuggingFaceFW/fineweb-edu"
REVISION = "84e8104e779e409e2267ac60609138e3dda2cbd2"
SUBSET = "sample/10BT"
URL = "https://huggingface.co/datasets/{repo}/resolve/{revision}/{subset}/{name}"
POINTER_URL = "https://huggingface.co/datasets/{repo}/blob/{revision}/{subset}/{name}"
COLUMNS = ("text", "id")
HELDOUT_BUCKETS = {"test": range(0, 5), "validation": range(5, 10)}
HELDOUT_DOCS = 2000
BPE_DOCS = 20000
BATCH_ROWS = 1024
PREPARE_VERSION = 1


@dataclass(frozen=True)
class Shard:
    name: str
    bytes: int | None
    sha256: str | None


SHARDS = (
    Shard("000_00000.parquet", 2152819114,
          "b1ba7b2ce4cb5ea6ef42dca40263eabb85f37700d01693a68e9b30a31d78e871"),
    Shard("001_00000.parquet", 2152222432,
          "3fcf2dc69cd52503986276d3d2d26a8c356d0f2ea28a0de4fdbda8cf87755693"),
    Shard("002_00000.parquet", 2151796315,
          "547ae182d132c9f06b6ce63149567208ea9f57630bfd9b1a2938e504f0c9ebd7"),
    Shard("003_00000.parquet", 2152437524,
          "22184e6eb25759ddd97783751ffc73e1705dfa2542e630dae1f2a8bac8ee6ddb"),
    Shard("004_00000.parquet", 2152338550,
          "33557ddd87a07a4ae6fcaf7a4789c7b484e5cc0c273ca12a65b74200e6d8748b"),
    Shard("005_00000.parquet", 2152189947,
          "e08d79927ecb377786572cd854817c748ceb8880878b1a0eb91abf8c85d505ea"),
    Shard("006_00000.parquet", 2152689867,
          "554fa2613c9261d6c9c396caab881de3160175794c6c3e1856bf28a0e9cb9b76"),
    Shard("007_00000.parquet", 2150686637,
          "4b7d1f697d4afff7f5f65cb7aa4d83acc6db716da4d46ea23399d0c50608c6e3"),
    Shard("008_00000.parquet", 2151274846,
          "a6d9dcc0c72ecd7c7f0173c2d06b3a4249a2ccaa94961469d1a522ca689bbf1a"),
    Shard("009_00000.parquet", 2151913277,
          "f836cd3c70b95776699eb6c356b2dbf702816e25dcf39992f5c80a29029d23c3"),
    Shard("010_00000.parquet", 2152798864,
          "e5a2eae25f057f0856a10bfae314c6ca8ea8bb08456d2131e9e89b2b8305e2f6"),
    Shard("011_00000.parquet", 2152323681,
          "db71cf0425bb3d1813a09f12ff1acd6dabdfb91a2e4f141960254ee5a7f036e7"),
    Shard("012_00000.parquet", 2152069689,
          "08b47a3e1c25161f796d2f8dbf99ccf60affdebdcea4910833d0d5783315551f"),
    Shard("013_00000.parquet", 540632672,
          "b393f51fefab26cd6f4c8f65707c1924f6666c4961a0ebebe04bb57f7ec832de"),
)


def split_of(doc_id: str) -> str:
    """``train``, ``validation`` or ``test`` from the sha256 bucket of a document id."""
    bucket = int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:8], 16) % 1000
    return next((s for s, b in HELDOUT_BUCKETS.items() if bucket in b), "train")


def _pin_help(shard: Shard) -> str:
    pointer = POINTER_URL.format(repo=REPO, revision=REVISION, subset=SUBSET, name=shard.name)
    return (f"Pin it in tasks/data/fineweb.py SHARDS: size and sha256 are the 'size' and "
            f"'oid sha256:' lines of the git-LFS pointer at {pointer} (also listed on "
            f"https://huggingface.co/datasets/{REPO}/commit/{REVISION}), or `sha256sum` of a copy "
            f"downloaded from that revision.")


def _verified(path: Path, shard: Shard) -> Path:
    size = path.stat().st_size
    if shard.bytes is not None and size != shard.bytes:
        raise DataFileError(f"FineWeb-Edu shard {path} has {size} bytes, expected {shard.bytes} "
                            f"(revision {REVISION}); delete it to download it again")
    digest = sha256_file(path)
    if digest != shard.sha256:
        raise DataFileError(f"FineWeb-Edu shard {path} has sha256 {digest}, expected "
                            f"{shard.sha256} (revision {REVISION}); delete it to download it again")
    return path


def shard_path(shard: Shard, *, download: bool = True) -> Path:
    """The verified local path of ``shard``: the ``SCOREBENCH_DATA`` mirror, the cache, or a
    download into the cache."""
    if not shard.sha256:
        raise DataFileError(f"FineWeb-Edu shard {SUBSET}/{shard.name} has no pinned sha256, so it "
                            f"cannot be checked. " + _pin_help(shard))
    mirror = os.environ.get("SCOREBENCH_DATA")
    if mirror and (Path(mirror) / "fineweb-edu" / SUBSET / shard.name).is_file():
        return _verified(Path(mirror) / "fineweb-edu" / SUBSET / shard.name, shard)
    cached = cache_dir() / "fineweb-edu" / REVISION / SUBSET / shard.name
    if cached.is_file():
        return _verified(cached, shard)
    url = URL.format(repo=REPO, revision=REVISION, subset=SUBSET, name=shard.name)
    if not download:
        raise DataFileError(f"FineWeb-Edu shard {shard.name} is not in the cache {cached}; put it "
                            f"there or at $SCOREBENCH_DATA/fineweb-edu/{SUBSET}/{shard.name}, or "
                            f"let scorebench download it from {url}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
            while block := response.read(1 << 22):
                out.write(block)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise DataFileError(f"FineWeb-Edu shard {shard.name} could not be downloaded from {url} "
                            f"({err}); put a copy at $SCOREBENCH_DATA/fineweb-edu/{SUBSET}/"
                            f"{shard.name}") from err
    try:
        _verified(tmp, shard)
    except DataFileError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, cached)
    return cached


def iter_documents(paths: Iterable[Path], batch_rows: int = BATCH_ROWS
                   ) -> Iterator[list[tuple[str, str]]]:
    """Batches of (id, text) from parquet files, read one record batch at a time."""
    import pyarrow.parquet as pq

    for path in paths:
        parquet = pq.ParquetFile(path)
        missing = [c for c in COLUMNS if c not in parquet.schema_arrow.names]
        if missing:
            raise DataFileError(f"{path}: not a FineWeb-Edu shard, column(s) {missing} missing "
                                f"(has {parquet.schema_arrow.names})")
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=list(COLUMNS)):
            cols = batch.to_pydict()
            yield list(zip(cols["id"], cols["text"]))


def token_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32


def prepare(directory: Path, paths: Iterable[Path], tokenizer: TextTokenizer,
            max_train_tokens: int, heldout_docs: int = HELDOUT_DOCS) -> dict:
    """Write ``train.bin`` and the held-out splits of the documents in ``paths`` (module
    docstring) into ``directory``; return what was written."""
    dtype = token_dtype(tokenizer.vocab_size)
    heldout: dict[str, list[Document]] = {s: [] for s in HELDOUT_BUCKETS}
    n_train = n_docs = 0
    with open(directory / "train.bin", "wb") as out:
        for batch in iter_documents(paths):
            train_texts = []
            for doc_id, text in batch:
                split = split_of(doc_id)
                if split == "train":
                    train_texts.append(text)
                elif len(heldout[split]) < heldout_docs:
                    heldout[split].append(document(doc_id, text))
            for ids in tokenizer.encode_batch(train_texts):
                out.write(np.asarray([tokenizer.eot_id, *ids], dtype=dtype).tobytes())
                n_train += len(ids) + 1
                n_docs += 1
                if n_train >= max_train_tokens:
                    break
            if n_train >= max_train_tokens:
                break
    for split, docs in heldout.items():
        save_documents(directory, split, docs, tokenizer)
    meta = {"train_tokens": n_train, "train_docs": n_docs, "dtype": np.dtype(dtype).name,
            **{f"{s}_docs": len(d) for s, d in heldout.items()}}
    cache.save_json(directory, "meta", meta)
    return meta


def train_tokens(directory: Path) -> np.memmap:
    """The training token stream of a prepared directory, memory-mapped read-only."""
    meta = cache.load_json(directory, "meta")
    return np.memmap(directory / "train.bin", dtype=meta["dtype"], mode="r",
                     shape=(meta["train_tokens"],))


def _bpe_texts(paths: Iterable[Path], n_docs: int) -> Iterator[str]:
    seen = 0
    for batch in iter_documents(paths):
        for doc_id, text in batch:
            if split_of(doc_id) == "train":
                yield text
                seen += 1
                if seen >= n_docs:
                    return


def _lazy_paths(shards: Sequence[Shard]) -> Iterator[Path]:
    """Shard paths in order, each fetched only when the reader reaches it."""
    for shard in shards:
        yield shard_path(shard)


def training_data(vocab_size: int, max_train_tokens: int, *, shards: Sequence[Shard] = SHARDS):
    """Tokenizer + memory-mapped training stream + held-out splits (a ``TrainingData``)."""
    if max_train_tokens < 1:
        raise ValueError(f"fineweb_edu: max_train_tokens must be >= 1, got {max_train_tokens}")
    pins = [(s.name, s.sha256) for s in shards]
    tokenizer = cached_bpe(f"{NAME}@{REVISION}:{json.dumps(pins)}", (),
                           lambda: _bpe_texts(_lazy_paths(shards), BPE_DOCS), vocab_size)
    key = cache.cache_key("fineweb-edu", revision=REVISION, shards=pins,
                          tokenizer=tokenizer.sha256, max_train_tokens=int(max_train_tokens),
                          heldout_docs=HELDOUT_DOCS, version=PREPARE_VERSION)
    path = cache.cached("fineweb-edu", key,
                        lambda d: prepare(d, _lazy_paths(shards), tokenizer, max_train_tokens),
                        info={"revision": REVISION, "max_train_tokens": int(max_train_tokens),
                              "tokenizer": tokenizer.sha256})
    return TrainingData(tokenizer, train_tokens(path),
                        load_documents(path, "validation", f"{NAME}:validation"),
                        load_documents(path, "test", f"{NAME}:test"))
