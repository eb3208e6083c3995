"""Settings every test module shares."""
from __future__ import annotations

import os

import pytest
import torch


def pytest_configure(config):
    """Under pytest-xdist, each worker takes its share of the cores as torch's intra-op threads:
    N workers of N threads each oversubscribe N cores (the training tests ran 12% slower so)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)
        torch.set_num_threads(max(1, cores // int(workers)))


@pytest.fixture
def one_thread():
    """One intra-op thread: the tiny models' fast setting (and the cpu profile's), much faster on
    a busy machine. A module takes it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
