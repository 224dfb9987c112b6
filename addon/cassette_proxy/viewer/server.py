"""The viewer served read-only on 127.0.0.1: the page, the index, one cassette at a time; a request not addressed to
this server's own origin is refused, so no web page in the developer's browser can read the recordings."""

from __future__ import annotations

import json
import signal
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .index import cassette_ids, detail, resolve_id
from .page import Page, page
from .reports import ViewState, report_view


def own_hosts(port: int) -> tuple[str, str]:
    """The `Host` values that name the server listening on `port`, the one to open first: any other is refused."""
    return f"127.0.0.1:{port}", f"localhost:{port}"


def _handler(state: ViewState, served_page: Page) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "cassette-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a page load is dozens of requests; the terminal shows the URL and errors only

        def do_GET(self) -> None:
            if self._foreign():
                return
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/":
                self._send(HTTPStatus.OK, served_page.html.encode("utf-8"), "text/html; charset=utf-8")
            elif url.path == "/api/index":
                state.index.refresh_in_background()
                summaries, pending = state.index.snapshot()
                report = report_view(state.root, state.reports(), [s["id"] for s in summaries])
                self._json({"root": str(state.root), "cassettes": summaries, "pending": pending, "report": report})
            elif url.path == "/api/stamp":
                ids = cassette_ids(state.root)
                newest = max((s.st_mtime_ns for s in ids.values()), default=0)
                self._json({"count": len(ids), "newest": newest})
            elif url.path == "/api/cassette":
                cassette_id = (query.get("id") or [""])[0]
                if resolve_id(state.root, cassette_id) is None:
                    self._json({"error": f"no cassette {cassette_id!r} in {state.root}"}, HTTPStatus.NOT_FOUND)
                else:
                    self._json(detail(state.root, cassette_id))
            else:
                self._json({"error": f"no such page: {url.path}"}, HTTPStatus.NOT_FOUND)

        def _refuse(self) -> None:
            if not self._foreign():
                self._json({"error": "cassette view is read-only"}, HTTPStatus.METHOD_NOT_ALLOWED)

        def _foreign(self) -> bool:
            """Refuse (and say so) a request not addressed to this server's own origin.

            The server listens on 127.0.0.1 only, but a web page in the developer's
            browser can still reach it: by DNS rebinding (its own name resolving to
            127.0.0.1, so `Host` is that name) or by a cross-origin request (`Origin`
            and `Sec-Fetch-Site` say so). Either would read every recorded prompt.
            """
            own = own_hosts(self.connection.getsockname()[1])  # the port this connection was accepted on
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1 or hosts[0].strip().lower() not in own:
                shown = ", ".join(repr(h) for h in hosts) or "none"
                problem = (
                    f"this server answers only requests for http://{own[0]}/ (Host was {shown}); open that address"
                )
                self._json({"error": problem}, HTTPStatus.MISDIRECTED_REQUEST)
                return True
            origin, site = self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site")
            if origin is not None and origin.strip().lower() not in {f"http://{host}" for host in own}:
                self._json({"error": f"cross-origin requests are refused (Origin {origin!r})"}, HTTPStatus.FORBIDDEN)
                return True
            if site is not None and site.strip().lower() not in ("same-origin", "none"):
                self._json(
                    {"error": f"cross-site requests are refused (Sec-Fetch-Site {site!r})"}, HTTPStatus.FORBIDDEN
                )
                return True
            return False

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

        def _json(self, data: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
            body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            self._send(status, body, "application/json; charset=utf-8")

        def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.send_header("content-security-policy", served_page.policy + "; frame-ancestors 'none'")
            self.send_header("x-content-type-options", "nosniff")
            self.send_header("referrer-policy", "no-referrer")
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    return Handler


def serve(state: ViewState, port: int, open_browser: bool) -> int:
    """Serve until SIGTERM or Ctrl-C (port 0: a free one), printing the address first; 2 when it cannot listen."""
    served_page = page({"mode": "served"}, served=True)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state, served_page))
    except OSError as e:
        print(f"cassette view: cannot listen on 127.0.0.1:{port}: {e.strerror or e} (pick another --port, or 0)")
        return 2
    server.daemon_threads = True
    url = f"http://{own_hosts(server.server_address[1])[0]}/"
    state.index.refresh_in_background(wait=0)  # start reading before the first page load
    print(f"cassette view: serving {state.root} at {url} (read-only; Ctrl-C to stop)", flush=True)

    def stop(signum: int, frame: Any) -> None:
        # Ends serve_forever's loop from another thread (shutdown waits for it). Raising KeyboardInterrupt here
        # instead lands wherever the main thread is: inside a weakref callback it is only printed, and the viewer
        # went on serving after SIGTERM.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("cassette view: stopped", flush=True)
    return 0
