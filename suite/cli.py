"""The ``scorebench`` command line. Each subcommand lives in ``suite/commands/<name>.py`` and
exposes ``register(subparsers, common)``, where ``common`` is a parent parser with the options every
subcommand shares (``--plugin``)."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser, whose positionals may follow its options (``ls scorers --plugin
    f.py 'pat*'``: plain argparse takes the positionals of one run of words only)."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        nested = any(a.nargs in (argparse.PARSER, argparse.REMAINDER)
                     for a in self._get_positional_actions())
        if self._intermixing or nested:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                        help="import a Python file that registers scorers or tasks (repeatable)")
    parser = argparse.ArgumentParser(
        prog="scorebench",
        description="Benchmark attention scoring functions under one harness.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=CommandParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "plugin", None):
        import scorers

        for path in args.plugin:
            if not scorers.load_plugin(path, report=False):
                failure = scorers.PLUGIN_FAILURES[-1]
                if not failure.traceback:
                    print(f"scorebench: --plugin {path}: {failure.reason}; give the path of a "
                          "Python file or leave the option out", file=sys.stderr)
                    return 2
                print(f"scorebench: --plugin {path} failed to import, so the scorers and tasks it "
                      f"registers are missing; fix the file or leave the option out:\n"
                      f"{failure.traceback}", end="", file=sys.stderr)
                return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("scorebench: interrupted; finished cells are saved.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
