"""The release README a person can read (issue #51): per track a scorers × headline metrics
matrix, then per metric a statistics table of at most ten columns; no line over 200 characters
outside link lists; provenance stated once; n/a reasons as notes under their table; one number
of decimals per metric column; and a record's strings escaped in every markdown view."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from markdown_support import mark_of, markdown_tables, merged, row

from leaderboard.method.aggregate import build_board
from leaderboard.publishing.release import list_releases, load_release
from leaderboard.rendering.html.page import render_page
from leaderboard.rendering.markdown import leaderboard_index, release_readme
from leaderboard_fakes import make_record, write_record

ROOT = Path(__file__).resolve().parents[1]
MAX_COLUMNS, MAX_LINE = 10, 200
LINK_LIST = re.compile(r"^(\[[^\]]+\]: |- \[)")
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.(\d+))?(?:e[-+]\d+)?")

HOSTILE = ["<img src=x onerror=alert(1)>", "pipe|scorer", "tick`scorer`",
           "[link](javascript:alert(1))"]
HOSTILE_KWARGS = {"note": "<b>bold</b>|x"}
GPU_REASON = ("needs a GPU: the fused kernels of this scorer are not built for a CPU host, so "
              "the task cannot run it")
FAILURE = "loss | exploded <at> step 3"
HARDWARE = "Test CPU, 2 cores"
SHA = "0123456789abcdef"
# Per task, its headline metrics: lower or higher is better, anchors, and the typical value.
METRICS = {
    "task_alpha": {"error": ("lower", 1.0, 0.0, 0.2), "perplexity": ("lower", 1000.0, 1.0, 250.0),
                   "accuracy_in_distribution": ("higher", 0.0, 1.0, 0.6),
                   "accuracy_longest_sequences": ("higher", 0.0, 1.0, 0.3)},
    "task_beta": {"error_shifted_out_of_distribution": ("lower", 1.0, 0.0, 0.05),
                  "mse_over_zero_predictor": ("lower", 1.0, 0.0, 0.6),
                  "recall_at_the_longest_length": ("higher", 0.0, 1.0, 0.6)},
    "task_gamma": {"small_error": ("lower", 1.0, 0.0, 0.012), "big_error": ("lower", 1.0, 0.0,
                                                                             0.45)},
    # more metrics than one table can hold beside the scorer column
    "task_delta": {f"benchmark_accuracy_normalized_{i}": ("higher", 0.0, 1.0, 0.5)
                   for i in range(6)},
}


def scorers() -> dict[str, float]:
    """Scorer -> its offset from the baseline (relative): long names, hostile ones and one with
    hostile keyword arguments, from well below the baseline to well above it."""
    others = [*(f"a_rather_long_scorer_name_number_{i}" for i in range(8)), *HOSTILE, "plain"]
    return {"softmax": 0.0, **{name: (i - 6) * 0.08 for i, name in enumerate(others)}}


def write_board(root: Path) -> None:
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 0.02, 5)
    for task, metrics in METRICS.items():
        specs = {m: {"direction": d, "headline": True, "floor": f, "ceiling": c}
                 for m, (d, f, c, _) in metrics.items()}
        for scorer, offset in scorers().items():
            kwargs = HOSTILE_KWARGS if scorer == "plain" else None
            for seed in range(5):
                values = {m: typical * (1 + offset + seed_effect[seed] + rng.normal(0, 0.01))
                          for m, (_, _, _, typical) in metrics.items()}
                values = {m: min(v, 1.0) if metrics[m][0] == "higher" else v
                          for m, v in values.items()}
                if scorer == HOSTILE[1] and seed == 4:
                    write_record(root, make_record(task, scorer, seed, status="diverged", step=3,
                                                   message=FAILURE, specs=specs,
                                                   hardware=HARDWARE, git_sha=SHA))
                    continue
                write_record(root, make_record(task, scorer, seed, values, specs=specs,
                                               scorer_kwargs=kwargs, hardware=HARDWARE,
                                               git_sha=SHA))
            if scorer == "softmax":
                for seed in range(5):
                    write_record(root, make_record(task, "gpu_only", seed, status="skipped",
                                                   message=GPU_REASON, specs=specs,
                                                   hardware=HARDWARE, git_sha=SHA))


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    write_board(root)
    return build_board(root, n_boot=200).with_release("r1")


@pytest.fixture(scope="module")
def readme(board):
    return release_readme(board, [])


def table_lines(text: str) -> list[list[str]]:
    """Each table of ``text`` as its lines."""
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def separators(line: str) -> int:
    """The cell separators of a table line: its pipes that no backslash escapes."""
    return len(re.findall(r"(?<!\\)\|", line))


def assert_readable(text: str) -> None:
    """No line over MAX_LINE characters outside link lists; no table over MAX_COLUMNS columns,
    and every line of a table with as many cells as its header."""
    long = [line for line in text.splitlines()
            if len(line) > MAX_LINE and not LINK_LIST.match(line)]
    assert not long, long[:3]
    for lines in table_lines(text):
        assert separators(lines[0]) - 1 <= MAX_COLUMNS, lines[0]
        assert {separators(line) for line in lines} == {separators(lines[0])}, lines[0]


def decimal_places(cell: str) -> set[int]:
    return {len(m.group(1) or "") for m in NUMBER.finditer(cell)}


def metric_tables(readme_text: str) -> dict[str, dict]:
    """The per-metric statistics tables, by their heading (task · metric ↑/↓)."""
    return {heading: tables[0] for heading, tables in markdown_tables(readme_text).items()
            if " · " in heading}


def test_the_readme_is_narrow_tables_of_few_columns(board, readme):
    assert_readable(readme)
    tables = markdown_tables(readme)
    # The track opens with its matrix, split by task where one would be too wide, then one
    # statistics table per headline metric.
    matrix = merged(tables["In-context learning (ICL)"])
    heads = [f"{task} · {metric} {'↓' if d == 'lower' else '↑'}"
             for task, metrics in METRICS.items() for metric, (d, *_) in metrics.items()]
    assert len(tables["In-context learning (ICL)"]) >= 2
    assert set(matrix["softmax"]) == {"scorer", *heads}
    assert set(metric_tables(readme)) == set(heads)
    for stats in metric_tables(readme).values():
        assert stats["headers"] == ["scorer", "mean [95% CI]", "normalized", "Δ vs softmax",
                                    "p (Holm)", "p (BH)", "tier", "rank", "n", "failures"]


def test_the_matrix_marks_each_mean_against_the_baseline(board, readme):
    rows = {(r["task"], r["metric"], r["scorer"]): r for r in board.rows.to_dict("records")}
    matrix = merged(markdown_tables(readme)["In-context learning (ICL)"])
    marks = {"better": "▲", "worse": "▼", "uninformative": "–"}
    for (task, metric, scorer), r in rows.items():
        if scorer == "gpu_only":   # runs none of the section's tasks: named above its tables
            assert scorer not in matrix
            continue
        column = next(h for h in matrix["softmax"] if h.startswith(f"{task} · {metric} "))
        cell = matrix[scorer][column]
        if scorer == "softmax" or not r["n"]:
            assert not re.search("[▲▼·–]$", cell)
            continue
        assert cell.endswith(marks.get(r["vs_baseline"], "·"))
        assert cell.startswith("**") == (r["tier"] == 1)
    assert any(c.endswith("▲") for c in matrix["a_rather_long_scorer_name_number_0"].values())
    assert any(c.endswith("▼") for c in matrix[HOSTILE[-1]].values())


def test_provenance_is_stated_once_per_release(readme):
    assert [line for line in readme.splitlines() if HARDWARE in line] == [
        f"- Hardware: {HARDWARE}"]
    assert len([line for line in readme.splitlines() if SHA[:7] in line]) == 1
    assert not [line for line in readme.splitlines() if "2025-01-02" in line and "|" in line]
    for tables in markdown_tables(readme).values():
        for table in tables:
            assert not {"date", "harness", "hardware"} & set(table["headers"])


def test_a_scorer_that_runs_no_task_of_a_section_is_named_once_with_its_reason(readme):
    assert not [line for line in readme.splitlines() if line.startswith("|")
                and "needs a GPU" in line]
    for heading, stats in metric_tables(readme).items():
        assert "gpu_only" not in {r["scorer"] for r in stats["rows"]}, heading
    flat = " ".join(readme.split())
    line = f"- gpu_only runs none of this section's tasks, so is in none of its tables: {GPU_REASON}"
    assert flat.count(line) == 1
    (failed,) = markdown_tables(readme)["Failed and skipped cells"]
    assert FAILURE in failed["notes"].values()


def test_each_metric_column_has_one_number_of_decimals(board, readme):
    """The interval's endpoints too; the values span magnitudes where four significant digits
    would print different decimals (0.0512 and 0.3, 198.7 and 312)."""
    per_row = {}
    for r in board.rows.to_dict("records"):
        if r["n"]:
            per_row.setdefault(r["metric"], set()).add(len(f"{r['mean']:.4g}".partition(".")[2]))
    assert any(len(places) > 1 for places in per_row.values())
    for heading, stats in metric_tables(readme).items():
        for column in ("mean [95% CI]", "Δ vs softmax"):
            places = set().union(*(decimal_places(re.sub(r"\(.*\)", "", r[column]))
                                   for r in stats["rows"]))
            assert len(places) == 1, (heading, column, places)
    matrix = merged(markdown_tables(readme)["In-context learning (ICL)"])
    for column in next(iter(matrix.values())):
        if column != "scorer":
            places = set().union(*(decimal_places(r[column]) for r in matrix.values()))
            assert len(places) == 1, (column, places)


def test_a_hostile_scorer_name_is_escaped_in_every_markdown_view(board, readme):
    index = leaderboard_index(board, "releases/r1/README.md",
                              [(board.meta, "releases/r1/README.md")])
    for text in (readme, index):
        assert_readable(text)
        assert "<img" not in text and "<b>" not in text
        assert not re.search(r"(?<!\\)\]\(javascript", text)
        assert "tick`scorer`" not in text and "tick\\`scorer\\`" in text
    names = set(merged(markdown_tables(readme)["In-context learning (ICL)"]))
    assert set(HOSTILE) <= names
    assert 'plain(note="<b>bold</b>|x")' in names
    front = markdown_tables(index)["Overall (cpu)"][0]
    assert set(HOSTILE) <= {r["scorer"].strip("*") for r in front["rows"]}


def test_the_page_escapes_a_hostile_scorer_name(board):
    import json

    page = render_page(json.loads(board.to_json()), [], [])
    assert "<img src=x" not in page and "<b>bold" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_the_newest_committed_release_renders_readable(tmp_path):
    """The next release is rendered by this code: the newest committed release's results,
    rendered again, meet the same bounds."""
    latest = load_release(list_releases(ROOT / "leaderboard" / "releases")[0][0])
    text = release_readme(latest, [])
    assert_readable(text)
    for heading, stats in metric_tables(text).items():
        places = set().union(*(decimal_places(r["mean [95% CI]"]) for r in stats["rows"]))
        assert len(places) == 1, heading
