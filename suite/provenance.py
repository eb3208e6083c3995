"""Where and with what a cell ran: git state, package versions, hardware, memory, times."""
from __future__ import annotations

import functools
import os
import platform
import resource
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from leaderboard.loading.schema import RECORDS_VERSION

PACKAGES = ("scorebench", "torch", "numpy", "entmax", "scipy", "tokenizers", "safetensors")
HARNESS_DIR = Path(__file__).resolve().parent.parent
# What the board writes into the checkout (records, releases, the index page): outputs of cells,
# not inputs, so uncommitted ones do not make the harness dirty.
BOARD_PATHS = ("leaderboard/records", "leaderboard/releases", "LEADERBOARD.md")


def utc_now() -> str:
    """ISO-8601 UTC time, e.g. ``2025-01-31T12:00:00.123456+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@functools.lru_cache(maxsize=None)
def git_state(directory: Path = HARNESS_DIR) -> tuple[str | None, bool | None]:
    """(sha, dirty) of the git checkout holding the harness, or (None, None) outside one; dirty
    means uncommitted changes outside ``BOARD_PATHS``."""
    def git(*args):
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=30)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != directory.resolve():
            return None, None
        sha = git("rev-parse", "HEAD")
        if sha.returncode != 0:
            return None, None
        status = git("status", "--porcelain", "--", ".", *(f":(exclude){p}" for p in BOARD_PATHS))
        return sha.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None, None


@functools.lru_cache(maxsize=None)
def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def harness_version() -> str:
    return package_versions().get("scorebench", "unknown")


@functools.lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def hardware(device: str) -> str:
    """Human-readable hardware: ``"1x NVIDIA H100 80GB HBM3"`` or ``"AMD EPYC 7B13, 2 cores"``."""
    if device.startswith("cuda"):
        import torch

        return f"1x {torch.cuda.get_device_name(torch.device(device))}"
    return f"{cpu_model()}, {usable_cpus()} cores"


def reset_peak_memory(device: str) -> None:
    """Start a fresh peak-memory window (Linux: resets VmHWM through /proc/self/clear_refs)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.reset_peak_memory_stats()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_memory_mb(device: str) -> float | None:
    """Peak memory since :func:`reset_peak_memory`: GPU memory allocated by torch on CUDA, the
    process's peak resident set size on CPU."""
    if device.startswith("cuda"):
        import torch

        return round(torch.cuda.max_memory_allocated() / 2**20, 1)
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _torch_threads() -> int | None:
    """Intra-op threads: CPU results are bit-identical only at a fixed thread count."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _cpu_capability() -> str | None:
    """The vector instruction set of torch's CPU kernels (``"AVX2"``, ``"AVX512"``; the
    ``ATEN_CPU_CAPABILITY`` environment variable picks a lower one): the same training on hosts of
    different capability takes different rounding, so its curves part within a few hundred steps."""
    torch = sys.modules.get("torch")
    return torch.backends.cpu.get_cpu_capability() if torch is not None else None


def provenance(*, device: str, dtype: str, wall_time_s: float, peak_mb: float | None,
               started: str, finished: str, hardware_name: str | None = None) -> dict:
    sha, dirty = git_state()
    return {
        "git_sha": sha, "git_dirty": dirty, "harness_version": harness_version(),
        "records_version": RECORDS_VERSION,
        "packages": package_versions(), "device": device,
        "hardware": hardware_name or hardware(device),
        "host": socket.gethostname(), "dtype": dtype, "threads": _torch_threads(),
        "cpu_capability": _cpu_capability(),
        "wall_time_s": round(wall_time_s, 3), "peak_memory_mb": peak_mb, "started": started, "finished": finished,
    }
