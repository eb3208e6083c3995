"""Which records a release uses: records of an older task, scorer or harness version, and the
untuned records of a task that has records of the tuning protocol in the same profile, are
superseded (listed, never mixed in: a tuned scorer is never compared with an untuned one), and so
are the reporting records of a point the tuning protocol chose before it chose another for the
same scorer and grid (a grid grown since, a changed rule: the point whose reporting record
finished last is the choice); a task run under several configs in one profile gets one profile
label per config; of two records of one cell, the one that finished last is kept. The tuning
protocol's sweep records follow the reporting records' versions: a sweep record of an older task,
scorer or harness version than the board's is left out (:func:`current`), so a tuning table, a
rule's choice or a neighbour check never mixes two protocols.

A skipped record (n/a: the scorer cannot run the task) holds under any recipe: it is never
superseded as untuned, and it joins its task's setting when the task ran under one config in
its profile."""
from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import replace

from .records import LoadedRecords, Problem, Record


class Newest:
    """The newest task, scorer and harness (records) versions among some records."""

    def __init__(self, records: list[Record]):
        self.task: dict[str, int] = {}
        self.scorer: dict[str, int] = {}
        self.records = max((r.records_version for r in records), default=0)
        for r in records:
            self.task[r.task] = max(self.task.get(r.task, r.task_version), r.task_version)
            self.scorer[r.scorer] = max(self.scorer.get(r.scorer, r.scorer_version),
                                        r.scorer_version)

    def older(self, r: Record) -> list[str]:
        """Why ``r`` is of an older version than these (empty: it is not)."""
        reasons = []
        if r.task_version < self.task.get(r.task, r.task_version):
            reasons.append(f"task {r.task} v{r.task_version} < v{self.task[r.task]}")
        if r.scorer_version < self.scorer.get(r.scorer, r.scorer_version):
            reasons.append(f"scorer {r.scorer} v{r.scorer_version} < v{self.scorer[r.scorer]}")
        if r.records_version < self.records:
            reasons.append(f"records v{r.records_version} < v{self.records}")
        return reasons


def current(loaded: LoadedRecords) -> LoadedRecords:
    """``loaded`` with the current records alone (:func:`split_superseded`) and the sweep records
    of their versions (of a task or scorer without reporting records yet, the newest sweeps')."""
    versions = Newest(loaded.sweeps)
    reported = Newest(loaded.records)
    versions.task.update(reported.task)
    versions.scorer.update(reported.scorer)
    if loaded.records:
        versions.records = reported.records
    sweeps = [r for r in loaded.sweeps
              if (r.task_version, r.scorer_version, r.records_version)
              == (versions.task[r.task], versions.scorer[r.scorer], versions.records)]
    return replace(loaded, records=split_superseded(loaded.records)[0], sweeps=sweeps)


def split_superseded(records: list[Record]) -> tuple[list[Record], list[dict]]:
    """(the current records, one row per group of superseded records with the reason)."""
    newest = Newest(records)
    tuned = {(r.task, r.profile) for r in records if r.role == "tuned"}
    chosen = latest_choices(records)
    current, old = [], Counter()
    for r in records:
        reasons = []
        point = _point(r)
        if point is not None and point != chosen[_choice_key(r)]:
            reasons.append(f"tuned at {_label(point)}, which the tuning protocol no longer "
                           f"chooses (its latest choice: {_label(chosen[_choice_key(r)])})")
        if r.role != "tuned" and r.status != "skipped" and (r.task, r.profile) in tuned:
            reasons.append(f"untuned: {r.task} has records of the tuning protocol in profile "
                           f"{r.profile}, which replace the shared recipe's")
        reasons += newest.older(r)
        if reasons:
            old[(r.task, r.task_version, r.scorer_label, r.scorer_version, r.profile,
                 "; ".join(reasons))] += 1
        else:
            current.append(r)
    superseded = [dict(task=t, task_version=tv, scorer=s, scorer_version=sv, profile=p,
                       n_cells=n, reason=why)
                  for (t, tv, s, sv, p, why), n in sorted(old.items())]
    return current, superseded


def _point(r: Record) -> dict | None:
    point = (r.tuning or {}).get("point") if r.role == "tuned" else None
    return point if isinstance(point, dict) else None


def _choice_key(r: Record) -> tuple:
    return r.task, r.profile, r.scorer_label, r.config_key


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(point.items()))


def latest_choices(records: list[Record]) -> dict[tuple, dict]:
    """(task, profile, scorer, setting) -> the point of the tuned record that finished last."""
    latest: dict[tuple, tuple[str, dict]] = {}
    for r in records:
        point = _point(r)
        if point is None:
            continue
        stamp = str(r.provenance.get("finished", ""))
        key = _choice_key(r)
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, point)
    return {key: point for key, (_, point) in latest.items()}


def setting_labels(records: list[Record]) -> dict[tuple[str, str, str], str]:
    """(task, profile, config) -> the profile label of its rows: the profile name, or
    ``profile@<config hash>`` when one task ran under several configs in that profile (the
    configs of skipped records count only where the task has no other)."""
    configs: dict[tuple[str, str], set[str]] = defaultdict(set)
    skipped: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        (skipped if r.status == "skipped" else configs)[(r.task, r.profile)].add(r.config_key)
    labels = {}
    for setting in configs.keys() | skipped.keys():
        task, profile = setting
        keys = configs.get(setting) or skipped[setting]
        for key in keys | skipped.get(setting, set()):
            digest = hashlib.sha256(key.encode()).hexdigest()[:6]
            labels[(task, profile, key)] = profile if len(keys) == 1 else f"{profile}@{digest}"
    return labels


def deduplicate(records: list[Record], label_of) -> tuple[list[Record], list[Problem]]:
    """One record per (profile label, task, scorer, seed): the latest finished wins."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        groups[(label_of(r), r.task, r.scorer_label, r.seed)].append(r)
    kept, problems = [], []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda r: (str(r.provenance.get("finished", "")), r.path))
        kept.append(group[-1])
        for r in group[:-1]:
            problems.append(Problem(r.path, f"another record of the same cell ({group[-1].path}) "
                                            "finished later; this one is left out"))
    return kept, problems

