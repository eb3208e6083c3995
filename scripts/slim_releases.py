"""Slim the committed releases (issue #51) without changing a number: each release's
results.json becomes results.json.gz (asserted to decompress to the same bytes), the derived
files (CSVs, index.html, scorers.json, the plots its README no longer embeds) are removed (git
rm; ``scorebench publish --rebuild`` writes them again), and README.md's "Files:" line and plot
links are rewritten: the committed plots (leaderboard.publishing.release.COMMITTED_PLOTS) stay
embedded with a caption, the other plots are no longer embedded. Nothing else in a README changes.

    python scripts/slim_releases.py [leaderboard/releases]
"""
from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard.rendering.markdown import REBUILD_NOTE, plot_caption  # noqa: E402
from leaderboard.publishing.release import (PLAIN_RESULTS, RESULTS, is_committed_plot,  # noqa: E402
                                 write_results)

IMAGE = re.compile(r"^!\[[^\]]*\]\((plots/[^)]+\.png)\)$")
DERIVED = ("results.csv", "overall.csv", "index.html", "scorers.json")


def slim_readme(text: str, release: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    skip_blank = False
    for i, line in enumerate(lines):
        if skip_blank and line == "":
            skip_blank = False
            continue
        skip_blank = False
        if line.startswith("Files: `results.json`"):
            out.append(REBUILD_NOTE.format(release=release))
            continue
        match = IMAGE.match(line)
        if match:
            if is_committed_plot(match.group(1)):
                caption = plot_caption(match.group(1))
                following = lines[i + 2] if i + 2 < len(lines) else ""
                out.append(line)
                if following != caption:
                    out += ["", caption]
            else:
                skip_blank = True
            continue
        out.append(line)
    return "\n".join(out)


def slim(release_dir: Path) -> None:
    plain = release_dir / PLAIN_RESULTS
    if plain.is_file():
        old = plain.read_bytes()
        write_results(old.decode("utf-8"), release_dir)
        assert gzip.decompress((release_dir / RESULTS).read_bytes()) == old, release_dir
        subprocess.run(["git", "rm", "-q", "--cached", "--ignore-unmatch", str(plain)], check=True)
    for name in DERIVED:
        path = release_dir / name
        if path.exists():
            subprocess.run(["git", "rm", "-q", "--ignore-unmatch", str(path)], check=True)
            path.unlink(missing_ok=True)
    for plot in sorted((release_dir / "plots").glob("*.png")):
        if not is_committed_plot(plot.name):
            subprocess.run(["git", "rm", "-q", "--ignore-unmatch", str(plot)], check=True)
            plot.unlink(missing_ok=True)
    readme = release_dir / "README.md"
    readme.write_text(slim_readme(readme.read_text(encoding="utf-8"), release_dir.name),
                      encoding="utf-8", newline="\n")
    subprocess.run(["git", "add", str(release_dir / RESULTS), str(readme)], check=True)


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "leaderboard/releases")
    for release_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        slim(release_dir)
        print(f"slimmed {release_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
