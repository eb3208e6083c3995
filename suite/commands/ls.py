"""``scorebench ls scorers|tasks|profiles``."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table


def register(sub, common):
    p = sub.add_parser("ls", parents=[common], help="list scorers, tasks or profiles")
    p.add_argument("what", choices=["scorers", "tasks", "profiles"])
    p.add_argument("pattern", nargs="?", default="*", help="wildcard filter, e.g. 'entmax*'")
    p.set_defaults(func=run)


def run(args) -> int:
    console = Console()
    if args.what == "scorers":
        import scorers

        table = Table(title="scorers")
        columns = ["name", "aliases", "family", "kind", "normalization", "trainable", "fast_path",
                   "paper", "version"]
        for c in columns:
            table.add_column(c)
        for name in scorers.list_scorers(args.pattern):
            info = scorers.scorer_info(name)
            table.add_row(*[", ".join(info[c]) if isinstance(info[c], list) else str(info[c])
                            for c in columns])
        console.print(table)
        return 0
    raise SystemExit(f"scorebench ls {args.what}: not available yet")
