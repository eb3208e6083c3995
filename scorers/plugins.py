"""Scorers from outside the package: a plugin file (``scorebench --plugin FILE.py``,
:func:`load_plugin`) or an installed package's entry point in the ``scorebench.scorers`` group
(:func:`load_entry_points`). A failure to import is recorded in ``PLUGIN_FAILURES``, never raised:
the other scorers stay usable."""
from __future__ import annotations

import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ENTRY_POINT_GROUP = "scorebench.scorers"


@dataclass(frozen=True)
class PluginFailure:
    source: str
    traceback: str


PLUGIN_FAILURES: list[PluginFailure] = []


def load_plugin(path: str | Path, *, report: bool = True) -> bool:
    """Import a Python file that registers scorers. A failure is recorded in ``PLUGIN_FAILURES``
    (and printed unless ``report`` is false), not raised."""
    path = Path(path)
    module_name = f"scorebench_plugin_{path.stem}"
    try:
        if not path.is_file():
            raise FileNotFoundError(f"plugin file {str(path)!r} does not exist")
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return True
    except Exception:
        sys.modules.pop(module_name, None)
        PLUGIN_FAILURES.append(PluginFailure(str(path), traceback.format_exc()))
        if report:
            print(f"scorebench: plugin {path} failed to import; other scorers are unaffected:\n"
                  f"{PLUGIN_FAILURES[-1].traceback}", file=sys.stderr)
        return False


def load_entry_points() -> None:
    """Import the scorers that installed packages declare in the `scorebench.scorers` group."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception:
            PLUGIN_FAILURES.append(PluginFailure(f"entry point {ep.name} = {ep.value}",
                                                 traceback.format_exc()))
            print(f"scorebench: entry point {ep.value!r} failed to import; other scorers are "
                  f"unaffected:\n{PLUGIN_FAILURES[-1].traceback}", file=sys.stderr)
