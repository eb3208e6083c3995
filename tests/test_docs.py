"""The documentation in docs/ matches the code and every cited page exists: the generated registry
table of docs/scorers.md, a section per scorer and per task, and every documentation path cited in
the package, the tests, the README and docs/ (files and heading anchors), none outside the
repository."""
from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

import scorers
import tasks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("scorers", "tasks", "suite", "leaderboard", "scripts", "tests", "docs")
SKIPPED = ("leaderboard/records", "leaderboard/releases")
SUFFIXES = (".py", ".md", ".toml")
EXTRA_FILES = ("README.md", "pyproject.toml", ".ci/run")

# A path into the repository that ends in .md, with an optional heading anchor.
CITED_PATH = re.compile(
    r"(?<![\w./-])((?:docs|scorers|tasks|suite|leaderboard|scripts|tests)/[\w./-]*?\.md)"
    r"(#[\w-]+)?(?![\w/-])")
MARKDOWN_LINK = re.compile(r"\]\(([^()\s]+)\)")
# The specifications that once lived outside the repository, and the schema's former place.
OUTSIDE = re.compile(r"shared[/ ](?:docs|folder)|\b(?:DESIGN|SCORERS|TASKS|SCHEMA)\.md\b")


def load_script():
    spec = importlib.util.spec_from_file_location("scorer_docs", ROOT / "scripts" / "scorer_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFC", heading.strip().lower())
    text = "".join(c for c in text if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The headings of a markdown file, outside fenced code."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip())
    return out


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(path):
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def scanned_files(root: Path) -> list[Path]:
    files = [root / f for f in EXTRA_FILES if (root / f).is_file()]
    for top in SCANNED:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.suffix in SUFFIXES and path.is_file() and not rel.startswith(SKIPPED) \
                    and path.resolve() != Path(__file__).resolve():
                files.append(path)
    return files


def _target_problem(root: Path, source: Path, target: Path, anchor: str) -> str | None:
    try:
        target.resolve().relative_to(root.resolve())
    except ValueError:
        return "points outside the repository"
    if not target.exists():
        return "does not exist"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"has no heading with anchor #{anchor}"
    return None


def bad_references(root: Path) -> list[str]:
    """Every cited documentation path under ``root`` that is missing, lacks its anchor or points
    outside ``root``, and every mention of the specifications that were outside the repository."""
    problems = []
    for path in scanned_files(root):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        for n, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{n}"
            for m in OUTSIDE.finditer(line):
                problems.append(f"{where}: {m.group(0)!r} names a document outside the repository; "
                                "cite docs/ instead")
            for m in CITED_PATH.finditer(line):
                why = _target_problem(root, path, root / m.group(1), (m.group(2) or "#")[1:])
                if why:
                    problems.append(f"{where}: {m.group(0)} {why}")
            if path.suffix != ".md":
                continue
            for m in MARKDOWN_LINK.finditer(line):
                link = m.group(1)
                if re.match(r"[a-z]+:", link):
                    continue   # http:, https:, mailto:
                file, _, anchor = link.partition("#")
                target = (path.parent / file) if file else path
                why = _target_problem(root, path, target, anchor)
                if why:
                    problems.append(f"{where}: link ({link}) {why}")
    return problems


def test_every_cited_doc_path_exists_inside_the_repository():
    problems = bad_references(ROOT)
    assert not problems, "\n".join(problems)


def test_the_check_finds_planted_bad_references(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tasks.md").write_text("# Tasks\n\n## icl_linear\n\nSee [x](missing.md).\n")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "a.py").write_text(
        '"""Data (docs/tasks.md#icl_linear), (docs/tasks.md#icl_quantifiers), docs/nowhere.md,\n'
        'suite/SCHEMA.md and the %s folder."""\n' % "/".join(("shared", "docs")))
    (tmp_path / "README.md").write_text("[ok](docs/tasks.md#icl_linear) [out](../x.md)\n")
    problems = "\n".join(bad_references(tmp_path))
    assert "tasks/a.py:1: docs/tasks.md#icl_quantifiers has no heading" in problems
    assert "docs/nowhere.md does not exist" in problems
    assert "'SCHEMA.md'" in problems and "a.py:2: 'shared" in problems
    assert "link (missing.md) does not exist" in problems
    assert "link (../x.md) points outside the repository" in problems
    assert "icl_linear has" not in problems and "(docs/tasks.md#icl_linear)" not in problems


def test_slugs_follow_github():
    assert slug("The paper's numbers") == "the-papers-numbers"
    assert slug("bench_scorers and bench_train") == "bench_scorers-and-bench_train"
    assert slug("Fully-masked rows") == "fully-masked-rows"


def test_scorer_registry_block_is_generated_from_the_registry():
    script = load_script()
    text = (DOCS / "scorers.md").read_text(encoding="utf-8")
    assert script.render(text) == text, \
        "docs/scorers.md's registry table is out of date: run python scripts/scorer_docs.py"


def test_the_registry_table_lists_every_builtin_scorer_with_its_metadata():
    """Independent of the generator: each built-in scorer's row holds its own metadata."""
    text = (DOCS / "scorers.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(\w+)`", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    builtin = [n for n in scorers.list_scorers()
               if scorers.get_scorer_class(n).__module__.startswith("scorers.")]
    assert len(builtin) >= 21
    for name in builtin:
        assert name in rows, f"docs/scorers.md's registry table has no row for {name}"
        info = scorers.scorer_info(name)
        row = rows[name]
        assert row[1] == info["family"] and row[3] == info["normalization"], (name, row)
        assert row[2].startswith(info["kind"]) and ("causal only" in row[2]) == info["causal_only"]
        assert re.findall(r"`(\w+)`", row[6]) == info["fast_forms"], (name, row[6])
        assert re.findall(r"`(\w+)`", row[4]) == info["trainable"], (name, row[4])
        for key, default in info["parameters"].items():
            assert f"`{key}={default!r}`" in row[5], (name, key, row[5])
        assert row[7] == str(info["version"]) and row[8] == info["paper"], (name, row)


def test_every_builtin_scorer_has_a_formula_section():
    sections = set(headings(DOCS / "scorers.md"))
    for name in scorers.list_scorers():
        if scorers.get_scorer_class(name).__module__.startswith("scorers."):
            assert name in sections, f"docs/scorers.md has no '### {name}' section"


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_every_task_has_a_section_naming_its_headline_metrics(name):
    text = (DOCS / "tasks.md").read_text(encoding="utf-8")
    sections = headings(DOCS / "tasks.md")
    assert any(name in re.findall(r"\w+", h) for h in sections), \
        f"docs/tasks.md has no section for task {name}"
    cls = tasks.get_task_class(name)
    if cls.on_request:
        return   # the cost track's metric names depend on the measured shapes and backbones
    for metric, spec in cls.metrics.items():
        if spec.headline:
            assert f"`{metric}`" in text, f"docs/tasks.md does not name {name}'s headline {metric}"
