"""Subcommands of the ``scorebench`` CLI, one module each (see ``suite.cli``)."""
