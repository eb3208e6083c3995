"""The HTML leaderboard page: the README's numbers, escaping of user strings, local links only,
byte-identical republish, and the release selector across sibling releases."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from html_support import (
    PLUGIN_SCORER,
    add_claims,
    XSS,
    PageTables,
    publish_html,
    small_release,
    write_plugin,
    write_results,
)

from markdown_support import markdown_tables

from leaderboard.rendering.columns import Field
from leaderboard.publishing.site import INDEX, read_scorers, write_index, write_site
from leaderboard.rendering.html.markup import code_text
from leaderboard.rendering.text import decimals, number_format
from leaderboard.rendering.html.tables import field_column
from scorers.registry import scoped
from leaderboard.publishing.release import ReleaseError, read_results
from leaderboard.publishing.release import write_results as write_release_results

# Columns whose text is the README's (one number format per column in both); the overall's
# numbers with an interval are compared by value.
OVERALL_COLUMNS = ["tier", "scorer", "rank", "tasks", "tier-1 tasks", "failed cells"]
TRACK_COLUMNS = ["scorer", "mean [95% CI]", "normalized", "Δ vs softmax", "n", "p (Holm)",
                 "tier", "rank", "failures"]
NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:e[-+]\d+)?")


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


def numbers(text: str) -> list[tuple[float, int]]:
    """Every number in a cell and its decimal places."""
    return [(float(m.group(0)), len(m.group(1) or "")) for m in NUMBER.finditer(text)]


def check_interval(text: str, mean: float, lo: float, hi: float) -> None:
    """``mean [lo, hi]`` printed with one number of decimals, each the value rounded to it."""
    (m, d0), (a, d1), (b, d2) = numbers(text)[:3]
    assert d0 == d1 == d2 and d0 >= 1
    for shown, raw in ((m, mean), (a, lo), (b, hi)):
        assert shown == pytest.approx(round(raw, d0), abs=10 ** -d0 / 2 + 1e-12)


def test_page_shows_the_readme_numbers(site):
    readme = markdown_tables((site / "releases" / "r1" / "README.md").read_text())
    results = read_results(site / "releases" / "r1")
    _, parsed = page(site)

    md_overall = {r["scorer"]: r for r in readme["Overall"][0]["rows"]}
    raw_overall = {r["scorer"]: r for r in results["overall"]}
    html_overall = {}
    for table in parsed.in_section("overall"):
        for row in table["rows"]:
            html_overall[row["attrs"]["data-scorer"]] = cells(row, table["headers"])
    assert set(html_overall) == set(md_overall) == set(raw_overall)
    assert {"softmax", "ssa", "relu", "sparsemax", "stablemax", PLUGIN_SCORER, XSS} \
        <= set(html_overall)
    for scorer, row in html_overall.items():
        assert {c: row[c] for c in OVERALL_COLUMNS} == \
            {c: md_overall[scorer][c] for c in OVERALL_COLUMNS}
        raw = raw_overall[scorer]
        if raw["ci_low"] is not None:
            check_interval(row["normalized score [95% CI]"], raw["score"], raw["ci_low"],
                           raw["ci_high"])
        if raw["poi_low"] is not None:
            check_interval(row["P(better than softmax) [95% CI]"], raw["poi"], raw["poi_low"],
                           raw["poi_high"])

    raw_rows = {(r["task"], r["metric"], r["scorer"]): r for r in results["rows"]}
    for section, tasks in (("track-icl", ("icl_linear", "icl_quantifiers")),
                           ("track-probe", ("saturation_probe",))):
        md_rows = {(task, metric.rsplit(" ", 1)[0], r["scorer"]): r
                   for heading, tables in readme.items() if " · " in heading
                   for task, metric in [heading.split(" · ")] if task in tasks
                   for r in tables[0]["rows"]}
        html_rows = {}
        for table in parsed.in_section(section):
            if "detail" not in table["attrs"].get("class", ""):
                continue
            task, metric, _ = table["caption"].split(" · ")
            for row in table["rows"]:
                key = (task, metric.rsplit(" ", 1)[0], row["attrs"]["data-scorer"])
                html_rows[key] = cells(row, table["headers"])
                raw = raw_rows[key]
                assert row["cells"][1]["attrs"]["data-sort"] == ("" if raw["mean"] is None
                                                                 else repr(float(raw["mean"])))
                if raw["ci_low"] is not None:
                    check_interval(html_rows[key]["mean [95% CI]"], raw["mean"], raw["ci_low"],
                                   raw["ci_high"])
                if raw["delta_vs_baseline"] is not None and raw["scorer"] != "softmax":
                    (delta, places), = numbers(html_rows[key]["Δ vs softmax"])[:1]
                    assert delta == pytest.approx(round(raw["delta_vs_baseline"], places),
                                                  abs=10 ** -places / 2 + 1e-12)
                    label = f" ({raw['vs_baseline']})" if raw["vs_baseline"] else ""
                    assert html_rows[key]["Δ vs softmax"] == f"{delta:+.{places}f}{label}"
        assert set(html_rows) == set(md_rows) and len(html_rows) >= 4
        for key, row in html_rows.items():
            assert {c: row[c] for c in TRACK_COLUMNS} == {c: md_rows[key][c] for c in TRACK_COLUMNS}
    for section in ("track-decoder", "track-encoder", "track-cost"):
        assert parsed.in_section(section) == []


def test_track_table_has_scorers_as_rows_and_headline_metrics_as_columns(site):
    results = read_results(site / "releases" / "r1")
    text, parsed = page(site)
    heads = [t for t in parsed.in_section("track-icl") if t["caption"].startswith("Headline")]
    assert len(heads) == 1
    table = heads[0]
    headline = sorted({(r["task"], r["metric"]) for r in results["rows"]
                       if r["track"] == "icl" and r["headline"]})
    assert [h.removesuffix("details").strip() for h in table["headers"]] == ["scorer"] + [
        f"{t} · {m} ↓" for t, m in headline]
    overall_order = [r["scorer"] for r in results["overall"]]
    shown = [row["attrs"]["data-scorer"] for row in table["rows"]]
    assert shown == [s for s in overall_order if s in shown]
    assert "rows by overall order (tier, then score)" in table["caption"]
    mean = {(r["task"], r["metric"], r["scorer"]): r["mean"] for r in results["rows"]}
    for row in table["rows"]:
        for (task, metric), cell in zip(headline, row["cells"][1:]):
            raw = mean.get((task, metric, row["attrs"]["data-scorer"]))
            assert cell["attrs"]["data-sort"] == ("" if raw is None else repr(float(raw)))
    # The per-metric details each header links to exist.
    for task, metric in headline:
        assert f'href="#detail-cpu-{task}-{metric}"' in text
        assert f'<details id="detail-cpu-{task}-{metric}" class="detail">' in text
    # Secondary metrics fold away.
    second = [t for t in parsed.in_section("track-icl") if t["caption"].startswith("Secondary")]
    assert len(second) == 1 and "accuracy" in " ".join(second[0]["headers"])
    assert '<details class="secondary">' in text


def test_numbers_line_up_and_headers_explain(site):
    _, parsed = page(site)
    assert parsed.tables
    for table in parsed.tables:
        assert all(a.get("title") for a in table["header_attrs"]), table["headers"]
        for j, attrs in enumerate(table["header_attrs"]):
            if attrs.get("data-type") != "num":
                continue
            places = {d for row in table["rows"] for _, d in numbers(row["cells"][j]["text"])
                      if "." in row["cells"][j]["text"]}
            assert len(places) <= 1, (table["caption"], table["headers"][j], places)


def test_every_tab_has_a_legend(site):
    text, _ = page(site)
    sections = re.findall(r'<section id="([^"]+)" class="tab">(.*?)</section>', text, re.S)
    assert {s for s, _ in sections} >= {"overall", "track-icl", "failures", "plots", "scorers",
                                        "releases"}
    for sid, body in sections:
        assert '<details class="legend" open><summary>Legend' in body, sid


def test_plots_are_grouped_and_captioned(site):
    text, _ = page(site)
    plots = re.search(r'<section id="plots".*?</section>', text, re.S).group(0)
    figures = re.findall(r'<img src="plots/([^"]+)\.png" alt="([^"]+)"></a><figcaption>([^<]+)'
                         r'</figcaption>', plots)
    assert len(figures) >= 4
    for stem, alt, caption in figures:
        assert caption == alt and stem not in caption and "__" not in caption
        assert not caption.startswith("Plot:"), caption
    assert re.findall(r"<h3>([^<]+)</h3>", plots)[:2] == ["Overall", "In-context learning (ICL)"]
    assert "icl_linear · error: mean and 95% CI per scorer" in plots


def test_number_format_is_fixed_per_column():
    fmt = number_format([0.37, 0.2847, 0.31], [0.05, 0.047])
    assert [fmt(x) for x in (0.37, 0.2847, 0.3953)] == ["0.370", "0.285", "0.395"]
    fmt = number_format([150.3, 149.9], [0.2])  # a narrow interval asks for more decimals
    assert [fmt(x) for x in (150.3, 150.1)] == ["150.30", "150.10"]
    assert number_format([2e-13, 5e-12])(3.14159e-13) == "3.14e-13"
    assert number_format([None, float("nan")])(0.5) == "0.50"
    assert decimals("0.370 [0.346, 0.395]") == {3} and decimals("3.14e-13 [1.00e-13, x]") == {2}
    fixed = field_column(Field("mean", "m", "t", "ci", "lo", "hi", decimals=1),
                         [{"mean": 0.26, "lo": 0.2, "hi": 0.31}])
    assert fixed.cell({"mean": 0.26, "lo": 0.2, "hi": 0.31}) == (
        '<td class="num" data-sort="0.26"><span class="v">0.3</span> '
        '<span class="ci">[0.2, 0.3]</span></td>')


def test_claims_tab_and_extra_fields(site, tmp_path):
    release = tmp_path / "claimed"
    shutil.copytree(site / "releases" / "r1", release)
    data = read_results(release)
    assert "claims" not in data and 'id="claims"' not in (release / INDEX).read_text()
    add_claims(release)
    data = read_results(release)
    for r in data["rows"]:
        r["win_rate"] = 0.5 if r["scorer"] == "softmax" else 0.25
    for r in data["overall"]:
        r["mean_win_rate"] = 0.125
    write_release_results(json.dumps(data), release)
    write_index(release, [("claimed", "../claimed/index.html", data["meta"])])
    text = (release / INDEX).read_text()
    parsed = PageTables(text)
    assert '<a href="#claims">Claims</a>' in text and XSS not in text
    table, = parsed.in_section("claims")
    assert table["headers"][:5] == ["id", "claim", "verdict", "effect [95% CI]", "p"]
    rows = [cells(r, table["headers"]) for r in table["rows"]]
    assert [r["verdict"] for r in rows] == ["supported", "contradicted", "not run"]
    assert rows[0]["effect [95% CI]"] == "-0.123 [-0.150, -0.100]"
    assert rows[1]["effect [95% CI]"] == "0.250 [0.200, 0.300]"
    assert rows[2]["effect [95% CI]"] == "n/a" and rows[2]["claim"] == XSS
    assert [r["p"] for r in rows] == ["<0.001", "0.010", "n/a"]
    assert [r["detectable"] for r in rows] == ["0.0210", "0.0205", "n/a"]
    assert 'class="verdict verdict-contradicted"' in text
    assert ("1 supported, 0 not supported, 1 contradicted, 0 uninformative, 0 degenerate, "
            "1 not run") in text
    # A numeric row field the page does not know shows under its own name in the details.
    details = [t for t in parsed.in_section("track-icl") if "detail" in t["attrs"].get("class", "")]
    assert details and all("win rate" in t["headers"] for t in details)
    cell = dict(zip(details[0]["headers"], details[0]["rows"][0]["cells"]))["win rate"]
    assert cell["text"] in ("0.500", "0.250")
    assert "'win_rate'" in details[0]["header_attrs"][details[0]["headers"].index("win rate")][
        "title"]
    overall, = parsed.in_section("overall")
    assert {cells(r, overall["headers"])["mean win rate"] for r in overall["rows"]} == {"0.125"}


def test_scorer_descriptions_are_whole_and_marked_up():
    from scorers import get_scorer_class

    assert code_text("w with ``beta`` <b>") == "w with <code>beta</code> &lt;b&gt;"
    description = get_scorer_class("cosformer").description
    assert description.endswith("Queries align to the last keys.") and "\n" not in description


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
    assert xss_row["cells"][0]["text"] == XSS
    plugin_row = next(r for r in overall if r["attrs"]["data-scorer"] == PLUGIN_SCORER)
    assert XSS in plugin_row["cells"][0]["attrs"]["title"]


def test_links_are_local_and_resolve(site):
    release = site / "releases" / "r1"
    text, parsed = page(site)
    sections = {t["section"] for t in parsed.tables} | {"plots"}
    images = set()
    for link in parsed.links:
        assert "://" not in link and not link.startswith("//"), link
        if link.startswith("#"):
            assert (link[1:] in sections or link[1:].startswith("track-")
                    or f'<details id="{link[1:]}" class="detail">' in text), link
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
        select = (path / INDEX).read_text().split(
            '<select id="release-select" autocomplete="off">')[1]
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


def test_problems_have_one_wording(site, tmp_path):
    release = tmp_path / "problems"
    shutil.copytree(site / "releases" / "r1", release)
    data = read_results(release)
    data["problems"] = [{"path": "a/b/1.json", "reason": "items 'x' left out", "skipped": False},
                        {"path": "a/b/1.json", "reason": "items 'y' left out", "skipped": False},
                        {"path": "a/c/2.json", "reason": "not JSON", "skipped": True}]
    write_release_results(json.dumps(data), release)
    write_index(release, [("problems", "../problems/index.html", data["meta"])])
    text = (release / INDEX).read_text()
    summary = "3 problems in 2 record files (2 partly used, 1 skipped)"
    assert text.count(summary) == 2  # the header and the Failures tab
    assert "<h2>Problems in records (3)</h2>" in text
    effects = [cells(r, t["headers"])["effect"] for t in PageTables(text).in_section("failures")
               if "effect" in t["headers"] for r in t["rows"]]
    assert effects == ["partly used", "partly used", "skipped"]


def test_headline_matrix_marks_verdicts_tiers_and_the_best(site):
    """Each headline cell carries the front page's mark against the baseline, its tier's shade,
    and the best mean of its column is outlined."""
    from leaderboard.rendering.text import verdict_mark

    results = read_results(site / "releases" / "r1")
    text, parsed = page(site)
    table, = [t for t in parsed.in_section("track-icl") if t["caption"].startswith("Headline")]
    heads = sorted({(r["task"], r["metric"]) for r in results["rows"]
                    if r["track"] == "icl" and r["headline"]})
    raw = {(r["task"], r["metric"], r["scorer"]): r for r in results["rows"]}
    for task, metric in heads:
        j = 1 + heads.index((task, metric))
        column = {row["attrs"]["data-scorer"]: row["cells"][j] for row in table["rows"]}
        valued = {s: raw[(task, metric, s)] for s in column
                  if (task, metric, s) in raw and raw[(task, metric, s)]["n"]}
        best = min(r["mean"] for r in valued.values())
        for scorer, cell in column.items():
            r = valued.get(scorer)
            classes = cell["attrs"]["class"].split()
            if r is None:
                continue
            mark = cell["text"].split()[-1]
            if scorer == "softmax":
                assert mark not in "▲▼·–"
            else:
                assert mark == verdict_mark(r), (scorer, cell["text"])
            assert ("best" in classes) == (r["mean"] == best)
            tiers = [c for c in classes if c.startswith("tier-")]
            assert tiers == ([] if r["tier"] is None else [f"tier-{int(r['tier'])}"])
    # The shades are one hue that lightens tier by tier; the phone layout narrows the scorer.
    assert "td.tier-1 { background: color-mix(" in text and "span.name" in text
    assert any(t["caption"].startswith("profile") and "P(better) per task" in t["headers"]
               for t in parsed.in_section("overall"))
