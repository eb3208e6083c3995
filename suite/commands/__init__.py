"""Subcommands of the ``scorebench`` CLI, one module each (see ``suite.cli``)."""
from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts; argparse prefixes the error with the option's name."""
    try:
        n = int(text)
        if n >= 1:
            return n
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r}: give an integer >= 1")
