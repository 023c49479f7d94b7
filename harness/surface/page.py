"""The interactive page of a prediction surface: written next to the data, served on 127.0.0.1.

The page is four static files (``index.html``, ``logic.js``, ``app.js``, ``style.css`` in
``harness/surface/page/``; ``logic.js`` holds the pure functions ``app.js`` draws with):
plain HTML, CSS and JavaScript with a canvas heatmap, no network access beyond its own data files, so it
works from any static file server (``python -m http.server`` in the surface directory) and offline.
:func:`write_page` copies them into a surface directory; :func:`serve` is ``run_experiment.sh
surface-serve``. What the page shows and where it looks for its data: docs/surface.md ("The page").
"""

from __future__ import annotations

import errno
import functools
import http.server
import os
import pathlib

from simulator.base.errors import UserError
from simulator.base.io_utils import atomic_write_bytes

#: the page's files, shipped with the package
ASSETS_DIR = pathlib.Path(__file__).with_name("page")
ASSETS = ("index.html", "logic.js", "app.js", "style.css")

DEFAULT_HOST = "127.0.0.1"


def write_page(surface_dir: pathlib.Path) -> None:
    """Write the page (:data:`ASSETS`) into ``surface_dir``, atomically each.

    The page reads ``manifest.json`` etc. next to itself, so it belongs in the directory holding the data.
    """
    surface_dir = pathlib.Path(surface_dir)
    for name in ASSETS:
        atomic_write_bytes(surface_dir / name, (ASSETS_DIR / name).read_bytes())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files without a log line per request (a page visit fetches several files)."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass

    def send_head(self):
        """400 for a path no file can have (``GET /%00``: the base class's ``open`` raised, a traceback)."""
        if "\0" in self.translate_path(self.path):
            self.send_error(400, "a path with a NUL byte")
            return None
        return super().send_head()


def make_server(surface_dir: pathlib.Path, port: int, host: str = DEFAULT_HOST) -> http.server.ThreadingHTTPServer:
    """A threaded static file server of ``surface_dir`` on ``host:port`` (port 0: any free port).

    A port in use is one readable line (:class:`UserError`), not a traceback.
    """
    handler = functools.partial(_QuietHandler, directory=os.fspath(surface_dir))
    try:
        return http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use: set SURFACE_PORT to another port") from None
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def require_surface(surface_dir: pathlib.Path) -> None:
    """Refuse (one line) a run without a computed surface; add the page when only it is missing."""
    surface_dir = pathlib.Path(surface_dir)
    if not (surface_dir / "manifest.json").is_file():
        raise UserError(f"no prediction surface in {surface_dir} yet: run `bash run_experiment.sh surface` first")
    if not all((surface_dir / name).is_file() for name in ASSETS):
        write_page(surface_dir)


def serve(surface_dir: pathlib.Path, port: int, host: str = DEFAULT_HOST) -> int:
    """Serve the surface page until Ctrl-C, after printing its URL; returns the exit status (0)."""
    require_surface(surface_dir)
    server = make_server(surface_dir, port, host)
    url = f"http://{host}:{server.server_address[1]}/"
    print(f"prediction surface of {surface_dir}\nserving on {url}  (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0


__all__ = ["ASSETS", "ASSETS_DIR", "DEFAULT_HOST", "make_server", "require_surface", "serve", "write_page"]
