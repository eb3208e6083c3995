"""Constructed result records for the leaderboard tests: valid schema-1 records built in code and
written as JSON files under ``<root>/<task>/<scorer>/<cell_id>.json`` (the harness's layout)."""
from __future__ import annotations

import json
from pathlib import Path

from leaderboard.loading.schema import cell_id, dumps, validate_record

DEFAULT_SPECS = {"error": {"direction": "lower", "headline": True, "floor": 1.0, "ceiling": 0.0},
                 "accuracy": {"direction": "higher", "headline": False}}


def make_record(task="icl_linear", scorer="softmax", seed=0, metrics=None, *, status="ok",
                track="icl", task_version=1, scorer_version=1, scorer_kwargs=None, profile="cpu",
                config=None, specs=None, items=None, grids=None, message="", step=100,
                finished="2025-01-02T03:04:05.000000+00:00", git_sha="0123456789abcdef",
                git_dirty=False, hardware="Test CPU, 2 cores") -> dict:
    cell = {"task": task, "task_version": task_version, "track": track, "scorer": scorer,
            "scorer_version": scorer_version, "scorer_kwargs": scorer_kwargs or {},
            "profile": profile, "seed": seed, "config": config or {"n_layer": 2}}
    if metrics is None:
        metrics = {}
    specs = specs if specs is not None else {k: v for k, v in DEFAULT_SPECS.items()
                                             if k in metrics} or dict(DEFAULT_SPECS)
    record = {
        "schema_version": 1, "cell_id": cell_id(cell), "cell": cell, "status": status,
        "message": message, "step": step, "metrics": metrics if status == "ok" else {},
        "metric_specs": specs, "grids": grids or {}, "items": items or {}, "extra": {},
        "provenance": {"git_sha": git_sha, "git_dirty": git_dirty, "harness_version": "0.1.0",
                       "packages": {"python": "3.11"}, "device": "cpu", "hardware": hardware,
                       "host": "testhost", "dtype": "float32", "wall_time_s": 1.0,
                       "peak_memory_mb": 10.0, "started": finished, "finished": finished},
    }
    return validate_record(record)


def write_record(root: Path, record: dict) -> Path:
    cell = record["cell"]
    path = Path(root) / cell["task"] / cell["scorer"] / f"{record['cell_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(record), encoding="utf-8")
    return path


def write_raw(root: Path, relpath: str, text: str) -> Path:
    path = Path(root) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def grid(values, rows_name="T", cols_name="sigma") -> dict:
    return {"rows_name": rows_name, "cols_name": cols_name,
            "rows": list(range(len(values))), "cols": list(range(len(values[0]))),
            "values": values}


def populate(root: Path, offsets: dict[str, float], *, seeds=(0, 1, 2), n_items=40,
             task="icl_linear", track="icl", noise=0.02, rng_seed=0, with_grid=True,
             **kwargs) -> None:
    """Records for every scorer in ``offsets``: per-item 0/1 errors whose rate is
    0.2 + offset + a seed effect shared by all scorers, and (``with_grid``) a 2x3 grid."""
    import numpy as np

    rng = np.random.default_rng(rng_seed)
    seed_effect = {s: rng.normal(0, noise) for s in seeds}
    uniforms = {s: rng.random(n_items) for s in seeds}
    for scorer, offset in offsets.items():
        for s in seeds:
            rate = 0.2 + offset + seed_effect[s]
            items = (uniforms[s] < rate).astype(float).tolist()
            err = float(np.mean(items))
            write_record(root, make_record(
                task, scorer, s, {"error": err, "accuracy": 1 - err}, track=track,
                items={"error": items},
                grids={"ood_error": grid([[err, err * 2, err * 3], [err * 4, err * 5, 1.0]])}
                if with_grid else {},
                **kwargs))


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
