"""Before a run plans its cells, every scorer of the selection from outside the scorers package
(a plugin's, an entry point's) runs once on a tiny input, forward and backward
(:func:`scorers.trial.trial`): a broken one stops the command in seconds with its own traceback,
rather than failing each of its cells or being timed like softmax by a dry run."""
from __future__ import annotations


def check_new_scorers(cells, command: str = "run") -> None:
    """``SystemExit`` naming each scorer among ``cells``' that is not built in and cannot run."""
    from scorers.trial import is_builtin, trial

    from leaderboard.loading.schema import canonical_json

    tried: dict[tuple[str, str], dict] = {}
    for cell in cells:
        if not is_builtin(cell.scorer):
            tried.setdefault((cell.scorer, canonical_json(cell.scorer_kwargs)), cell.scorer_kwargs)
    failures = [f for f in (trial(name, kwargs) for (name, _), kwargs in tried.items()) if f]
    if not failures:
        return
    names = ",".join(dict.fromkeys(f.scorer for f in failures))
    plugins = " ".join(f"--plugin {p}" for p in dict.fromkeys(f.defined_in for f in failures))
    raise SystemExit(
        f"scorebench {command}: scorer {names} cannot run, so each of its cells would fail; fix "
        f"it, or leave it out of --scorers (`scorebench check {plugins} --scorers {names}` runs "
        "the scorer checks on it):\n" + "".join(f.report() for f in failures).rstrip("\n"))
