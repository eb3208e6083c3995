"""Screenshots of a release's ``index.html`` in headless Chromium (Debian's ``chromium`` and
``chromedriver``, driven by Selenium), as a reader sees it:

    python scripts/screenshots.py leaderboard/releases/2026-11-29-cpu

writes ``screenshot-overall.png``, ``screenshot-icl.png`` and ``screenshot-plots.png`` (1400 px
wide) and ``screenshot-overall-420px.png`` (420 px wide, a phone) into the release directory (or
``--out``). Each is the top of the tab, ``--height`` px tall, saved as a 256-colour PNG to stay
small. The page is opened from disk (file://); it fetches nothing.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

SHOTS = (("overall", "overall", 1400), ("icl", "track-icl", 1400), ("plots", "plots", 1400),
         ("overall-420px", "overall", 420))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chrome(width: int, height: int, profile: Path):
    """A headless Chromium driver whose viewport is ``width`` x ``height`` CSS px."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        sys.exit("chromium and chromedriver are needed: apt-get install -y chromium "
                 "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    return driver


def shrink(path: Path) -> None:
    """Re-save a screenshot as a 256-colour PNG (a fraction of the size, same look)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def take(release_dir: Path, out: Path, height: int = 1000) -> list[Path]:
    index = (release_dir / "index.html").resolve()
    if not index.is_file():
        sys.exit(f"{index} does not exist; write it with `scorebench publish --html`")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for width in sorted({w for _, _, w in SHOTS}):
            driver = chrome(width, height, Path(tmp) / f"profile-{width}")
            try:
                for name, tab, w in SHOTS:
                    if w != width:
                        continue
                    driver.get(f"{index.as_uri()}#{tab}")
                    driver.execute_script("window.scrollTo(0, 0)")
                    driver.execute_script(
                        "return Promise.all(Array.from(document.images).filter(i => "
                        "i.getBoundingClientRect().top < innerHeight).map(i => i.decode()"
                        ".catch(() => null)))")
                    path = out / f"screenshot-{name}.png"
                    driver.save_screenshot(str(path))
                    shrink(path)
                    written.append(path)
            finally:
                driver.quit()
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("release_dir", type=Path, help="a release directory with index.html")
    p.add_argument("--out", type=Path, help="where the PNGs go (default: the release directory)")
    p.add_argument("--height", type=int, default=1000, help="viewport height in px")
    args = p.parse_args(argv)
    for path in take(args.release_dir, args.out or args.release_dir, args.height):
        print(f"{path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
