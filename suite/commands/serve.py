"""``scorebench serve``: preview the published HTML leaderboard on http://127.0.0.1:PORT/."""
from __future__ import annotations

import functools
import http.server
from pathlib import Path

HOST = "127.0.0.1"


def register(sub, common):
    p = sub.add_parser(
        "serve", parents=[common], help="preview the HTML leaderboard in a browser",
        description="Serve the releases directory on 127.0.0.1 (this machine only); / opens the "
                    "newest release that has an index.html (written by scorebench publish --html).")
    p.add_argument("--releases", default="leaderboard/releases", metavar="DIR",
                   help="releases directory (default leaderboard/releases)")
    p.add_argument("--port", type=int, default=8000,
                   help="port (default 8000; 0 picks a free one)")
    p.set_defaults(func=run)


def latest_page(releases_dir: Path) -> str:
    """The URL path of the newest release's index.html."""
    from leaderboard.publishing.site import INDEX
    from leaderboard.publishing.release import list_releases

    for release_dir, _ in list_releases(releases_dir):
        if (release_dir / INDEX).is_file():
            return f"/{release_dir.name}/{INDEX}"
    raise SystemExit(f"scorebench serve: no release under {str(releases_dir)!r} has an "
                     f"{INDEX}; write one with `scorebench publish --html` (or pass --releases DIR)")


class PreviewHandler(http.server.SimpleHTTPRequestHandler):
    """Static files of the releases directory; ``/`` redirects to the newest page."""

    def __init__(self, *args, landing: str, **kwargs):
        self.landing = landing
        super().__init__(*args, **kwargs)

    def do_GET(self):
        if self.path in ("/", "/index.html"):
            self.send_response(302)
            self.send_header("Location", self.landing)
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format, *args):
        pass


def make_server(releases_dir: str | Path, port: int = 8000) -> http.server.ThreadingHTTPServer:
    """A server for ``releases_dir`` bound to 127.0.0.1 (not started)."""
    root = Path(releases_dir)
    if not root.is_dir():
        raise SystemExit(f"scorebench serve: releases directory {str(root)!r} does not exist; "
                         "publish a release first (scorebench publish --html)")
    handler = functools.partial(PreviewHandler, directory=str(root.resolve()),
                                landing=latest_page(root))
    if not 0 <= port <= 65535:
        raise SystemExit(f"scorebench serve: --port {port} is not a port; give 0-65535")
    try:
        return http.server.ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        raise SystemExit(f"scorebench serve: cannot listen on {HOST}:{port} ({exc.strerror}); "
                         "pass another --port (0 picks a free one)") from None


def run(args) -> int:
    server = make_server(args.releases, args.port)
    host, port = server.server_address[:2]
    landing = server.RequestHandlerClass.keywords["landing"]
    print(f"serving {args.releases} at http://{host}:{port}/ (newest page: "
          f"http://{host}:{port}{landing}); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
