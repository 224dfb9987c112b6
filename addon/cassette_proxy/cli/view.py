"""`cassette view`: the cassettes as conversations in a browser, served read-only on 127.0.0.1 or exported to one file.

A folder of JSON files, or a run report's list of misses, is hard to read in
a terminal; a page that shows each recording as the conversation it was, with
the miss diffs next to the recordings they missed, is not. Everything from a
cassette is data the page puts into the DOM as text, under a strict content
security policy: a recorded prompt holding `<script>` stays a string. The
served index reads one small summary per file, cached by modification time, and
fetches a cassette in full only when opened. No mitmproxy import here.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import signal
import threading
import webbrowser
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..core.atomic_write import write_atomic
from ..core.cassette_file import CassetteError, load, parse, read_limited
from ..core.conversation import Conversation, conversation_of, first_line, kind_tag
from ..core.defaults import default_dir
from ..core.diff import ABSENT, changes
from ..core.report import Miss, Report, ReportError
from ..core.session_conversation import session_conversation
from ..core.session_file import is_session
from . import diff

SNIPPET = 240
"""Characters of the last user message and of the answer's first line kept in the index."""


# -- reading the folder -------------------------------------------------------------------------------------------


def cassette_ids(root: Path) -> dict[str, os.stat_result]:
    """Every cassette under the folder, as its `/`-separated path relative to it, with its stat; no temp files."""
    found: dict[str, os.stat_result] = {}
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((Path(entry.path), f"{prefix}{entry.name}/"))
                    elif entry.name.endswith(".json") and not entry.is_dir():
                        # A symlink out of the folder, a fifo: listed, and refused by the read with the reason.
                        found[prefix + entry.name] = _stat(entry)
        except OSError:
            continue
    return found


def _stat(entry: os.DirEntry) -> os.stat_result:
    """The entry's target's stat (a change to the file a symlink names is seen), its own for a broken link."""
    try:
        return entry.stat()
    except OSError:
        return entry.stat(follow_symlinks=False)


def conversation_in(cassette: dict) -> Conversation:
    """A WebSocket session is read by its own reader (session_conversation.py), every other cassette by conversation.py."""
    return session_conversation(cassette) if is_session(cassette) else conversation_of(cassette)


def summary_of(cassette_id: str, cassette: dict, size: int) -> dict:
    """What the start page lists for one cassette: small, so the index of a big folder stays small."""
    conversation = conversation_in(cassette)
    host, _, path = conversation.url.split("://", 1)[-1].split("?", 1)[0].partition("/")
    answer = conversation.answer
    return {
        "id": cassette_id,
        "key": str(cassette.get("key", "")),
        "recorded_at": str(cassette.get("recorded_at", "")),
        "size": size,
        "method": conversation.method,
        "host": host,
        "endpoint": "/" + path,
        "shape": conversation.shape,
        "model": conversation.model,
        "tag": kind_tag(cassette, conversation),
        "status": answer.status,
        "streamed": answer.streamed,
        "finish_reason": answer.finish_reason,
        "last_user": conversation.last_user_message[:SNIPPET],
        "answer": first_line(answer.text or next((p.text for p in answer.parts), ""))[:SNIPPET],
    }


def unreadable_summary(cassette_id: str, problem: str, size: int) -> dict:
    return {"id": cassette_id, "size": size, "error": problem, "host": cassette_id.split("/", 1)[0], "endpoint": ""}


def resolve_id(root: Path, cassette_id: str) -> Path | None:
    """The entry a cassette id names under the folder (no `..`, no absolute path), or None; what it holds is checked
    by the read (`cassette_file.read_limited`: inside the folder, a regular file, size-bounded), which says why not."""
    relative = PurePosixPath(cassette_id)
    if relative.is_absolute() or ".." in relative.parts or relative.suffix != ".json" or "\\" in cassette_id:
        return None
    path = root / relative
    return path if os.path.lexists(path) and not path.is_dir() else None


SUMMARY_FORMAT = 3
"""Bumped when `summary_of` changes, so summaries cached by an older version are read again (3: the `tag` of an
MCP call or a Responses WebSocket turn; 2: WebSocket sessions, which an older version listed as unreadable)."""


def default_cache_file(root: Path) -> Path:
    """Where the summaries of a folder are kept between runs: the user's cache folder, never the cassette folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / "cassette-proxy" / "view" / f"{digest}.json"


class Index:
    """One summary per cassette, re-read only for files whose size or modification time changed.

    The summaries outlive the process in `cache_file`: reading and summarising
    10,000 cassettes takes seconds, loading their cached summaries a fraction.
    A refresh runs in the background while the page shows what is ready
    (`snapshot`), so a first start on a big folder lists cassettes at once.
    """

    FIRST_WAIT = 1.0
    """Seconds an index request waits for a running refresh before answering with what is ready."""

    def __init__(self, root: Path, cache_file: Path | None = None) -> None:
        self.root = root
        self.cache_file = cache_file
        self._cache: dict[str, tuple[tuple[int, int], dict]] | None = None
        self._current: dict[str, os.stat_result] = {}
        self._lock = threading.Lock()
        """Guards `_cache` and `_current`, held only for quick updates so a snapshot never waits on a read."""
        self._refreshing = threading.Lock()
        self._refresher: threading.Thread | None = None

    def summaries(self) -> list[dict]:
        """Every summary, up to date: waits for the refresh (the export, and tests)."""
        self.refresh()
        return self.snapshot()[0]

    def refresh(self) -> None:
        with self._refreshing:
            with self._lock:
                if self._cache is None:
                    self._cache = self._load_cache()
            current = cassette_ids(self.root)
            with self._lock:
                gone = self._cache.keys() - current.keys()
                for cassette_id in gone:
                    del self._cache[cassette_id]
                self._current = current
                stale = [
                    (cassette_id, (status.st_mtime_ns, status.st_size))
                    for cassette_id, status in current.items()
                    if (cached := self._cache.get(cassette_id)) is None
                    or cached[0] != (status.st_mtime_ns, status.st_size)
                ]
            for cassette_id, stamp in stale:
                summary = self._read(cassette_id, stamp[1])
                with self._lock:
                    self._cache[cassette_id] = (stamp, summary)
            if gone or stale:
                self._save_cache()

    def refresh_in_background(self, wait: float = FIRST_WAIT) -> None:
        """Start a refresh unless one is running, and give it `wait` seconds to finish."""
        with self._lock:
            if self._refresher is None or not self._refresher.is_alive():
                self._refresher = threading.Thread(target=self.refresh, daemon=True)
                self._refresher.start()
            refresher = self._refresher
        refresher.join(wait)

    def snapshot(self) -> tuple[list[dict], int]:
        """The summaries read so far (a changed file shows its previous summary until re-read), and how many
        cassettes are still to be read."""
        with self._lock:
            ready = [self._cache[i][1] for i in sorted(self._current) if self._cache and i in self._cache]
            return ready, len(self._current) - len(ready)

    def _read(self, cassette_id: str, size: int) -> dict:
        try:
            return summary_of(cassette_id, load(self.root / cassette_id, self.root), size)
        except (OSError, CassetteError) as e:
            return unreadable_summary(cassette_id, str(e), size)

    def _load_cache(self) -> dict[str, tuple[tuple[int, int], dict]]:
        """The summaries a previous run cached; anything unreadable or from another format is ignored."""
        try:
            saved = json.loads(self.cache_file.read_text(encoding="utf-8")) if self.cache_file else None
        except (OSError, ValueError):
            return {}
        if not isinstance(saved, dict) or saved.get("format") != SUMMARY_FORMAT:
            return {}
        entries = saved.get("entries")
        if not isinstance(entries, dict):
            return {}
        return {
            cassette_id: ((entry[0], entry[1]), entry[2])
            for cassette_id, entry in entries.items()
            if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict)
        }

    def _save_cache(self) -> None:
        """Best effort: a cache that cannot be written only makes the next start slower."""
        if self.cache_file is None or self._cache is None:
            return
        with self._lock:
            entries = {cassette_id: [*stamp, summary] for cassette_id, (stamp, summary) in self._cache.items()}
        data = json.dumps({"format": SUMMARY_FORMAT, "root": str(self.root.resolve()), "entries": entries})
        with contextlib.suppress(OSError):
            write_atomic(self.cache_file, data.encode("utf-8"))


def detail(root: Path, cassette_id: str) -> dict:
    """One cassette in full: its conversation and its raw JSON; an unreadable file says why."""
    path = root / cassette_id
    try:
        raw = read_limited(path, root)  # the proxy's checks: nothing outside the folder, nothing unbounded
    except CassetteError as e:
        return {"id": cassette_id, "error": str(e)}
    except OSError as e:
        return {"id": cassette_id, "error": f"cannot read {cassette_id}: {e.strerror or e}"}
    raw_text = raw.decode("utf-8", errors="replace")
    try:
        cassette = parse(path, raw)
    except CassetteError as e:
        return {"id": cassette_id, "error": str(e), "raw": raw_text}
    request = cassette["request"]
    return {
        "id": cassette_id,
        "key": cassette.get("key", ""),
        "recorded_at": cassette.get("recorded_at", ""),
        "recorded_with": cassette.get("recorded_with") or {},
        "request_headers": request.get("headers") if isinstance(request.get("headers"), dict) else {},
        "response_headers": cassette["response"].get("headers") or {},
        "conversation": (conversation := conversation_in(cassette)).to_json(),
        "tag": kind_tag(cassette, conversation),
        "raw": raw_text,
    }


# -- run reports ----------------------------------------------------------------------------------------------------


def read_report(path: Path) -> Report:
    """The run report at `path`, read as every reader reads it (core/report.py)."""
    try:
        return Report.read(path)
    except ReportError as e:
        raise ReportError(f"{e} (pass the file cassette_report wrote)") from None


def _shown(value: Any) -> str | None:
    """One side of a side-by-side change: readable JSON, or None where the field does not exist."""
    if value is ABSENT:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def miss_view(root: Path, miss: Miss) -> dict[str, Any]:
    """A miss with, for each closest recording, the changed fields side by side (recorded | this run)."""
    closest = []
    for near in miss.get("closest") or []:
        if not isinstance(near, dict):
            continue
        cassette_id = str(near.get("cassette", ""))
        entry: dict[str, Any] = {"cassette": cassette_id, "differences": list(near.get("differences") or [])}
        path = resolve_id(root, cassette_id)
        if path is not None and "body" in miss:
            try:
                recorded = load(path, root)["request"].get("body")
            except (OSError, CassetteError):
                recorded = None
            else:
                entry["rows"] = [
                    [where, _shown(old), _shown(new)] for where, old, new in changes(recorded, miss["body"])
                ]
        closest.append(entry)
    shown = {name: miss.get(name, "") for name in ("key", "method", "url", "cassette")}
    return {**shown, "closest": closest}


def report_view(root: Path, reports: list[tuple[Path, Report]], ids: list[str]) -> dict[str, Any] | None:
    """What the pages show of one or more run reports: counts summed, misses with diffs, errors, unused cassettes."""
    if not reports:
        return None
    total = Report.merged([report for _, report in reports])
    return {
        "files": [str(path) for path, _ in reports],
        "counts": total.counts(),
        "misses": [miss_view(root, miss) for miss in total.misses],
        "errors": [error.to_json() for error in total.errors],
        "used": sorted(total.cassettes_used),
        "unused": [cassette_id for cassette_id in ids if cassette_id not in total.cassettes_used],
    }


# -- the page -------------------------------------------------------------------------------------------------------


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _page_file(name: str) -> str:
    return (Path(__file__).with_name(name)).read_text(encoding="utf-8")


def data_block(data: Any) -> str:
    """JSON that cannot end its `<script type="application/json">` element early, whatever the strings hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass(frozen=True)
class Page:
    html: str
    policy: str


def page(data: dict, served: bool) -> Page:
    """The page with its style and script inline, allowed by hash, and `data` embedded (never executed)."""
    style, script = _page_file("view_page.css"), _page_file("view_page.js")
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_digest(script)}",
            f"style-src {_digest(style)}",
            "img-src 'none'",
            "connect-src 'self'" if served else "connect-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    html = _page_file("view_page.html")
    # One pass over the placeholders: a value is never searched for the next placeholder.
    values = {
        "{{POLICY}}": policy,
        "{{STYLE}}": style,
        "{{SCRIPT}}": script,
        "{{DATA}}": data_block(data),
    }
    out, rest = [], html
    while "{{" in rest:
        before, _, after = rest.partition("{{")
        name, _, rest = after.partition("}}")
        out += [before, values["{{" + name + "}}"]]
    out.append(rest)
    return Page("".join(out), policy)


# -- serving --------------------------------------------------------------------------------------------------------


@dataclass
class ViewState:
    root: Path
    report_paths: list[Path]
    index: Index
    lock: threading.Lock = field(default_factory=threading.Lock)
    hosts: frozenset[str] = frozenset()
    """The `Host` values that name this server (`127.0.0.1:PORT`, `localhost:PORT`): any other is refused."""

    def reports(self) -> list[tuple[Path, Report]]:
        """Re-read on every index request: a report written by a run still going is picked up."""
        out = []
        for path in self.report_paths:
            try:
                out.append((path, read_report(path)))
            except ReportError:
                continue
        return out


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
            own = sorted(state.hosts)[0] if state.hosts else "127.0.0.1"
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1 or hosts[0].strip().lower() not in state.hosts:
                shown = ", ".join(repr(h) for h in hosts) or "none"
                problem = f"this server answers only requests for http://{own}/ (Host was {shown}); open that address"
                self._json({"error": problem}, HTTPStatus.MISDIRECTED_REQUEST)
                return True
            origin, site = self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site")
            if origin is not None and origin.strip().lower() not in {f"http://{host}" for host in state.hosts}:
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
    served_page = page({"mode": "served"}, served=True)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state, served_page))
    except OSError as e:
        print(f"cassette view: cannot listen on 127.0.0.1:{port}: {e.strerror or e} (pick another --port, or 0)")
        return 2
    server.daemon_threads = True
    port = server.server_address[1]
    state.hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
    url = f"http://127.0.0.1:{port}/"
    state.index.refresh_in_background(wait=0)  # start reading before the first page load
    print(f"cassette view: serving {state.root} at {url} (read-only; Ctrl-C to stop)", flush=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        signal.signal(signal.SIGTERM, previous)
    print("cassette view: stopped", flush=True)
    return 0


# -- exporting ------------------------------------------------------------------------------------------------------


def changed_ids(rev: str, root: Path) -> set[str]:
    """Cassettes added or re-recorded against a git revision (as `cassette diff` finds them), as ids."""
    diff.check_revision(rev)
    base = root.resolve()
    ids = set()
    for status, path in diff.changed_files(rev, root):
        if status != "D":
            try:
                ids.add((Path.cwd() / path).resolve().relative_to(base).as_posix())
            except ValueError:
                continue
    return ids


def export(state: ViewState, out: Path, only: set[str] | None) -> int:
    summaries = state.index.summaries()
    report = report_view(state.root, state.reports(), [s["id"] for s in summaries])
    chosen = [s for s in summaries if only is None or s["id"] in only]
    data = {
        "mode": "export",
        "root": str(state.root),
        "cassettes": chosen,
        "report": report,
        "details": {s["id"]: detail(state.root, s["id"]) for s in chosen},
    }
    write_atomic(out, page(data, served=False).html.encode("utf-8"))
    print(f"cassette view: wrote {out} ({len(chosen)} of {len(summaries)} cassettes)")
    return 0


def run(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if not root.is_dir():
        print(f"cassette view: {root} is not a folder (pass the cassette folder, or set CASSETTE_DIR)")
        return 2
    reports: list[tuple[Path, Report]] = []
    for path in args.report:
        try:
            reports.append((path, read_report(path)))
        except ReportError as e:
            print(f"cassette view: {e}")
            return 2
    if (args.only_used or args.changed) and not args.html:
        print("cassette view: --only-used and --changed limit an export: add --html OUT")
        return 2
    if args.only_used and not reports:
        print("cassette view: --only-used needs the run's report: add --report FILE")
        return 2
    state = ViewState(root, list(args.report), Index(root, None if args.no_cache else default_cache_file(root)))
    if not args.html:
        return serve(state, args.port, args.open)
    only: set[str] | None = None
    if args.only_used and (view := report_view(root, reports, [])) is not None:  # it is: reports is not empty
        only = set(view["used"]) | {near["cassette"] for miss in view["misses"] for near in miss["closest"]}
    if args.changed:
        try:
            changed = changed_ids(args.changed, root)
        except (diff.GitError, OSError) as e:
            print(f"cassette view: --changed {args.changed}: {e}")
            return 2
        only = changed if only is None else only | changed
    code = export(state, args.html, only)
    if args.open:
        webbrowser.open(args.html.resolve().as_uri())
    return code


def port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 1 to 65535, or 0 for a free one")
    return number


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view",
        help="browse the cassettes as conversations: served on 127.0.0.1, or exported to one HTML file",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("dir", nargs="?", type=Path, default=default_dir(), help="cassette folder")
    parser.add_argument(
        "--report",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a run report (cassette_report) to show: hits, misses with their diffs, errors, unused cassettes; repeatable",
    )
    parser.add_argument(
        "--html", type=Path, metavar="OUT", help="write one self-contained HTML file instead of serving"
    )
    parser.add_argument("--port", type=port, default=0, help="port on 127.0.0.1 to serve on (default: a free one)")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")
    parser.add_argument(
        "--only-used", action="store_true", help="export only the cassettes the report(s) used or missed near"
    )
    parser.add_argument(
        "--changed", metavar="REV", help="export only the cassettes added or re-recorded against a git revision"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="do not keep the cassettes' summaries between runs (kept in $XDG_CACHE_HOME/cassette-proxy/view)",
    )
    parser.set_defaults(func=run)
