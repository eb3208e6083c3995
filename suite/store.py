"""The result store: one JSON record per cell under ``<root>/<task>/<scorer>/<cell_id>.json``, or
gzipped compact JSON ``<cell_id>.json.gz`` in a directory whose ``.store.json`` says
``{"compression": "gzip"}`` (the committed ``leaderboard/records``). Both forms are read anywhere.

Writes are atomic (a temporary file in the same directory, fsync, ``os.replace``), so a reader sees
either no record or a complete one, whatever kills the writer. A run claims a cell before running it
with ``<cell_id>.claim`` created by ``O_CREAT | O_EXCL`` and holding its pid, host and run id; a
second run on the same directory skips a cell another live run holds. A claim is stale when its
process is gone (same host: the pid is dead, a zombie, or reused by a younger process; another
host: no heartbeat for ``STALE_AFTER_S``), and the next run takes it over.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from leaderboard.loading.schema import (RECORD_SUFFIXES, RecordError, dumps, dumps_compact,
                                gzip_bytes, read_record_text, validate_record)

STALE_AFTER_S = 600.0   # a claim from another host with no heartbeat for this long is stale
HEARTBEAT_S = 60.0
UNREADABLE_GRACE_S = 30.0  # an empty claim (writer killed between create and write) after this
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+\-]*$")
CELL_ID = re.compile(r"^[0-9a-f]{16}$")
STORE_FILE = ".store.json"
COMPRESSIONS = ("none", "gzip")


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` so that ``path`` is never seen partly written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _process_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` on this host is running (not a zombie) and started at ``start``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _process_state(pid) in ("Z", "X"):
        return False
    if start is not None:
        current = _process_start(pid)
        if current is not None and current != start:
            return False
    return True


def store_compression(root: str | Path) -> str:
    """How records are written under ``root``: ``gzip`` when its ``.store.json`` says so, else
    ``none`` (indented JSON)."""
    path = Path(root) / STORE_FILE
    if not path.exists():
        return "none"
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
        compression = settings.get("compression", "none")
    except (OSError, ValueError, AttributeError) as e:
        raise RecordError(f"{path}: not a JSON object like {{\"compression\": \"gzip\"}}: "
                          f"{e}") from None
    if compression not in COMPRESSIONS:
        raise RecordError(f"{path}: compression {compression!r} is not one of "
                          f"{list(COMPRESSIONS)}")
    return compression


class NoSuchRecord(RecordError):
    """No record has the cell id asked for."""


@dataclass(frozen=True)
class Claim:
    path: Path
    owner: dict


class ResultStore:
    """Records and claims under one results directory."""

    def __init__(self, root: str | Path, run_id: str | None = None):
        self.root = Path(root)
        self.compression = store_compression(self.root)
        self.suffix = ".json.gz" if self.compression == "gzip" else ".json"
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.warnings: list[str] = []
        self._held: dict[Path, Claim] = {}
        self._lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    # ----- paths
    def record_path(self, task: str, scorer: str, cell_id: str) -> Path:
        for what, name in (("task", task), ("scorer", scorer)):
            if not SAFE_NAME.match(name):
                raise RecordError(f"{what} name {name!r} cannot be a directory name; use letters, "
                                  f"digits and _ . + -")
        if not CELL_ID.match(cell_id):
            raise RecordError(f"cell_id {cell_id!r} is not 16 lowercase hex digits")
        return self.root / task / scorer / f"{cell_id}{self.suffix}"

    def _forms(self, path: Path) -> list[Path]:
        """The record's file in this store's form first, then in the other."""
        stem = path.name[:-len(self.suffix)]
        return [path, *(path.with_name(stem + s) for s in RECORD_SUFFIXES if s != self.suffix)]

    def path_of(self, cell) -> Path:
        """The cell's record file: the one that exists, else where it will be written."""
        path = self.record_path(cell.task, cell.scorer, cell.id)
        return next((p for p in self._forms(path) if p.exists()), path)

    # ----- records
    def write(self, record: dict) -> Path:
        """Validate and atomically write ``record``; return its path. A record of the cell in
        the other form (``.json`` / ``.json.gz``) is removed, so a cell has one file."""
        validate_record(record)
        cell = record["cell"]
        path = self.record_path(cell["task"], cell["scorer"], record["cell_id"])
        if self.compression == "gzip":
            atomic_write_text(path, gzip_bytes(dumps_compact(record)))
        else:
            atomic_write_text(path, dumps(record))
        for other in self._forms(path)[1:]:
            with contextlib.suppress(FileNotFoundError):
                other.unlink()
        return path

    @staticmethod
    def load(path: str | Path) -> dict:
        """Read and validate one record; a bad file raises :class:`RecordError` naming it."""
        path = Path(path)
        try:
            record = json.loads(read_record_text(path))
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise RecordError(f"{path}: cannot read the record: {e}") from None
        try:
            return validate_record(record)
        except RecordError as e:
            raise RecordError(f"{path}: {e}") from None

    def existing(self, cell) -> dict | None:
        """The cell's record if a valid one exists; an invalid one is reported and ignored."""
        path = self.path_of(cell)
        if not path.exists():
            return None
        try:
            return self.load(path)
        except RecordError as e:
            self.warnings.append(f"{e}; the cell will run again")
            return None

    def records(self, *, validate: bool = True):
        """Every valid record under the root, as (path, record); bad files go to ``warnings``.
        ``validate=False`` yields every file that parses as JSON, unchecked (4x faster: for
        reading a few fields defensively, as the dry run's estimate does)."""
        for path in sorted(p for suffix in RECORD_SUFFIXES
                           for p in self.root.glob(f"*/*/*{suffix}")):
            try:
                if validate:
                    yield path, self.load(path)
                else:
                    yield path, json.loads(read_record_text(path))
            except RecordError as e:
                self.warnings.append(str(e))
            except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
                self.warnings.append(f"{path}: cannot read the record: {e}")

    def find(self, cell_id: str) -> Path:
        """The record whose id is ``cell_id`` or starts with it (a unique prefix is enough)."""
        if not re.fullmatch(r"[0-9a-f]{1,16}", cell_id):
            raise RecordError(f"{cell_id!r} is not a cell id (16 hex digits, or a prefix of one)")
        matches = sorted(p for suffix in RECORD_SUFFIXES
                         for p in self.root.glob(f"*/*/{cell_id}*{suffix}"))
        if not matches:
            raise NoSuchRecord(f"no record with cell id {cell_id!r} under {self.root}; "
                              f"pass --results DIR if the results are elsewhere")
        if len(matches) > 1:
            ids = ", ".join(p.stem for p in matches[:5])
            raise RecordError(f"cell id prefix {cell_id!r} matches {len(matches)} records "
                              f"({ids}{', ...' if len(matches) > 5 else ''}); give more digits")
        return matches[0]

    # ----- claims
    def _owner(self) -> dict:
        return {"pid": os.getpid(), "host": self.host, "pid_start": _process_start(os.getpid()),
                "run_id": self.run_id, "claimed": time.time()}

    def _create(self, path: Path) -> Claim | None:
        owner = self._owner()
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return None
        with os.fdopen(fd, "w") as f:
            json.dump(owner, f)
            f.flush()
            os.fsync(f.fileno())
        claim = Claim(path, owner)
        with self._lock:
            self._held[path] = claim
        for tmp in path.parent.glob(f".{path.stem}.json*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()  # left by a writer that was killed mid-write
        return claim

    @staticmethod
    def _read_owner(path: Path) -> dict | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def holder(self, path: Path) -> dict | None:
        """The live owner of claim ``path``, or None if there is no claim or it is stale."""
        owner = self._read_owner(path)
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return None
        if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
            return {"unreadable": True} if age < UNREADABLE_GRACE_S else None
        if owner.get("host") == self.host:
            return owner if pid_alive(owner["pid"], owner.get("pid_start")) else None
        return owner if age < STALE_AFTER_S else None

    def claim(self, cell) -> Claim | None:
        """Claim ``cell`` for this run; None if another live run holds it."""
        path = self.root / cell.task / cell.scorer / f"{cell.id}.claim"
        path.parent.mkdir(parents=True, exist_ok=True)
        claim = self._create(path)
        if claim is not None or self.holder(path) is not None:
            return claim
        # Stale: take it over under a directory-wide lock so that two runs cannot both do so.
        with open(self.root / ".claims.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if path.exists() and self.holder(path) is None:
                    path.unlink()
                return self._create(path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def release(self, claim: Claim) -> None:
        with self._lock:
            self._held.pop(claim.path, None)
        owner = self._read_owner(claim.path)
        if isinstance(owner, dict) and owner.get("run_id") == self.run_id \
                and owner.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                claim.path.unlink()

    def release_all(self) -> None:
        with self._lock:
            claims = list(self._held.values())
        for claim in claims:
            self.release(claim)

    def touch_claims(self) -> None:
        """Refresh the mtime of every held claim (the heartbeat seen by other hosts)."""
        with self._lock:
            paths = list(self._held)
        for path in paths:
            with contextlib.suppress(OSError):
                os.utime(path)

    def start_heartbeat(self, interval: float = HEARTBEAT_S) -> None:
        if self._heartbeat is not None:
            return

        def beat():
            while not self._stop.wait(interval):
                self.touch_claims()

        self._heartbeat = threading.Thread(target=beat, name="claim-heartbeat", daemon=True)
        self._heartbeat.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
            self._heartbeat = None
