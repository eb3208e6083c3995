"""Locate every data file and verify its sha256 against the project's copy of the manifest.

Search order: the directory in ``SCOREBENCH_DATA`` (a read-only mirror; never downloads), else
the user cache (``SCOREBENCH_CACHE`` or ``~/.cache/scorebench``), else a download from the pinned
public source ``https://raw.githubusercontent.com/<repo>/<commit>/<path>`` into the cache.
"""
from __future__ import annotations

import csv
import hashlib
import os
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MANIFEST_PATH = Path(__file__).with_name("manifest.tsv")
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


class DataFileError(FileNotFoundError):
    """A data file is missing or altered; the message names it, its hash and how to get it."""


@dataclass(frozen=True)
class ManifestEntry:
    file: str
    bytes: int
    sha256: str
    source_repo: str
    commit: str
    source_path: str
    license: str

    @property
    def url(self) -> str:
        return RAW_URL.format(repo=self.source_repo, commit=self.commit, path=self.source_path)


@lru_cache(maxsize=None)
def manifest() -> dict[str, ManifestEntry]:
    with MANIFEST_PATH.open(newline="") as f:
        rows = csv.DictReader(f, delimiter="\t")
        return {r["file"]: ManifestEntry(**{**r, "bytes": int(r["bytes"])}) for r in rows}


def cache_dir() -> Path:
    """The user cache for downloaded files and processed forms (tokenized corpora)."""
    root = os.environ.get("SCOREBENCH_CACHE") or Path.home() / ".cache" / "scorebench"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_VERIFIED: dict[tuple[str, float, int], str] = {}


def _verified(path: Path, entry: ManifestEntry) -> Path:
    stat = path.stat()
    key = (str(path), stat.st_mtime, stat.st_size)
    digest = _VERIFIED.get(key) or sha256_file(path)
    if digest != entry.sha256:
        raise DataFileError(
            f"data file {entry.file} at {path} has sha256 {digest}, expected {entry.sha256}.\n"
            + _how_to_get(entry)
        )
    _VERIFIED[key] = digest
    return path


def _how_to_get(entry: ManifestEntry) -> str:
    return (
        f"To provide it, either (1) put the original file at $SCOREBENCH_DATA/{entry.file} "
        f"(a mirror of the data directory), or (2) unset SCOREBENCH_DATA and let scorebench "
        f"download it from {entry.url} into {cache_dir() / 'data' / entry.file}."
    )


def data_path(name: str, *, download: bool | None = None) -> Path:
    """The verified local path of manifest file ``name`` (e.g. ``"zorro/binding-principle_a.txt"``)."""
    entries = manifest()
    if name not in entries:
        raise DataFileError(f"{name!r} is not in the data manifest {MANIFEST_PATH}")
    entry = entries[name]
    mirror = os.environ.get("SCOREBENCH_DATA")
    if mirror:
        path = Path(mirror) / name
        if not path.is_file():
            raise DataFileError(
                f"data file {name} (sha256 {entry.sha256}) is missing from SCOREBENCH_DATA="
                f"{mirror}.\n" + _how_to_get(entry)
            )
        return _verified(path, entry)
    cached = cache_dir() / "data" / name
    if cached.is_file():
        return _verified(cached, entry)
    if download is False:
        raise DataFileError(f"data file {name} (sha256 {entry.sha256}) is not in the cache "
                            f"{cached}.\n" + _how_to_get(entry))
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(cached.suffix + ".part")
    try:
        with urllib.request.urlopen(entry.url, timeout=60) as response, tmp.open("wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise DataFileError(f"data file {name} (sha256 {entry.sha256}) could not be downloaded "
                            f"({err}).\n" + _how_to_get(entry)) from err
    os.replace(tmp, cached)
    try:
        return _verified(cached, entry)
    except DataFileError:
        cached.unlink(missing_ok=True)
        raise
