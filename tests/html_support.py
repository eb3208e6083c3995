"""Shared pieces of the HTML leaderboard tests: a results directory with a hostile plugin scorer,
publishing through the CLI, and a small parser for the page's tables."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from leaderboard_fakes import make_record, populate, write_record

XSS = "<script>alert(1)</script>"
PLUGIN_SCORER = "xss_probe"
PLUGIN_SOURCE = f'''
import torch
from scorers import LogitsScorer, register_scorer


@register_scorer({PLUGIN_SCORER!r}, family="<i>plugin</i>", paper="<a href=x>paper</a>",
                 description={XSS + ' & "quoted" notes'!r})
class XssProbe(LogitsScorer):
    def weights(self, s, mask):
        return torch.softmax(s, dim=-1)
'''
# Error rate of each scorer above 0.2 (lower is better).
OFFSETS = {"softmax": 0.0, "ssa": -0.12, "relu": 0.25, "sparsemax": 0.06, PLUGIN_SCORER: 0.1}
N_BOOT = 200


def write_results(root: Path, finished: str = "2025-01-02T03:04:05.000000+00:00") -> Path:
    """Three tasks on two tracks, a diverged cell whose message is markup, and a scorer whose
    name is a script tag (one seed, so it has no tier)."""
    populate(root, OFFSETS, finished=finished)
    populate(root, OFFSETS, task="icl_quantifiers", rng_seed=1, with_grid=False,
             finished=finished)
    populate(root, {k: v for k, v in OFFSETS.items() if k != "relu"}, task="saturation_probe",
             track="probe", rng_seed=2, with_grid=False, finished=finished)
    write_record(root, make_record("icl_linear", "stablemax", 0, status="diverged", step=7,
                                   message=f"loss <b>exploded</b> {XSS}", finished=finished))
    write_record(root, make_record("icl_linear", XSS, 0, {"error": 0.5, "accuracy": 0.5},
                                   finished=finished))
    return root


def write_plugin(directory: Path) -> Path:
    path = Path(directory) / "xss_plugin.py"
    path.write_text(PLUGIN_SOURCE, encoding="utf-8")
    return path


def publish_html(results: Path, releases: Path, release: str, plugin: Path | None = None) -> int:
    from suite import cli

    argv = ["publish", "--results", str(results), "--release", release, "--out", str(releases),
            "--bootstrap", str(N_BOOT), "--leaderboard", str(releases.parent / "LEADERBOARD.md"),
            "--html"]
    if plugin is not None:
        argv += ["--plugin", str(plugin)]
    return cli.main(argv)


class PageTables(HTMLParser):
    """Every <table> of a page: its section id, caption, headers and rows (each row: its
    attributes and cells as (text, attributes)). Also every src/href on the page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self.links: list[str] = []
        self.script_blocks = 0
        self._section = None
        self._table = self._row = self._cell = None
        self._in_caption = False
        self._in_summary_cell = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.links.append(a[key])
        if tag == "script":
            self.script_blocks += 1
        if tag == "section":
            self._section = a.get("id")
        elif tag == "table":
            self._table = {"section": self._section, "caption": "", "headers": [], "rows": [],
                           "header_attrs": [], "attrs": a}
        elif tag == "caption":
            self._in_caption = True
        elif tag == "tr" and self._table is not None:
            self._row = {"attrs": a, "cells": []}
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"text": "", "attrs": a, "tag": tag}

    def handle_endtag(self, tag):
        if tag == "table" and self._table is not None:
            self.tables.append(self._table)
            self._table = None
        elif tag == "caption":
            self._in_caption = False
        elif tag in ("td", "th") and self._cell is not None:
            self._cell["text"] = self._cell["text"].strip()
            self._row["cells"].append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            cells = self._row["cells"]
            if cells and all(c["tag"] == "th" for c in cells):
                self._table["headers"] = [c["text"] for c in cells]
                self._table["header_attrs"] = [c["attrs"] for c in cells]
            else:
                self._table["rows"].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in_caption and self._table is not None:
            self._table["caption"] += data
        elif self._cell is not None:
            self._cell["text"] += data

    def in_section(self, section: str) -> list[dict]:
        return [t for t in self.tables if t["section"] == section]


def small_release(base: Path, releases: Path, name: str, finished: str, html: bool = True):
    """A two-scorer, one-task release (published in-process); its page too when ``html``."""
    from leaderboard.publishing.site import write_site
    from leaderboard.publishing.release import publish

    results = base / f"results-{name}"
    populate(results, {"softmax": 0.0, "ssa": -0.1}, with_grid=False, finished=finished)
    published = publish(results, name, releases, base / "LEADERBOARD.md", n_boot=N_BOOT)
    if html:
        write_site(published.release_dir, {})
    return published.release_dir


def add_claims(release_dir: Path) -> list[dict]:
    """Add a ``claims`` list (the board's claims schema) to a release's results.json and
    re-render its page (and its siblings'); returns the claims."""
    import json

    from leaderboard.publishing.site import write_site

    from leaderboard.publishing.release import read_results, write_results

    data = read_results(release_dir)
    base = {"source": "paper.pdf §4", "profile": "cpu", "baseline": "softmax",
            "task": "icl_linear", "metric": "error", "direction": "lower",
            "test": "paired bootstrap", "n_seeds": 3, "paper": "−3% error"}
    data["claims"] = [
        {**base, "id": "ssa-1", "claim": "SSA lowers the error", "scorer": "ssa",
         "verdict": "supported", "effect": -0.1234, "ci_low": -0.15, "ci_high": -0.1,
         "p": 0.0004, "detectable": 0.021},
        {**base, "id": "relu-1", "claim": "ReLU matches softmax", "scorer": "relu",
         "verdict": "contradicted", "effect": 0.25, "ci_low": 0.2, "ci_high": 0.3, "p": 0.01,
         "detectable": 0.0205},
        {**base, "id": f"{XSS}-1", "claim": XSS, "scorer": XSS, "verdict": "not run",
         "effect": None, "ci_low": None, "ci_high": None, "p": None, "detectable": None},
    ]
    write_results(json.dumps(data), release_dir)
    write_site(release_dir)
    return data["claims"]
