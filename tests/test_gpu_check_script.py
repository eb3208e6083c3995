"""scripts/gpu_check.py runs on a CPU with --quick (the dry run of the GPU script): every check
(the blocked forms' with their variants among them) passes, the report is JSON, and the bench
writes cost records. The budget leaves room for a slow host: at 120 s (checks start until 72 s)
a 2-core CI host once reached four of the five paths then checked."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


@pytest.mark.slow
def test_quick_dry_run_on_cpu(tmp_path):
    out, results = tmp_path / "gpu_check.json", tmp_path / "results"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--quick",
                           "--budget-s", "600", "--paths", "dense,pivot,blocked,flex,fused,topk",
                           "--out", str(out), "--results", str(results)],
                          capture_output=True, text=True, timeout=900)
    report = json.loads(out.read_text())
    assert report["checks"], proc.stdout[-2000:] + proc.stderr[-2000:]
    bad = [c for c in report["checks"] if not c["ok"]]
    assert not bad, bad
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {c["path"] for c in report["checks"]} == {"flex", "fused", "topk", "dense", "pivot",
                                                    "blocked"}
    assert {r["scorer"] for r in report["bench"]["rows"]} >= {"softmax", "ssa", "entmax15"}
    assert list(results.rglob("*.json"))
