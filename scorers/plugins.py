"""Scorers from outside the package: a plugin file (``scorebench --plugin FILE.py``,
:func:`load_plugin`) or an installed package's entry point in the ``scorebench.scorers`` group
(:func:`load_entry_points`). A failure to import is recorded in ``PLUGIN_FAILURES``, never raised:
the other scorers stay usable."""
from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ENTRY_POINT_GROUP = "scorebench.scorers"


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that did not import: ``reason`` in one line, and ``traceback`` the frames of the
    code that raised (empty when there was no code to run: a missing or unreadable file)."""

    source: str
    reason: str
    traceback: str = ""


PLUGIN_FAILURES: list[PluginFailure] = []


def load_plugin(path: str | Path, *, report: bool = True) -> bool:
    """Import a Python file that registers scorers. A failure is recorded in ``PLUGIN_FAILURES``
    (and printed unless ``report`` is false), not raised: a file that cannot be imported at all
    in one line, a plugin whose code raised with the frames from its own code on."""
    path = Path(path)
    module_name = f"scorebench_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path) if path.is_file() else None
    if spec is None:
        failure = PluginFailure(str(path), _not_a_plugin_file(path))
    else:
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return True
        except Exception as exc:
            sys.modules.pop(module_name, None)
            failure = _plugin_failure(path, exc)
    PLUGIN_FAILURES.append(failure)
    if report:
        said = f":\n{failure.traceback}" if failure.traceback else f": {failure.reason}\n"
        print(f"scorebench: plugin {path} failed to import; other scorers are unaffected{said}",
              end="", file=sys.stderr)
    return False


def _not_a_plugin_file(path: Path) -> str:
    if not path.exists():
        where = "" if path.is_absolute() else f" (looked for {path.absolute()})"
        return f"plugin file {str(path)!r} does not exist{where}"
    if path.is_dir():
        return f"plugin file {str(path)!r} is a directory, not a Python file"
    return f"plugin file {str(path)!r} is not a Python source file (name it *.py)"


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def own_frames(exc: BaseException, file: str | Path) -> str | None:
    """``exc``'s traceback cut to the frames from ``file``'s first one on (the loader's or the
    harness's frames above it say nothing about that file's code); None when no frame is in
    ``file``."""
    own = os.path.realpath(file)
    report = traceback.TracebackException.from_exception(exc)
    first = next((i for i, frame in enumerate(report.stack)
                  if os.path.realpath(frame.filename) == own), None)
    if first is None:
        return None
    report.stack = traceback.StackSummary.from_list(report.stack[first:])
    return "".join(report.format())


def _plugin_failure(path: Path, exc: BaseException) -> PluginFailure:
    """The failure of a plugin's import, its traceback cut to the plugin file's frames."""
    reason = one_line(exc)
    frames = own_frames(exc, path)
    if frames is not None:
        return PluginFailure(str(path), reason, frames)
    if isinstance(exc, SyntaxError) and exc.filename and (
            os.path.realpath(exc.filename) == os.path.realpath(path)):
        report = traceback.TracebackException.from_exception(exc)
        report.stack = traceback.StackSummary()  # the file, line and caret say it all
        return PluginFailure(str(path), reason, "".join(report.format()))
    return PluginFailure(str(path), f"cannot read plugin file {str(path)!r}: {reason}")


def load_entry_points() -> None:
    """Import the scorers that installed packages declare in the `scorebench.scorers` group."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:
            PLUGIN_FAILURES.append(PluginFailure(
                f"entry point {ep.name} = {ep.value}",
                one_line(exc), traceback.format_exc()))
            print(f"scorebench: entry point {ep.value!r} failed to import; other scorers are "
                  f"unaffected:\n{PLUGIN_FAILURES[-1].traceback}", file=sys.stderr)
