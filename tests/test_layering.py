"""The packages' layering, as the import-linter contracts of pyproject.toml state it: registry
imports no scorebench package, scorers none of tasks/suite/leaderboard, tasks neither suite nor
leaderboard, leaderboard neither tasks nor scorers, inside leaderboard publishing over rendering
over the method over loading records, and no two modules or subpackages of a package import each
other."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import importlinter  # noqa: F401  (the dev extra: pip install import-linter)

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def lint(config: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            f"sys.exit(lint_imports(config_filename={str(config)!r}, no_cache=True, "
            "no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True)


def test_the_import_contracts_hold():
    result = lint(ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


def test_no_contract_has_exceptions():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert [c["name"] for c in config["contracts"] if c.get("ignore_imports")] == []


def test_a_broken_contract_is_caught(tmp_path):
    """The same check fails when scorers may not import registry (they do)."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["registry", "scorers"]\n\n'
                      '[[tool.importlinter.contracts]]\nname = "no registry"\n'
                      'type = "forbidden"\nsource_modules = ["scorers"]\n'
                      'forbidden_modules = ["registry"]\n')
    result = lint(config)
    assert result.returncode != 0 and "scorers.registry -> registry" in result.stdout
