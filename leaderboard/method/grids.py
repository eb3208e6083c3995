"""The grids of a task (e.g. error over length and noise), averaged over a scorer's ``ok`` seeds;
a seed whose grid has other row or column labels is left out and named as a problem."""
from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np

from ..loading.records import Problem, Record


def mean_grids(profile: str, task: str, label: str, records: list[Record],
                problems: list[Problem]) -> list[dict]:
    by_name: dict[str, list[tuple[Record, dict]]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            for name, grid in r.grids.items():
                by_name[name].append((r, grid))
    out = []
    for name in sorted(by_name):
        first = by_name[name][0][1]
        shape = (first["rows"], first["cols"])
        stack = []
        for r, grid in by_name[name]:
            if (grid["rows"], grid["cols"]) != shape:
                problems.append(Problem(r.path, f"grid {name!r} has other row/column labels than "
                                                f"{by_name[name][0][0].path}; left out of the "
                                                "averaged grid", skipped=False))
                continue
            stack.append(np.array(grid["values"], dtype=np.float64))
        values = _nanmean(np.stack(stack), 0)
        out.append(dict(profile=profile, task=task, grid=name, scorer=label,
                        rows_name=first["rows_name"], cols_name=first["cols_name"],
                        rows=first["rows"], cols=first["cols"], values=values.tolist(),
                        n=len(stack)))
    return out


def _nanmean(a: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=axis)


# Grids that describe a task's evaluation items, not a scorer's outcome: the same for every
# scorer at a seed, since the items are drawn per seed. Each with what it measures.
DATA_GRIDS = {
    "distractor_rate": "the fraction of queries whose key also stands in the filler between the "
                       "context and the query, a token the model must not bind to the key's "
                       "value: an accuracy there also measures ignoring it",
}


def data_grids(grids: list[dict]) -> list[dict]:
    """The averaged grids of :data:`DATA_GRIDS`, once per (profile, task, grid): the grid of the
    scorers with the most seeds, where all of them agree (a scorer with fewer seeds averages
    other items), with ``scorers``, how many they are."""
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for g in grids:
        if g["grid"] in DATA_GRIDS:
            by_key[(g["profile"], g["task"], g["grid"])].append(g)
    out = []
    for key in sorted(by_key):
        most = max(g["n"] for g in by_key[key])
        group = [g for g in by_key[key] if g["n"] == most]
        first = group[0]
        values = np.array(first["values"], dtype=np.float64)
        if all((g["rows"], g["cols"]) == (first["rows"], first["cols"])
               and np.array_equal(np.array(g["values"], dtype=np.float64), values, equal_nan=True)
               for g in group[1:]):
            out.append({k: v for k, v in first.items() if k != "scorer"} | {"scorers": len(group)})
    return out
