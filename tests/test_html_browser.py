"""End to end in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
Selenium): publish two releases with --html, open the newest through `scorebench serve`'s preview
server, and check every scorer is listed, sorting, tabs, the scorer filter, plots, provenance and
the release selector; no script from user strings runs, and any console error fails the test.

Screenshots go to the test's tmp dir; with SCOREBENCH_SCREENSHOT_DIR set, the last one is also
copied there (``leaderboard.png``)."""
from __future__ import annotations

import json
import math
import os
import shutil
import threading
from pathlib import Path

import pytest
from html_support import (
    PLUGIN_SCORER,
    XSS,
    add_claims,
    publish_html,
    write_plugin,
    write_results,
)

from scorers.registry import scoped
from suite.commands.serve import make_server
from leaderboard.publishing.release import read_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed "
                       "(apt-get install -y chromium chromium-driver; .ci/run installs it)"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if CHROMEDRIVER is None:
        pytest.fail("chromium is installed but chromedriver is not: apt-get install -y "
                    "chromium-driver")
    base = tmp_path_factory.mktemp("browser")
    plugin = write_plugin(base)
    with scoped():
        older = write_results(base / "older", finished="2024-12-01T00:00:00.000000+00:00")
        assert publish_html(older, base / "releases", "r0", plugin) == 0
        assert publish_html(write_results(base / "results"), base / "releases", "r1", plugin) == 0
        add_claims(base / "releases" / "r1")
    server = make_server(base / "releases", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield base, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed: pip install -e .[html-test]")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def expected_order(rows: list[dict], key: str, descending: bool) -> list[str]:
    """Stable sort of scorers by a number, missing values last in either direction."""
    present = [r for r in rows if r[key] is not None and not math.isnan(r[key])]
    missing = [r for r in rows if r not in present]
    ordered = sorted(present, key=lambda r: -r[key] if descending else r[key])
    return [r["scorer"] for r in ordered + missing]


def test_page_in_chromium(site, browser, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    base, url = site
    console: list[dict] = []

    def collect():
        console.extend(browser.get_log("browser"))
        with pytest.raises(NoAlertPresentException):
            _ = browser.switch_to.alert  # a script from a user string would open one

    def rows(selector):
        return browser.find_elements(By.CSS_SELECTOR, selector)

    def scorers_of(selector):
        return [r.get_attribute("data-scorer") for r in rows(selector)]

    def click_header(section, text):
        button = browser.find_element(
            By.XPATH, f"//section[@id='{section}']//thead//button[normalize-space()='{text}']")
        button.click()
        return button.find_element(By.XPATH, "..").get_attribute("aria-sort")

    results = read_results(base / "releases" / "r1")
    overall = results["overall"]

    browser.get(url + "/")
    assert browser.current_url == url + "/r1/index.html"
    assert browser.title == "scorebench leaderboard: r1"
    collect()

    # Every scorer of the release, in the release's order; the script-tag name shows as text.
    assert scorers_of("#overall tbody tr") == [r["scorer"] for r in overall]
    assert len(overall) == 7 and {PLUGIN_SCORER, XSS} <= {r["scorer"] for r in overall}
    xss_cell = browser.find_element(By.CSS_SELECTOR, "#overall tbody tr:last-child td.scorer")
    assert [r["scorer"] for r in overall][-1] == XSS and xss_cell.text == XSS
    assert browser.find_element(By.ID, "filter-count").text == "7 scorers"

    # Sorting: numbers by their raw value (not the "mean [CI]" text), missing values last.
    assert click_header("overall", "normalized score [95% CI]") == "ascending"
    assert scorers_of("#overall tbody tr") == expected_order(overall, "score", False)
    assert click_header("overall", "normalized score [95% CI]") == "descending"
    descending = expected_order(overall, "score", True)
    assert scorers_of("#overall tbody tr") == descending
    assert descending[0] == "ssa"

    # Tabs: one section at a time.
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#track-icl']").click()
    assert browser.find_element(By.ID, "track-icl").is_displayed()
    assert not browser.find_element(By.ID, "overall").is_displayed()
    assert browser.current_url.endswith("#track-icl")
    icl_table = "#track-icl > div.scroll:first-of-type table tbody tr"
    assert click_header("track-icl", "scorer") == "ascending"
    icl_scorers = scorers_of(icl_table)
    assert icl_scorers == sorted(icl_scorers, key=str.lower) and len(icl_scorers) == 7

    # Per-row provenance in the per-metric details: on hover (title) and expandable.
    browser.find_element(By.CSS_SELECTOR, "#track-icl details.detail > summary").click()
    first = rows("#track-icl details.detail table tbody tr")[0]
    assert first.get_attribute("title") == \
        "date 2025-01-02 · harness 0123456 · hardware Test CPU, 2 cores"
    first.find_element(By.CSS_SELECTOR, "td.prov summary").click()
    assert "hardware: Test CPU, 2 cores" in first.find_element(By.CSS_SELECTOR, "td.prov").text

    # The filter keeps one scorer in every table of the tab.
    box = browser.find_element(By.ID, "scorer-filter")
    box.send_keys("SSA")
    assert browser.find_element(By.ID, "filter-count").text == "1 of 7 scorers match"
    for table in rows("#track-icl > div.scroll table"):
        shown = [r.get_attribute("data-scorer") for r in table.find_elements(By.CSS_SELECTOR,
                                                                             "tbody tr")
                 if r.is_displayed()]
        assert shown == ["ssa"]
    browser.save_screenshot(str(tmp_path / "filtered.png"))
    box.send_keys(Keys.CONTROL, "a", Keys.DELETE)
    assert browser.find_element(By.ID, "filter-count").text == "7 scorers"
    assert all(r.is_displayed() for r in rows(icl_table))

    # The plots load from relative links.
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#plots']").click()
    images = rows("#plots img")
    assert len(images) >= 4
    WebDriverWait(browser, 30).until(lambda d: all(
        d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
        for img in images))
    collect()

    # The release selector opens the older release, whose page lists the newer one.
    Select(browser.find_element(By.ID, "release-select")).select_by_visible_text("r0")
    WebDriverWait(browser, 30).until(lambda d: "/r0/index.html" in d.current_url)
    assert browser.current_url.endswith("/r0/index.html#plots")  # the same tab
    assert browser.title == "scorebench leaderboard: r0"
    options = [o.text for o in Select(browser.find_element(By.ID, "release-select")).options]
    assert options == ["r1", "r0"]
    collect()

    browser.get(url + "/r1/index.html#overall")
    assert click_header("overall", "normalized score [95% CI]") == "ascending"
    assert click_header("overall", "normalized score [95% CI]") == "descending"
    shot = tmp_path / "leaderboard.png"
    browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    collect()
    if os.environ.get("SCOREBENCH_SCREENSHOT_DIR"):
        target = Path(os.environ["SCOREBENCH_SCREENSHOT_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target / "leaderboard.png")

    errors = [entry for entry in console if entry["level"] == "SEVERE"]
    assert errors == [], errors
    browser.execute_script("console.error('scorebench console probe')")
    assert any("scorebench console probe" in e["message"] for e in browser.get_log("browser")), \
        "the browser console is not being collected, so errors would go unnoticed"


# Decimal places of every number in each numeric column of every table, by column; a column
# with more than one count is misaligned.
MISALIGNED = """
const out = [];
document.querySelectorAll("table").forEach((table) => {
  table.querySelectorAll("thead th").forEach((th, j) => {
    if (th.dataset.type !== "num") return;
    const places = new Set();
    table.querySelectorAll("tbody tr").forEach((tr) => {
      const text = tr.cells[j].textContent;
      for (const m of text.matchAll(/\\d\\.(\\d+)/g)) places.add(m[1].length);
    });
    if (places.size > 1) out.push(`${th.textContent}: ${[...places]}`);
  });
});
return out;
"""
PAGE_WIDER_THAN_VIEWPORT = ("return document.documentElement.scrollWidth - "
                            "document.documentElement.clientWidth")


def test_reader_checks(site, browser, tmp_path):
    """What issue 17 asks of the page: a legend on every tab, aligned decimals, captioned plots
    that open full size, a release switch that keeps tab and filter and survives Back, and no
    page-level horizontal scroll at 420 px."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    base, url = site
    browser.get(url + "/r1/index.html")
    tabs = [a.get_attribute("href").split("#")[1]
            for a in browser.find_elements(By.CSS_SELECTOR, "#tabs a")]
    assert {"overall", "track-icl", "claims", "plots", "scorers", "failures", "releases"} \
        <= set(tabs)
    for tab in tabs:
        browser.find_element(By.CSS_SELECTOR, f"#tabs a[href='#{tab}']").click()
        legend = browser.find_element(By.CSS_SELECTOR, f"#{tab} > details.legend")
        assert legend.is_displayed() and legend.get_attribute("open") is not None, tab
        for th in browser.find_elements(By.CSS_SELECTOR, f"#{tab} thead th"):
            assert th.get_attribute("title"), (tab, th.get_attribute("textContent"))
    assert browser.execute_script(MISALIGNED) == []

    # Plots: captions are sentences, not file names; a click opens the plot full size.
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#plots']").click()
    figures = browser.find_elements(By.CSS_SELECTOR, "#plots figure")
    assert len(figures) >= 4
    for figure in figures:
        stem = figure.find_element(By.TAG_NAME, "img").get_attribute("src").rsplit("/", 1)[1]
        caption = figure.find_element(By.TAG_NAME, "figcaption").text
        assert caption and stem.removesuffix(".png") not in caption and "__" not in caption
        assert " " in caption and caption.endswith(".")
    figures[0].find_element(By.TAG_NAME, "a").click()
    viewer = browser.find_element(By.ID, "viewer")
    assert viewer.is_displayed()
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "const i = document.querySelector('#viewer img'); return i.complete && "
        "i.naturalWidth > 0 && i.getBoundingClientRect().width === i.naturalWidth"))
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    assert not viewer.is_displayed()

    # The release selector keeps the tab and the filter; Back shows the right release again.
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#track-icl']").click()
    browser.find_element(By.ID, "scorer-filter").send_keys("ss")
    assert browser.current_url.endswith("/r1/index.html?filter=ss#track-icl")
    Select(browser.find_element(By.ID, "release-select")).select_by_visible_text("r0")
    WebDriverWait(browser, 30).until(lambda d: "/r0/" in d.current_url)
    assert browser.current_url.endswith("/r0/index.html?filter=ss#track-icl")
    assert browser.find_element(By.ID, "track-icl").is_displayed()
    assert browser.find_element(By.ID, "scorer-filter").get_attribute("value") == "ss"
    assert Select(browser.find_element(By.ID, "release-select")).first_selected_option.text \
        == "r0"
    browser.back()
    WebDriverWait(browser, 30).until(lambda d: "/r1/" in d.current_url)
    WebDriverWait(browser, 10).until(lambda d: Select(d.find_element(
        By.ID, "release-select")).first_selected_option.text == "r1")
    assert browser.find_element(By.ID, "track-icl").is_displayed()
    assert browser.find_element(By.ID, "scorer-filter").get_attribute("value") == "ss"
    browser.find_element(By.ID, "scorer-filter").send_keys(Keys.CONTROL, "a", Keys.DELETE)

    # A phone: no page-level horizontal scroll on any tab; wide tables scroll in their own box
    # with the scorer column in view.
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 420, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    browser.get(url + "/r1/index.html#overall")
    for tab in tabs:
        browser.find_element(By.CSS_SELECTOR, f"#tabs a[href='#{tab}']").click()
        assert browser.execute_script(PAGE_WIDER_THAN_VIEWPORT) <= 0, tab
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#overall']").click()
    box = browser.find_element(By.CSS_SELECTOR, "#overall div.scroll")
    assert browser.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth",
                                  box)
    browser.execute_script("arguments[0].scrollLeft = 400", box)
    cell = browser.find_element(By.CSS_SELECTOR, "#overall tbody td.scorer")
    assert browser.execute_script(
        "const c = arguments[0].getBoundingClientRect(), b = arguments[1]"
        ".getBoundingClientRect(); return Math.abs(c.left - b.left) < 2", cell, box)
    browser.save_screenshot(str(tmp_path / "phone.png"))


# The part of an element inside the first screen: its top above the viewport's bottom.
ON_FIRST_SCREEN = ("const r = arguments[0].getBoundingClientRect(); "
                   "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight")
# Per table with a scorer column (its header reads "scorer"): that column's width over the
# table's.
SCORER_SHARE = """
const out = [];
document.querySelectorAll("table").forEach((table) => {
  if (!table.getClientRects().length) return;
  const heads = Array.from(table.querySelectorAll("thead th"));
  const j = heads.findIndex((th) => th.textContent.replace(/[\\u2195\\u2191\\u2193]/g, "")
                                     .trim() === "scorer");
  if (j < 0) return;
  out.push([table.querySelector("caption") ? table.querySelector("caption").textContent : "",
            heads[j].getBoundingClientRect().width / table.getBoundingClientRect().width]);
});
return out;
"""


def front_page_html(markdown_path: Path) -> Path:
    """LEADERBOARD.md as a browser shows it (CommonMark with tables, no style of its own; raw
    HTML shown as text, as a host that sanitizes markdown would)."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the front "
                                      "page: pip install markdown-it-py")
    body = markdown_it.MarkdownIt("commonmark", {"html": False}).enable("table").render(
        markdown_path.read_text(encoding="utf-8"))
    out = markdown_path.with_name("LEADERBOARD.html")
    out.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" '
                   'content="width=device-width, initial-scale=1"></head><body>'
                   + body + "</body></html>", encoding="utf-8")
    return out


def test_first_screen_answers_and_the_phone_keeps_the_scorer_narrow(site, browser, tmp_path):
    """Issue 51: on a 1400 x 900 screen the front page and the release page show the summary
    sentences and the top tier without scrolling; at 420 px the scorer column takes at most 40%
    of its table's width."""
    from selenium.webdriver.common.by import By

    from leaderboard.publishing.release import load_release
    from leaderboard.rendering.summary import sentences

    base, url = site
    board = load_release(base / "releases" / "r1")
    said = sentences(board)
    top = [r["scorer"] for r in read_results(base / "releases" / "r1")["overall"]
           if r["tier"] == 1]
    assert said and top
    front = front_page_html(base / "LEADERBOARD.md").as_uri()

    def screen(width, height):
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    def shown(element):
        return browser.execute_script(ON_FIRST_SCREEN, element)

    screen(1400, 900)
    browser.get(front)
    items = browser.find_elements(By.CSS_SELECTOR, "li")
    for sentence in said:
        item = next(i for i in items if " ".join(i.text.split()) == sentence)
        assert shown(item), sentence
    rows = browser.find_elements(By.CSS_SELECTOR, "table tbody tr")
    for scorer in top:
        row = next(r for r in rows if r.find_elements(By.TAG_NAME, "td")[1].text == scorer)
        assert shown(row), scorer
    browser.save_screenshot(str(tmp_path / "front.png"))

    browser.get(url + "/r1/index.html")
    items = browser.find_elements(By.CSS_SELECTOR, "header ul.summary li")
    assert [" ".join(i.text.split()) for i in items] == said
    assert all(shown(i) for i in items)
    for scorer in top:
        row = browser.find_element(By.CSS_SELECTOR,
                                   f"#overall tbody tr[data-scorer='{scorer}']")
        assert shown(row), scorer
    browser.save_screenshot(str(tmp_path / "release.png"))

    screen(420, 900)
    for page in (front, url + "/r1/index.html#overall", url + "/r1/index.html#track-icl"):
        browser.get(page)
        shares = browser.execute_script(SCORER_SHARE)
        assert shares, page
        assert all(share <= 0.4 for _, share in shares), (page, shares)
    browser.save_screenshot(str(tmp_path / "phone-matrix.png"))
