"""``scorebench ls scorers|tasks|profiles``."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table


def register(sub, common):
    p = sub.add_parser("ls", parents=[common], help="list scorers, tasks or profiles")
    p.add_argument("what", choices=["scorers", "tasks", "profiles"])
    p.add_argument("pattern", nargs="?", default="*", help="wildcard filter, e.g. 'entmax*'")
    p.set_defaults(func=run)


def run(args) -> int:
    # A pipe or a file gets the whole table rather than columns cut to 80 characters.
    console = Console(width=None if sys.stdout.isatty() else 240)
    if args.what == "scorers":
        import scorers

        table = Table(title="scorers")
        columns = ["name", "aliases", "family", "kind", "normalization", "trainable", "fast_path",
                   "fast_forms", "paper", "version"]
        for c in columns:
            table.add_column(c)
        for name in scorers.list_scorers(args.pattern):
            info = scorers.scorer_info(name)
            table.add_row(*[", ".join(info[c]) if isinstance(info[c], list) else str(info[c])
                            for c in columns])
        console.print(table)
        return 0
    if args.what == "tasks":
        return _tasks(console, args.pattern)
    return _profiles(console, args.pattern)


def _tasks(console, pattern: str) -> int:
    import dataclasses
    import inspect

    import tasks

    table = Table(title="tasks (`scorebench run --dry-run` shows a profile's configs)")
    for c in ("name", "version", "track", "headline metrics", "metrics", "config keys",
              "description"):
        table.add_column(c, overflow="fold")
    for name in tasks.list_tasks(pattern):
        cls = tasks.get_task_class(name)
        headline = [m for m, spec in cls.metrics.items() if spec.headline]
        keys = len(dataclasses.fields(cls.Config)) if hasattr(cls, "Config") else 0
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "").split("\n")[0]
        table.add_row(name, str(cls.version), cls.track, ", ".join(headline),
                      str(len(cls.metrics)), str(keys), doc)
    console.print(table)
    return 0


def _profiles(console, pattern: str) -> int:
    import fnmatch

    from rich.markup import escape

    from ..profiles import DEFAULT_PROFILE, ProfileError, list_profiles, load_profile

    table = Table(title="profiles (or pass --profile FILE.toml; a file extends cpu by default)")
    for c in ("name", "description", "tasks", "scorers", "seeds", "time limit / cell"):
        table.add_column(c, overflow="fold")
    for name, description in list_profiles().items():
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        try:
            p = load_profile(name)
        except ProfileError as e:
            table.add_row(name, f"[red]{escape(str(e))}", "", "", "", "")
            continue
        shown = [", ".join(x) if isinstance(x, list) else x for x in (p.tasks, p.scorers)]
        limit = f"{p.time_limit_s:g} s" if p.time_limit_s else "none"
        table.add_row(name + (" (default)" if name == DEFAULT_PROFILE else ""), description, *shown,
                      ", ".join(map(str, p.seeds)), limit)
    console.print(table)
    return 0
