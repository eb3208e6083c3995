"""The front page (LEADERBOARD.md): the answer in sentences and one compact table."""
import re
from pathlib import Path

import numpy as np

from leaderboard.rendering import notes, summary
from leaderboard.method.aggregate import build_board
from leaderboard.publishing.release import write_leaderboard_md
from leaderboard_fakes import make_record, write_record

ROOT = Path(__file__).resolve().parents[1]
ERROR = {"error": {"direction": "lower", "headline": True, "floor": 1.0, "ceiling": 0.0}}


def board_of(tmp_path, tasks=("task_a", "task_b")):
    rng = np.random.default_rng(0)
    means = {"softmax": 0.30, "good": 0.20, "bad": 0.45, "same": 0.30}
    for task in tasks:
        noise = rng.normal(0, 0.01, 5)
        for scorer, m in means.items():
            for seed in range(5):
                value = m + noise[seed] + rng.normal(0, 0.002)
                write_record(tmp_path, make_record(task, scorer, seed, {"error": value},
                                                   specs=ERROR))
    return build_board(tmp_path).with_release("r")


def test_the_sentences_name_the_top_tier_the_baselines_place_and_each_tasks_leader(tmp_path):
    lines = summary.sentences(board_of(tmp_path))
    text = " ".join(lines)
    assert re.search(r"good alone of 4 scorers is in the top tier of the headline \(", text)
    assert "softmax is in tier 2" in text
    # good's P(better) interval lies above 0.5 and bad's below it: each interval on its own,
    # which the line says beside the tiers' corrected tests
    assert ("1 scorer beats it on the headline with an interval above 0.5 (good), 1 lies below "
            "it with an interval below 0.5 (each interval on its own; the tiers and ranks come "
            "from tests corrected for the many comparisons).") in text
    assert "each weighing 1/2" in text
    for task in ("task_a", "task_b"):
        assert (f"{task}: best mean error good" in text
                and "significantly better than softmax by more than the minimum effect" in text)
        assert f"{task} against softmax, by headline metric: error better (good), worse (bad" \
            in text


def test_a_verdict_whose_sign_does_not_hold_next_door_is_named_apart(tmp_path):
    """A release of a task trained to convergence says beside each verdict whether it holds at
    the neighbouring learning rates (meta.neighbours); the sentence of verdicts names a
    rate-sensitive one apart, and says what that means."""
    board = board_of(tmp_path, tasks=("task_a",))
    board.meta["neighbours"] = {"task_a": {
        "good": {"error": "rate-sensitive (holds at 2/2; at softmax's 1/2)"},
        "bad": {"error": "holds at 2/2 neighbouring rates; at softmax's 2/2"}}}
    text = " ".join(summary.sentences(board))
    assert ("task_a against softmax, by headline metric: error better (rate-sensitive: good), "
            "worse (bad). Rate-sensitive: the verdict's sign does not hold at every neighbouring "
            "learning rate.") in text
    board.meta["neighbours"]["task_a"]["good"]["error"] = "holds at 1/1 neighbouring rates"
    assert "rate-sensitive" not in " ".join(summary.sentences(board))


def test_a_headline_on_one_task_names_it_without_weights_or_shares(tmp_path):
    board = board_of(tmp_path, tasks=("task_a",))
    text = " ".join(summary.sentences(board))
    assert "The headline rests on 1 task, task_a." in text
    assert "weighing" not in text and "shares of its spread" not in text
    assert not [line for line in notes.rests_on_lines(board) if "carries" in line]


def test_a_task_only_the_baseline_has_run_is_said_to_await_its_verdicts(tmp_path):
    """A board part-way through a re-run: the task is out of the headline because no other
    scorer has records there yet, which the page says instead of calling it uninformative or
    naming the baseline its leader."""
    board_of(tmp_path)
    for seed in range(5):
        write_record(tmp_path, make_record("task_c", "softmax", seed, {"error": 0.3 + seed / 100},
                                           specs=ERROR))
    text = " ".join(summary.sentences(build_board(tmp_path).with_release("r")))
    assert "No verdict yet on task_c: only softmax has records there so far" in text
    assert "task_c: best mean" not in text and "Uninformative" not in text
    assert "each weighing 1/2" in text
    for scorer in ("good", "bad"):
        for seed in range(5):
            write_record(tmp_path, make_record("task_c", scorer, seed, {"error": 0.3},
                                               specs=ERROR))
    text = " ".join(summary.sentences(build_board(tmp_path).with_release("r")))
    assert ("Not in the headline until every scorer has records of it: task_c (3 of 4 scorers "
            "so far).") in text and "No verdict yet" not in text
    assert "task_c (3 scorers so far): best mean error " in text


def test_a_leader_without_the_baseline_beside_it_gets_no_verdict(tmp_path):
    """A task re-run in part, whose baseline has not run yet: its leader among the scorers so far
    is named, and no comparison with a baseline that has no records."""
    board_of(tmp_path)
    for scorer, error in (("good", 0.2), ("bad", 0.4)):
        for seed in range(5):
            write_record(tmp_path, make_record("task_c", scorer, seed,
                                               {"error": error + seed / 100}, specs=ERROR))
    text = " ".join(summary.sentences(build_board(tmp_path).with_release("r")))
    assert ("task_c (2 scorers so far): best mean error good (0.22), no verdict: softmax has no "
            "records of it yet.") in text
    assert "not significantly better than softmax" not in text


def test_the_table_marks_each_task_against_the_baseline(tmp_path):
    lines = summary.front_table(board_of(tmp_path), "cpu", {"task_a": "r.md#a"})
    header, rows = lines[0], [l for l in lines[2:] if l.startswith("| ")]
    assert header.count("|") - 1 <= 10
    by = {re.sub(r"\*", "", r.split("|")[2].strip()): r for r in rows}
    assert "▲" in by["good"] and "▼" in by["bad"] and "▲" not in by["same"]
    assert by["good"].split("|")[2].strip() == "**good**"          # tier 1 in bold
    assert max(len(l) for l in lines if l.startswith("|")) <= 150
    assert "[task_a]: r.md#a" in lines


def test_the_committed_front_page_is_short_and_narrow(tmp_path):
    path = write_leaderboard_md(ROOT / "leaderboard" / "releases", tmp_path / "LEADERBOARD.md")
    text = path.read_text(encoding="utf-8")
    assert len(text.encode()) <= 25_000
    links = re.compile(r"^(\[[^\]]+\]: |- \[)")
    assert all(len(line) <= 200 for line in text.splitlines() if not links.match(line))
    first_screen = "\n".join(text.splitlines()[:25])
    assert "share the top tier" in first_screen and "softmax is in tier" in first_screen
    assert len(re.findall(r"!\[", text)) <= 2            # at most two plots embedded


def test_summary_prints_the_sentences_of_a_release_and_suggests_a_misspelt_one(capsys):
    import pytest

    from suite.cli import main

    releases = str(ROOT / "leaderboard" / "releases")
    assert main(["summary", "--out", releases]) == 0
    out = capsys.readouterr().out
    assert "share the top tier" in out and "softmax is in tier" in out
    with pytest.raises(SystemExit, match="did you mean '2026-12-04-cpu-tuned-2'"):
        main(["summary", "2026-12-04-cpu-tuned-x", "--out", releases])


def test_the_readmes_pandas_example_runs_on_the_committed_release_and_its_cells_exist(
        monkeypatch):

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("A release's numbers load into pandas")
    code = readme[readme.index("```python\n", start) + 10:readme.index("```\n", start + 1)]
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert len(scope["mqar"]) >= 20 and set(scope["overall"].columns) >= {"scorer", "poi"}
    records = {p.name.split(".")[0] for p in (ROOT / "leaderboard" / "records").rglob("*.json*")}
    assert scope["cells"] and set(scope["cells"]) <= records
    assert all(list(ids) for ids in scope["rows"].cell_ids)


def test_compare_against_softmax_gives_the_boards_numbers(capsys):
    import pytest

    from leaderboard.method import pairwise
    from leaderboard.publishing.release import list_releases, load_release
    from suite.cli import main

    releases = ROOT / "leaderboard" / "releases"
    board = load_release(list_releases(releases)[0][0])
    rows = board.rows.to_dict(orient="records")
    metrics, overall = pairwise.compare(rows, board.overall_tasks.to_dict(orient="records"),
                                        "sparsemax", "softmax")
    by = {(r["task"], r["metric"]): r for r in rows if r["scorer"] == "sparsemax"}
    for m in metrics:
        row = by[(m["task"], m["metric"])]
        assert m["delta"] == pytest.approx(row["delta_vs_baseline"])
        assert m["p"] == pytest.approx(row["p_vs_baseline"])
    mqar = next(m for m in metrics if m["metric"] == "accuracy_id")
    assert mqar["word"] == "sparsemax better"
    board_overall = next(r for r in board.overall.to_dict(orient="records")
                         if r["scorer"] == "sparsemax")
    assert (overall[0]["poi"], overall[0]["ci_low"], overall[0]["ci_high"]) == pytest.approx(
        (board_overall["poi"], board_overall["poi_low"], board_overall["poi_high"]))
    assert main(["compare", "sparsemax", "softmax", "--out", str(releases)]) == 0
    assert "P(sparsemax better than softmax)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="did you mean 'sparsemax'"):
        main(["compare", "sparsemx", "softmax", "--out", str(releases)])


def test_the_table_tells_a_task_not_run_from_one_the_scorer_cannot_run_or_failed(tmp_path):
    """Part-way through a re-run a scorer has no record of a task yet: the table says "not run",
    not the "n/a" of a scorer that cannot run the task, and "all failed" where every cell
    failed."""
    board_of(tmp_path)
    for seed in range(5):
        write_record(tmp_path, make_record("task_a", "late", seed, {"error": 0.3}, specs=ERROR))
        write_record(tmp_path, make_record("task_b", "broken", seed, {"error": 0.3}, specs=ERROR))
        write_record(tmp_path, make_record("task_a", "broken", seed, status="error",
                                           specs=ERROR, message="RuntimeError"))
    lines = summary.front_table(build_board(tmp_path).with_release("r"), "cpu", {})
    cells = {r.split("|")[2].strip(" *"): [c.strip() for c in r.split("|")[4:-1]]
             for r in lines[2:] if r.startswith("| ")}
    assert cells["late"][1] == "not run" and cells["late"][0] != "not run"
    assert cells["broken"][0] == "all failed"
    assert "not run: no record of the scorer on the task in this release" in " ".join(lines)
    full = " ".join(summary.front_table(board_of(tmp_path / "full"), "cpu", {}))
    assert "| not run" not in full and "not run:" not in full
