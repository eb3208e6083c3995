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
    publish_html,
    write_plugin,
    write_results,
)

from scorers.registry import scoped
from suite.commands.serve import make_server

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

    results = json.loads((base / "releases" / "r1" / "results.json").read_text())
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
    assert click_header("overall", "score [95% CI]") == "ascending"
    assert scorers_of("#overall tbody tr") == expected_order(overall, "score", False)
    assert click_header("overall", "score [95% CI]") == "descending"
    descending = expected_order(overall, "score", True)
    assert scorers_of("#overall tbody tr") == descending
    assert descending[0] == "ssa"

    # Tabs: one section at a time.
    browser.find_element(By.CSS_SELECTOR, "#tabs a[href='#track-icl']").click()
    assert browser.find_element(By.ID, "track-icl").is_displayed()
    assert not browser.find_element(By.ID, "overall").is_displayed()
    assert browser.current_url.endswith("#track-icl")
    icl_table = "#track-icl table:first-of-type tbody tr"
    assert click_header("track-icl", "scorer") == "ascending"
    icl_scorers = scorers_of(icl_table)
    assert icl_scorers == sorted(icl_scorers, key=str.lower) and len(icl_scorers) == 7

    # Per-row provenance: on hover (title) and expandable.
    first = rows(icl_table)[0]
    assert first.get_attribute("title") == \
        "date 2025-01-02 · harness 0123456 · hardware Test CPU, 2 cores"
    first.find_element(By.CSS_SELECTOR, "td.prov summary").click()
    assert "hardware: Test CPU, 2 cores" in first.find_element(By.CSS_SELECTOR, "td.prov").text

    # The filter keeps one scorer in every table of the tab.
    box = browser.find_element(By.ID, "scorer-filter")
    box.send_keys("SSA")
    assert browser.find_element(By.ID, "filter-count").text == "1 of 7 scorers match"
    for table in rows("#track-icl table"):
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
    WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith("/r0/index.html"))
    assert browser.title == "scorebench leaderboard: r0"
    options = [o.text for o in Select(browser.find_element(By.ID, "release-select")).options]
    assert options == ["r1", "r0"]
    collect()

    browser.get(url + "/r1/index.html#overall")
    assert click_header("overall", "score [95% CI]") == "ascending"
    assert click_header("overall", "score [95% CI]") == "descending"
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
