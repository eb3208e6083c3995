"""Processed forms of the data (tokenizers, tokenized corpora) cached on disk.

A processed form lives in ``cache_dir()/processed/<kind>-<key>/`` where ``key`` is the first
16 hex of ``sha256(canonical JSON of {kind, sources: {file: sha256}, params})``. ``sources``
are manifest files, identified by their pinned sha256, and ``params`` holds everything else
the form depends on (the tokenizer's hash, a vocabulary size, the preparation's version), so
a change of either gives a new key and the form is rebuilt. Building happens in a temporary
directory that is renamed into place, so a killed build never leaves a half-written form.

    key = cache_key("nltk-tokens", sources=["nltk/brown.zip"], tokenizer=tok.sha256, version=1)
    path = cached("nltk-tokens", key, build=lambda d: save_arrays(d, train=ids))
    arrays = load_arrays(path)
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .files import DataFileError, cache_dir, manifest

INFO_FILE = "cache_info.json"


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_hashes(sources: Iterable[str]) -> dict[str, str]:
    """``{file: pinned sha256}`` for manifest files; an unknown file is an error naming it."""
    entries = manifest()
    out = {}
    for name in sources:
        if name not in entries:
            raise DataFileError(f"{name!r} is not in the data manifest; a cached form can only "
                                f"depend on manifest files")
        out[name] = entries[name].sha256
    return out


def cache_key(kind: str, *, sources: Iterable[str] = (), **params: Any) -> str:
    """16 hex identifying a processed form of ``kind`` built from ``sources`` with ``params``."""
    ident = {"kind": kind, "sources": source_hashes(sources), "params": params}
    return hashlib.sha256(canonical_json(ident).encode()).hexdigest()[:16]


def processed_dir() -> Path:
    path = cache_dir() / "processed"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(kind: str, key: str, build: Callable[[Path], None], *,
           info: dict[str, Any] | None = None) -> Path:
    """The directory of the processed form ``kind``/``key``, calling ``build(dir)`` if absent.

    ``build`` writes its files into the (empty, temporary) directory it is given. ``info`` is
    stored alongside as ``cache_info.json`` for people inspecting the cache.
    """
    final = processed_dir() / f"{kind}-{key}"
    if (final / INFO_FILE).is_file():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{kind}-{key}-", dir=processed_dir()))
    try:
        build(tmp)
        (tmp / INFO_FILE).write_text(json.dumps({"kind": kind, "key": key, **(info or {})},
                                                indent=1, sort_keys=True))
        try:
            os.replace(tmp, final)
        except OSError:
            if not (final / INFO_FILE).is_file():  # not a concurrent builder winning the race
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def save_arrays(directory: Path, **arrays: np.ndarray) -> None:
    """Each array as ``<name>.npy`` (plain numeric arrays; never pickled)."""
    for name, array in arrays.items():
        np.save(directory / f"{name}.npy", np.asarray(array), allow_pickle=False)


def load_arrays(directory: Path, *names: str) -> dict[str, np.ndarray]:
    """The arrays saved by :func:`save_arrays` (all of them when no name is given)."""
    files = [directory / f"{n}.npy" for n in names] if names else sorted(directory.glob("*.npy"))
    return {f.stem: np.load(f, allow_pickle=False) for f in files}


def save_ragged(directory: Path, name: str, rows: list[list[int]] | list[np.ndarray],
                dtype=np.int32) -> None:
    """A list of integer sequences as ``<name>.npy`` (concatenated) + ``<name>.offsets.npy``."""
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = (np.concatenate([np.asarray(r, dtype=dtype) for r in rows]) if rows
            else np.zeros(0, dtype=dtype))
    np.save(directory / f"{name}.npy", flat, allow_pickle=False)
    np.save(directory / f"{name}.offsets.npy", offsets, allow_pickle=False)


def load_ragged(directory: Path, name: str) -> list[np.ndarray]:
    flat = np.load(directory / f"{name}.npy", allow_pickle=False)
    offsets = np.load(directory / f"{name}.offsets.npy", allow_pickle=False)
    return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def save_json(directory: Path, name: str, obj: Any) -> None:
    (directory / f"{name}.json").write_text(json.dumps(obj, ensure_ascii=False))


def load_json(directory: Path, name: str) -> Any:
    return json.loads((directory / f"{name}.json").read_text())
