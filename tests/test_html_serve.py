"""`scorebench serve`: the releases directory on 127.0.0.1, / redirecting to the newest page."""
from __future__ import annotations

import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from html_support import small_release

from suite.commands.serve import make_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    base = tmp_path_factory.mktemp("serve")
    small_release(base, base / "releases", "a", "2025-01-01T00:00:00.000000+00:00")
    small_release(base, base / "releases", "b", "2025-02-01T00:00:00.000000+00:00")
    small_release(base, base / "releases", "c", "2025-03-01T00:00:00.000000+00:00", html=False)
    return base / "releases"


@pytest.fixture
def served(releases):
    server = make_server(releases, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_serves_the_newest_page_on_localhost(releases, served):
    assert served.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(served + "/") as response:  # follows the redirect
        assert response.url == served + "/b/index.html"  # c has no page
        assert response.read() == (releases / "b" / "index.html").read_bytes()
    with urllib.request.urlopen(served + "/a/plots/normalized__cpu.png") as response:
        assert response.headers["Content-Type"] == "image/png"
        assert response.read() == (releases / "a" / "plots" / "normalized__cpu.png").read_bytes()
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(served + "/a/missing.html")
    assert missing.value.code == 404


def test_clear_errors(tmp_path, releases, served):
    with pytest.raises(SystemExit, match="does not exist"):
        make_server(tmp_path / "none", 0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="scorebench publish --html"):
        make_server(tmp_path / "empty", 0)
    with pytest.raises(SystemExit, match="pass another --port"):
        make_server(releases, int(served.rsplit(":", 1)[1]))


def test_serve_command(releases):
    process = subprocess.Popen(
        [sys.executable, "-m", "suite.cli", "serve", "--releases", str(releases), "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(f"serving {releases} at http://127.0.0.1:"), line
        page = line.split("newest page: ")[1].split(")")[0]
        assert page.endswith("/b/index.html")
        with urllib.request.urlopen(page, timeout=30) as response:
            assert response.read() == (releases / "b" / "index.html").read_bytes()
    finally:
        process.terminate()
        process.wait(timeout=30)
