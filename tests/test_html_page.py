"""The HTML leaderboard page: the README's numbers, escaping of user strings, local links only,
byte-identical republish, and the release selector across sibling releases."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from html_support import (
    PLUGIN_SCORER,
    XSS,
    PageTables,
    markdown_tables,
    publish_html,
    small_release,
    write_plugin,
    write_results,
)

from leaderboard.html import INDEX, read_scorers, write_site
from scorers.registry import scoped
from leaderboard.release import ReleaseError

OVERALL_COLUMNS = ["tier", "scorer", "score [95% CI]", "rank", "tasks", "tier-1 tasks",
                   "failed cells"]
TRACK_COLUMNS = ["scorer", "mean [95% CI]", "n", "Δ vs softmax", "p (Holm)", "p sign-flip",
                 "tier", "rank", "failures"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("site")
    results = write_results(base / "results")
    plugin = write_plugin(base)
    with scoped():
        assert publish_html(results, base / "releases", "r1", plugin) == 0
    return base


def page(site) -> tuple[str, PageTables]:
    text = (site / "releases" / "r1" / INDEX).read_text(encoding="utf-8")
    return text, PageTables(text)


def cells(row: dict, headers: list[str]) -> dict[str, str]:
    return {h: c["text"] for h, c in zip(headers, row["cells"])}


def test_page_shows_the_readme_numbers(site):
    readme = markdown_tables((site / "releases" / "r1" / "README.md").read_text())
    results = json.loads((site / "releases" / "r1" / "results.json").read_text())
    _, parsed = page(site)

    md_overall = {r["scorer"]: r for r in readme["Overall"]}
    html_overall = {}
    for table in parsed.in_section("overall"):
        for row in table["rows"]:
            html_overall[row["attrs"]["data-scorer"]] = cells(row, table["headers"])
    assert set(html_overall) == set(md_overall) == {r["scorer"] for r in results["overall"]}
    assert {"softmax", "ssa", "relu", "sparsemax", "stablemax", PLUGIN_SCORER, XSS} \
        <= set(html_overall)
    for scorer, row in html_overall.items():
        assert {c: row[c] for c in OVERALL_COLUMNS} == \
            {c: md_overall[scorer][c] for c in OVERALL_COLUMNS}

    means = {(r["task"], r["metric"], r["scorer"]): r["mean"] for r in results["rows"]}
    for section, heading in (("track-icl", "In-context learning (ICL)"), ("track-probe", "Probes")):
        md_rows = {(r["task"], r["metric"].rsplit(" ", 1)[0], r["scorer"]): r
                   for r in readme[heading]}
        html_rows = {}
        for table in parsed.in_section(section):
            task, metric, _ = table["caption"].split(" · ")
            for row in table["rows"]:
                key = (task, metric.rsplit(" ", 1)[0], row["attrs"]["data-scorer"])
                html_rows[key] = cells(row, table["headers"])
                mean = means[key]
                assert row["cells"][1]["attrs"]["data-sort"] == ("" if mean is None
                                                                 else repr(float(mean)))
        assert set(html_rows) == set(md_rows) and len(html_rows) >= 4
        for key, row in html_rows.items():
            assert {c: row[c] for c in TRACK_COLUMNS} == {c: md_rows[key][c] for c in TRACK_COLUMNS}
    for section in ("track-decoder", "track-encoder", "track-cost"):
        assert parsed.in_section(section) == []


def test_user_strings_are_escaped(site):
    text, parsed = page(site)
    assert XSS not in text and "<b>exploded" not in text and "<i>plugin" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert parsed.script_blocks == 1  # the page's own script only

    scorers = {row["attrs"]["data-scorer"]: cells(row, table["headers"])
               for table in parsed.in_section("scorers") for row in table["rows"]}
    assert scorers[PLUGIN_SCORER]["description"] == XSS + ' & "quoted" notes'
    assert scorers[PLUGIN_SCORER]["family"] == "<i>plugin</i>"
    assert scorers[PLUGIN_SCORER]["paper"] == "<a href=x>paper</a>"
    assert scorers[XSS]["description"] == "not registered at publish time"
    assert read_scorers(site / "releases" / "r1")[PLUGIN_SCORER]["description"].startswith(XSS)

    failed = [cells(row, table["headers"]) for table in parsed.in_section("failures")
              for row in table["rows"] if row["attrs"].get("data-scorer") == "stablemax"]
    assert failed and failed[0]["message"] == f"loss <b>exploded</b> {XSS}"
    overall = [row for table in parsed.in_section("overall") for row in table["rows"]]
    xss_row = next(r for r in overall if r["attrs"]["data-scorer"] == XSS)
    assert xss_row["cells"][1]["text"] == XSS
    plugin_row = next(r for r in overall if r["attrs"]["data-scorer"] == PLUGIN_SCORER)
    assert XSS in plugin_row["cells"][1]["attrs"]["title"]


def test_links_are_local_and_resolve(site):
    release = site / "releases" / "r1"
    _, parsed = page(site)
    sections = {t["section"] for t in parsed.tables} | {"plots"}
    images = set()
    for link in parsed.links:
        assert "://" not in link and not link.startswith("//"), link
        if link.startswith("#"):
            assert link[1:] in sections or link[1:].startswith("track-"), link
        elif link.startswith("data:"):
            assert link == "data:,"  # the empty favicon: no request for /favicon.ico
        else:
            assert (release / link).resolve().is_file(), link
            images |= {link} if link.endswith(".png") else set()
    assert images == {p.relative_to(release).as_posix() for p in release.glob("plots/*.png")}
    assert len(images) >= 4


def digests(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_republish_is_byte_identical(site):
    before = digests(site / "releases")
    assert {"r1/index.html", "r1/scorers.json"} <= set(before)
    with scoped():
        assert publish_html(site / "results", site / "releases", "r1", write_plugin(site)) == 0
    assert digests(site / "releases") == before


def test_release_selector_lists_every_release(tmp_path):
    releases = tmp_path / "releases"
    small_release(tmp_path, releases, "old", "2025-01-01T00:00:00.000000+00:00", html=False)
    mid = small_release(tmp_path, releases, "mid", "2025-02-01T00:00:00.000000+00:00")
    mid_first = (mid / INDEX).read_text()
    assert 'value="../mid/index.html" selected' in mid_first and "../new/" not in mid_first
    new = small_release(tmp_path, releases, "new", "2025-03-01T00:00:00.000000+00:00")

    def options(path):
        select = (path / INDEX).read_text().split('<select id="release-select">')[1]
        return select.split("</select>")[0]

    expected = ('<option value="../new/index.html"{}>new</option>'
                '<option value="../mid/index.html"{}>mid</option>'
                '<option value="../old/README.md">old</option>')
    assert options(new) == expected.format(" selected", "")
    assert options(mid) == expected.format("", " selected")  # the older page was refreshed
    assert not (releases / "old" / INDEX).exists()


def test_write_site_errors(tmp_path):
    with pytest.raises(ReleaseError, match="publish the release before"):
        write_site(tmp_path / "nothing")
    (tmp_path / "scorers.json").write_text("[1]")
    with pytest.raises(ReleaseError, match="scorer metadata"):
        read_scorers(tmp_path)
