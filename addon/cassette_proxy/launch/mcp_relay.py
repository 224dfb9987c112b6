"""One MCP client's stdio conversation with its server, recorded and replayed (`cassette mcp`; the format is
core/sessions/mcp_stdio.py).

The client's newline-delimited JSON-RPC lines go to the server this starts, and the server's lines back; each
client request is recorded with the server's lines up to its response, written before the client sees that
response (a client that exits at once keeps it). In replay the server is never started: a request is answered
from its cassette, or with a JSON-RPC error carrying the miss's message. The counts go to a run report.

Stdout is the protocol: every message of ours goes to stderr.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..core.files.atomic_write import write_atomic
from ..core.files.cassette_file import dumps, large_json_as_text, load
from ..core.files.safe_read import CassetteError
from ..core.keys.key import request_key
from ..core.keys.recipe import Recipe, stored_request
from ..core.reading.miss import ClosestSearch, miss_body
from ..core.report import ErrorEntry, ErrorKind, Miss, Report
from ..core.secrets import redact
from ..core.sessions.mcp import id_key
from ..core.sessions.mcp_stdio import (
    answer_lines,
    cassette,
    facts,
    is_request,
    is_response_to,
    message,
    miss_line,
    relative_name,
)
from .errors import LauncherError

SERVER_EXIT_WAIT = 10.0
"""Seconds the server gets to exit once the client closed its stdin, before it is stopped (SIGTERM)."""


@dataclass
class Pending:
    """A request sent to the server, waiting for its response; `lines` the server's lines since, with their ms."""

    rpc_id: Any
    key: str
    relative: str
    path: Path
    request: dict[str, Any]
    existed: bool
    keep_existing: bool
    started: float = field(default_factory=time.monotonic)
    lines: list[tuple[int, bytes]] = field(default_factory=list)


class StdioSession:
    """One client's conversation with one server: the client's lines in, the server's (or the cassettes') out."""

    def __init__(
        self, mode: str, root: Path, name: str, recipe: Recipe, rules: tuple[redact.Rule, ...], out: IO[bytes]
    ) -> None:
        self.mode, self.root, self.name, self.recipe, self.rules = mode, root, name, recipe, rules
        self.out = out
        self.out_lock = threading.Lock()
        self.started_by = "run"
        """How to say what to type on a miss (core/hints.py): `cassette run --mode record`, or this command's flag."""
        self.report = Report()
        self.report.started(mode)
        self.closest = ClosestSearch()
        self.pending: dict[str, Pending] = {}
        self.pending_lock = threading.Lock()
        self.server: subprocess.Popen[bytes] | None = None
        self.reader: threading.Thread | None = None

    # -- the server ------------------------------------------------------------------------------------------

    def start(self, command: list[str]) -> None:
        """Record, update and off talk to the server; replay never starts it."""
        if self.mode == "replay":
            return
        try:
            self.server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:
            raise LauncherError(f"cannot start the MCP server {command[0]}: {e.strerror or e}") from None
        self.reader = threading.Thread(target=self._read_server, name="cassette mcp server", daemon=True)
        self.reader.start()

    def _read_server(self) -> None:
        assert self.server is not None and self.server.stdout is not None
        for line in self.server.stdout:
            value = message(line)
            done = None
            with self.pending_lock:
                oldest = next(iter(self.pending.values()), None)
                answered = next((p for p in self.pending.values() if value and is_response_to(value, p.rpc_id)), None)
                into = answered or oldest
                if into is not None and value is not None:
                    into.lines.append((round((time.monotonic() - into.started) * 1000), line))
                if answered is not None:
                    done = self.pending.pop(id_key(answered.rpc_id))
            if done is not None:
                self._save(done)  # before the client sees the response: a client that exits at once keeps it
            self._write(line)

    def _send(self, line: bytes) -> None:
        assert self.server is not None and self.server.stdin is not None
        try:
            self.server.stdin.write(line if line.endswith(b"\n") else line + b"\n")
            self.server.stdin.flush()
        except BrokenPipeError:
            say("cassette mcp: the server closed its stdin; the message was not delivered")

    def _write(self, line: bytes) -> None:
        with self.out_lock:
            self.out.write(line)
            self.out.flush()

    # -- the client ------------------------------------------------------------------------------------------

    def handle(self, line: bytes) -> None:
        """One line from the client."""
        if not line.strip():
            return
        value = message(line)
        if self.mode == "off" or value is None or not is_request(value):
            # Notifications and the client's responses to the server feed the live session; replay has none.
            if self.server is not None:
                self._send(line)
            return
        request_facts = facts(self.name, line)
        key = request_key(request_facts, self.recipe.key_headers, self.recipe.paths, self.recipe.patterns)
        relative = relative_name(self.name, key)
        path = self.root / relative
        # In record mode the session opens live, so that a new request later in it reaches a server that was
        # initialized (core/sessions/mcp.py: what keeps a session whole).
        keep_existing = self.mode == "record" and value.get("method") == "initialize"
        if self.mode in ("replay", "record") and not keep_existing and self._replayed(value["id"], path, relative):
            return
        stored = stored_request(request_facts, ())
        if self.mode == "replay":
            self._miss(value["id"], key, relative, stored)
            return
        pending = Pending(value["id"], key, relative, path, stored, path.exists(), keep_existing)
        with self.pending_lock:
            self.pending[id_key(value["id"])] = pending
        self.report.forwarded()
        self._send(line)

    def _replayed(self, rpc_id: Any, path: Path, relative: str) -> bool:
        try:
            recorded = load(path, self.root)
            lines = answer_lines(recorded, rpc_id)
        except FileNotFoundError:
            return False
        except (OSError, CassetteError, ValueError) as e:
            problem = f"{path}: {e}"
            self.report.error(ErrorEntry(ErrorKind.INVALID, problem, cassette=relative))
            self._write(miss_line(rpc_id, f"cassette unusable: {problem}. Fix or delete the file, then run again.", {}))
            return True
        for line in lines:
            self._write(line)
        self.report.hit(None, relative)
        return True

    def _miss(self, rpc_id: Any, key: str, relative: str, stored: dict[str, Any]) -> None:
        stored["body"] = redact.redacted(stored["body"], ("request", "body"), self.rules)
        endpoint = (self.root / relative).parent
        nearest = self.closest.closest(endpoint, self.root, stored, self.recipe)
        url = stored["url"]
        body = miss_body(key, "POST", url, relative, self.mode, nearest, started_by=self.started_by)
        text = body["error"]["message"]
        if self.started_by != "run":  # on its own, this command's flag records: not a proxy option
            text = text.replace("`--set cassette_mode=record`", "`cassette mcp --mode record -- …`")
        say(f"cassette mcp: miss: {url} key={key} (would be {relative})")
        details = {"type": "cassette_miss", "key": key, "url": url, "cassette": relative, "mode": self.mode}
        self._write(miss_line(rpc_id, text, details))
        self.report.missed(
            Miss(key=key, method="POST", url=url, cassette=relative, closest=nearest, test=None, body=stored["body"])
        )

    def _save(self, pending: Pending) -> None:
        if pending.keep_existing and pending.existed:
            self.report.used_by(None, pending.relative)
            return
        recorded_with = {"cassette_proxy": __version__}
        try:
            data = cassette(pending.key, pending.request, pending.lines, recorded_with, self.recipe.to_json())
            write_atomic(pending.path, dumps(large_json_as_text(redact.as_stored(data, self.rules))))
        except (OSError, UnicodeDecodeError) as e:
            reason = f"cassette not saved to {pending.path}: {getattr(e, 'strerror', None) or e}"
            say(f"cassette mcp: {reason}")
            self.report.error(ErrorEntry(ErrorKind.WRITE_FAILED, reason, cassette=pending.relative))
            return
        self.report.recorded_cassette(None, pending.relative, pending.existed)

    # -- the end ---------------------------------------------------------------------------------------------

    def finish(self, stopped: bool = False) -> int:
        """The client closed its stdin (or stopped us: `stopped`): let the server exit (or stop it at once), then
        count what never got its response."""
        status = 0
        if self.server is not None:
            if self.server.stdin is not None:
                with contextlib.suppress(OSError):
                    self.server.stdin.close()
            if stopped:
                self.server.terminate()
            try:
                status = self.server.wait(SERVER_EXIT_WAIT)
            except subprocess.TimeoutExpired:
                self.server.terminate()
                status = self.server.wait()
            if self.reader is not None:
                self.reader.join(SERVER_EXIT_WAIT)
        for pending in self.pending.values():
            reason = (
                f"cassette not saved: the MCP server {self.name} gave no response to request {pending.rpc_id!r} "
                "before the session ended"
            )
            self.report.error(ErrorEntry(ErrorKind.STREAM_INCOMPLETE, reason, cassette=pending.relative))
        return status


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
