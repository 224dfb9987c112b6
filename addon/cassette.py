"""The mitmproxy addon: `mitmdump -s addon/cassette.py`.

Options and hooks only; what a key is, what a file holds and what a miss says
live in their own modules.
"""

import asyncio
import fnmatch
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

if __name__ != "cassette_proxy.cassette" and "cassette_proxy" not in sys.modules:
    # Loaded by path (`mitmdump -s addon/cassette.py`): import the sibling
    # modules as the `cassette_proxy` package, so the script always runs with
    # the code beside it, installed or not.
    _spec = importlib.util.spec_from_file_location(
        "cassette_proxy",
        Path(__file__).with_name("__init__.py"),
        submodule_search_locations=[str(Path(__file__).parent)],
    )
    sys.modules["cassette_proxy"] = _package = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_package)

from cassette_proxy import __version__, store
from cassette_proxy import miss as misses
from cassette_proxy.key import RequestFacts, identity, key_of, parse_ignore_paths
from cassette_proxy.report import Report
from mitmproxy import ctx, exceptions, http
from mitmproxy import version as mitmproxy_version

log = logging.getLogger("cassette")

MODES = ("replay", "record", "update", "off")

DEFAULT_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "*.openai.azure.com",
    "api.mistral.ai",
    "api.groq.com",
    "api.together.xyz",
    "api.together.ai",
    "api.deepseek.com",
    "openrouter.ai",
    "api.x.ai",
    "api.fireworks.ai",
    "api.cohere.com",
    "api.cohere.ai",
)

DEFAULT_KEY_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")

JSON_ERROR_HEADERS = {"content-type": "application/json", "x-should-retry": "false"}
"""`x-should-retry: false` stops the OpenAI and Anthropic SDKs from retrying a 409 twice with backoff."""


def key_header_values(fields: Sequence[tuple[bytes, bytes]], names: Sequence[str]) -> dict[str, str]:
    """The request's values of the key headers, repeated ones folded with ", " as `Headers[name]` folds them.

    One pass over the raw fields: each `Headers` lookup scans every field, and copying them
    all (`dict(flow.request.headers)`) was the largest cost of a hit (see benchmarks/).
    """
    found: dict[str, list[str]] = {}
    for raw_name, raw_value in fields:
        name = raw_name.decode("utf-8", "surrogateescape").lower()
        if name in names:
            found.setdefault(name, []).append(raw_value.decode("utf-8", "surrogateescape"))
    return {name: ", ".join(values) for name, values in found.items()}


@dataclass
class Pending:
    """A request sent upstream whose response may become a cassette."""

    key: str
    path: Path
    relative: str
    request: dict
    existed: bool


class Cassette:
    def __init__(self) -> None:
        self.report = Report()

    def load(self, loader) -> None:
        loader.add_option(
            "cassette_mode",
            str,
            os.environ.get("CASSETTE_MODE", "replay"),
            "replay: answer from disk only, a miss answers 409; record: replay what exists, forward and save "
            "what is missing; update: forward everything in scope and overwrite; off: plain passthrough. "
            "Defaults to $CASSETTE_MODE, else replay.",
        )
        loader.add_option(
            "cassette_dir",
            str,
            os.environ.get("CASSETTE_DIR", "cassettes"),
            "Folder holding the cassettes (one JSON file per interaction). Defaults to $CASSETTE_DIR, else ./cassettes.",
        )
        loader.add_option(
            "cassette_hosts",
            Sequence[str],
            list(DEFAULT_HOSTS),
            "Hosts under cassette control, as globs (`*` for all); traffic to other hosts passes through untouched.",
        )
        loader.add_option(
            "cassette_ignore",
            Sequence[str],
            [],
            "JSON body fields left out of the key, as dotted paths with `*` for every list item "
            "(e.g. metadata.trace_id, messages.*.id). Empty: every field counts.",
        )
        loader.add_option(
            "cassette_key_headers",
            Sequence[str],
            list(DEFAULT_KEY_HEADERS),
            "Request headers that are part of the key because they change what the API does.",
        )
        loader.add_option(
            "cassette_report",
            str | None,
            None,
            "Write a JSON run report (hits, misses, recorded, upstream, passthrough, errors) to this path on shutdown.",
        )
        loader.add_option(
            "cassette_ready_file",
            str | None,
            None,
            'Once the proxy listens, write {"pid": ..., "listen": [...]} to this path atomically; '
            "how a launcher learns the port of `-p 0`.",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "cassette_mode" in updated:
            if opts.cassette_mode not in MODES:
                raise exceptions.OptionsError(
                    f"cassette_mode: {opts.cassette_mode!r} is not a mode; use one of {', '.join(MODES)}"
                )
            self.report.mode = opts.cassette_mode
        if "cassette_ignore" in updated:
            try:
                self.ignore = parse_ignore_paths(opts.cassette_ignore)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_ignore: {e}") from None
        if "cassette_hosts" in updated:
            if not opts.cassette_hosts or any(not h.strip() for h in opts.cassette_hosts):
                raise exceptions.OptionsError(
                    f"cassette_hosts: {list(opts.cassette_hosts)!r} must list host globs (`*` for every host)"
                )
            self.hosts = tuple(h.strip().lower() for h in opts.cassette_hosts)
        if "cassette_key_headers" in updated:
            self.key_headers = tuple(h.strip().lower() for h in opts.cassette_key_headers if h.strip())
        if "cassette_dir" in updated:
            self.root = Path(opts.cassette_dir).expanduser().resolve()
            if self.root.exists() and not self.root.is_dir():
                raise exceptions.OptionsError(f"cassette_dir: {opts.cassette_dir!r} exists and is not a folder")
        for name in ("cassette_report", "cassette_ready_file"):
            value = getattr(opts, name)
            if name in updated and value and not Path(value).expanduser().resolve().parent.is_dir():
                raise exceptions.OptionsError(f"{name}: the folder of {value!r} does not exist")
        if opts.connection_strategy != "lazy":
            # With `eager`, mitmproxy connects upstream before any hook runs: an
            # offline replay would fail before the addon could answer.
            opts.connection_strategy = "lazy"

    def running(self) -> None:
        if not ctx.options.cassette_ready_file:
            return
        listen, seen = [], set()
        for server in ctx.master.addons.get("proxyserver").servers:
            for host, port, *_ in server.listen_addrs:
                if (server.mode.full_spec, host, port) not in seen:
                    seen.add((server.mode.full_spec, host, port))
                    listen.append({"mode": server.mode.full_spec, "host": host, "port": port})
        ready = {"pid": os.getpid(), "mode": ctx.options.cassette_mode, "listen": listen}
        store.write_atomic(Path(ctx.options.cassette_ready_file), json.dumps(ready).encode())

    def done(self) -> None:
        if ctx.options.cassette_report:
            self.report.write(Path(ctx.options.cassette_report))

    def in_scope(self, host: str) -> bool:
        host = host.lower()
        return any(fnmatch.fnmatchcase(host, pattern) for pattern in self.hosts)

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or not flow.live:
            return
        mode = ctx.options.cassette_mode
        if mode == "off" or not self.in_scope(flow.request.host):
            self.report.passthrough += 1
            return
        req = flow.request
        facts = RequestFacts(
            method=req.method,
            scheme=req.scheme,
            host=req.host,
            port=req.port,
            path=urlsplit(req.path).path or "/",
            query=list(req.query.items(multi=True)) if "?" in req.path else [],  # parsing rebuilds the whole URL
            headers=key_header_values(req.headers.fields, self.key_headers),
            body=req.get_content(strict=False) or b"",
            content_type=req.headers.get("content-type", ""),
        )
        ident = identity(facts, self.key_headers, self.ignore)
        key = key_of(ident)
        relative = store.relative_path(facts.scheme, facts.host, facts.port, facts.path, key)
        path = self.root / relative
        if mode != "update":
            try:
                cassette = store.load(path)
            except FileNotFoundError:
                cassette = None
            except (OSError, store.CassetteError) as e:
                self._answer_unusable_cassette(flow, path, e)
                return
            if cassette is not None:
                self._replay(flow, cassette, relative.as_posix())
                return
        if mode == "replay":
            self._answer_miss(flow, key, ident, path, relative.as_posix(), facts)
            return
        flow.metadata["cassette"] = Pending(
            key=key,
            path=path,
            relative=relative.as_posix(),
            request={
                "method": ident["method"],
                "url": ident["url"],
                "headers": ident["headers"],
                **store.body_fields(facts.body, facts.content_type),
            },
            existed=path.exists(),
        )
        self.report.upstream += 1

    def _replay(self, flow: http.HTTPFlow, cassette: dict, relative: str) -> None:
        recorded = cassette["response"]
        body = store.decode_body(recorded.get("body_format", "text"), recorded.get("body", ""))
        flow.response = http.Response.make(recorded["status"], body, recorded.get("headers", {}))
        flow.metadata["cassette_outcome"] = "hit"
        self.report.hits += 1
        self.report.cassettes_used.add(relative)

    def _answer_miss(
        self, flow: http.HTTPFlow, key: str, ident: dict, path: Path, relative: str, facts: RequestFacts
    ) -> None:
        body = store.body_fields(facts.body, facts.content_type)["body"]
        nearest = misses.closest(path.parent, self.root, ident["method"], body)
        error = misses.miss_body(key, ident["method"], ident["url"], relative, ctx.options.cassette_mode, nearest)
        flow.response = http.Response.make(409, json.dumps(error, ensure_ascii=False, indent=2), JSON_ERROR_HEADERS)
        flow.metadata["cassette_outcome"] = "miss"
        self.report.misses.append({"key": key, "method": ident["method"], "url": ident["url"], "cassette": relative})
        log.warning(f"cassette miss: {ident['method']} {ident['url']} key={key} (would be {relative})")

    def _answer_unusable_cassette(self, flow: http.HTTPFlow, path: Path, error: Exception) -> None:
        """A broken file must not look like a miss: a re-record would paper over it."""
        message = f"cassette unusable: {error}. Fix or delete the file, then run again."
        body = misses.error_body("cassette_invalid", message, cassette=str(path))
        flow.response = http.Response.make(500, json.dumps(body, ensure_ascii=False), JSON_ERROR_HEADERS)
        flow.metadata["cassette_outcome"] = "error"
        self.report.errors.append({"type": "cassette_invalid", "cassette": str(path), "message": str(error)})
        log.error(message)

    async def response(self, flow: http.HTTPFlow) -> None:
        pending = flow.metadata.get("cassette")
        if not isinstance(pending, Pending) or flow.response is None:
            return
        status = flow.response.status_code
        if not 200 <= status < 300:
            log.warning(f"cassette not saved: upstream answered {status} for {pending.request['url']}")
            return
        response = {
            "status": status,
            "headers": store.stored_headers(list(flow.response.headers.items(multi=True))),
            **store.body_fields(
                flow.response.get_content(strict=False) or b"", flow.response.headers.get("content-type", "")
            ),
        }
        cassette = store.new_cassette(
            pending.key,
            pending.request,
            response,
            {"cassette_proxy": __version__, "mitmproxy": mitmproxy_version.VERSION},
        )
        try:
            await asyncio.to_thread(store.write_atomic, pending.path, store.dumps(cassette))
        except OSError as e:
            reason = f"cassette not saved to {pending.path}: {e.strerror or e}"
            flow.response.headers["x-cassette-error"] = reason
            self.report.errors.append(
                {"type": "cassette_write_failed", "cassette": pending.relative, "message": reason}
            )
            log.error(reason)
            return
        if pending.existed:
            self.report.overwritten += 1
        else:
            self.report.recorded += 1
        self.report.cassettes_used.add(pending.relative)


addons = [Cassette()]
