"""The answers the addon makes itself instead of forwarding a request: a miss, a refusal as offline, an unusable
cassette, a token exchange, a bug of ours.

Each builder sets the flow's response (a JSON error every SDK surfaces and none
retries, errors.py), logs what happened, and returns the entry the run report
counts; the addon's hooks decide when to call them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from mitmproxy import http

from ..core.keys.hosts import HostScope
from ..core.keys.key import CREDENTIAL_HEADERS, RequestFacts
from ..core.keys.recipe import stored_request
from ..core.output import logger
from ..core.reading import miss as misses
from ..core.reading.miss import ClosestSearch
from ..core.report import ErrorEntry, ErrorKind, Miss, Offline
from ..core.secrets import redact
from ..core.secrets.scrub import register
from ..core.sessions.mcp import McpRequest
from ..core.sessions.mcp import miss_answer as mcp_miss
from ..core.traffic.token_exchange import placeholder
from ..core.workers.request_worker import closest_in_worker
from .control_channel import RequestRules
from .errors import error_response, json_response
from .options import RunOptions
from .state import FlowState, Outcome

log = logger(__name__)


async def miss(
    flow: http.HTTPFlow,
    facts: RequestFacts,
    key: str,
    relative: str,
    endpoint: Path,
    rules: RequestRules,
    options: RunOptions,
    closest: ClosestSearch,
    big: bool,
    mcp: McpRequest | None = None,
) -> Miss:
    """409, naming the key, the cassette it would be (`relative`) and what changed against the closest recordings
    in the cassette's folder (`endpoint`); for MCP requests, as the JSON-RPC error of each (core/sessions/mcp.py). `big`:
    a body of `request_worker.BIG_REQUEST_BYTES` or more, as the request hook found it: handed to a worker."""
    key_headers = options.recipe.key_headers
    if big:  # parsed, redacted and compared by a worker process
        request = stored_request(facts._replace(body=b""), key_headers)
        search = closest_in_worker(
            facts, key_headers, list(options.redact_specs), options.recipe.settings(), endpoint, options.root
        )
    else:
        request = stored_request(facts, key_headers)
        # Redacted like the recordings it is compared with: the diff shows real changes, and no secret.
        request["body"] = redact.redacted(request["body"], ("request", "body"), options.redact_rules)
        # Up to MAX_CANDIDATES recordings to compare (read once, then kept): off the event loop.
        search = asyncio.to_thread(closest.closest, endpoint, options.root, request, options.recipe)
    nearest, cut = await _bounded(search)
    method, url = request["method"], redact.loggable_url(request["url"])  # on disk: no secret in any URL
    error = misses.miss_body(
        key, method, url, relative, rules.mode, nearest, rules.scope, rules.test, options.started_by, cut
    )
    if mcp is not None and mcp.ids:
        message = error["error"]["message"]
        details = {name: error["error"][name] for name in ("type", "key", "url", "cassette", "mode")}
        flow.response = json_response(409, mcp_miss(mcp, message, details), indent=2)
    else:
        flow.response = json_response(409, error, indent=2)
    in_test = f" in test {rules.test}" if rules.test else ""
    log.warning(f"cassette miss: {method} {url} key={key} (would be {relative}){in_test}")
    # The redacted body and the closest recordings let `cassette view` show the miss's diff side by side
    # (not a big body's: the report would hold megabytes; its closest recordings still name the differences).
    entry = Miss(
        key=key, method=method, url=url, cassette=relative, closest=nearest, test=rules.test, scope=rules.scope
    )
    if not big:
        entry["body"] = request["body"]
    return entry


MISS_WAIT_SECONDS = 10.0
"""The 409 waits this long at most for the closest-recording search, whatever goes wrong in it. The search stops
itself after `miss.SEARCH_SECONDS` of CPU time; this wall-clock backstop is for what that cannot see (a stuck
read, a worker process on a machine under heavy load, a bug of ours), so it leaves room for a loaded machine:
past it the miss is answered without the closest recordings, and says so."""


async def _bounded(search: Coroutine[Any, Any, list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], float | None]:
    """The search's result, or ([], the seconds waited) when it took longer than MISS_WAIT_SECONDS: whatever the
    bodies, a miss is answered in bounded time (the search's thread finishes on its own)."""
    try:
        return await asyncio.wait_for(search, MISS_WAIT_SECONDS), None
    except TimeoutError:
        log.warning(
            f"cassette miss: the closest-recording search took over {MISS_WAIT_SECONDS:g} s; answered without it"
        )
        return [], MISS_WAIT_SECONDS


def offline(flow: http.HTTPFlow, host: str, hosts: HostScope) -> Offline:
    """403 for a replay-mode request to a host outside the scope: replay does not reach the network."""
    method = flow.request.method
    url = f"{flow.request.scheme}://{host}{flow.request.path.split('?', 1)[0]}"  # no query: no secret
    outside = f"{host} is" if host not in hosts else f"{url} is (cassette_hosts names only some paths of {host})"
    message = (
        f"cassette_offline: replay mode does not reach the network, and {outside} outside cassette_hosts; "
        f"refused {method} {url}. Add the host to cassette_hosts to record it, or to cassette_allow_hosts "
        "(`cassette run --allow-host`) to let it through."
    )
    flow.response = error_response(403, "cassette_offline", message, host=host)
    log.warning(message)
    return Offline(host=host, method=method, url=url)


def browser_background(flow: http.HTTPFlow) -> None:
    """204 for a browser's own background request (core/traffic/browser_background.py): nothing new, never forwarded."""
    flow.response = http.Response.make(204, b"", {"x-cassette": "browser-background"})


def unattributed(flow: http.HTTPFlow, problem: str) -> ErrorEntry:
    """428 for a request in the test scope whose test cannot be named: a guessed folder would misfile it silently."""
    request = flow.request
    url = redact.loggable_url(request.pretty_url.split("?", 1)[0])
    message = (
        f"cassette_unattributed: refused {request.method} {url}: no test can be named for it in the test scope: "
        f"{problem}. Nothing was recorded or replayed."
    )
    flow.response = error_response(428, "cassette_unattributed", message)
    log.warning(message)
    return ErrorEntry(ErrorKind.UNATTRIBUTED, message, url=url)


def unusable_cassette(flow: http.HTTPFlow, path: str, error: Exception) -> ErrorEntry:
    """500 for a cassette that cannot be used: a broken file must not look like a miss (a re-record would paper
    over it)."""
    # The path once: an OSError's own text repeats it (`[Errno 13] Permission denied: '<path>'`).
    problem = f"{path}: {error.strerror}" if isinstance(error, OSError) and error.strerror else str(error)
    message = f"cassette unusable: {problem}. Fix or delete the file, then run again."
    flow.response = error_response(500, "cassette_invalid", message, cassette=path)
    log.error(message)
    return ErrorEntry(ErrorKind.INVALID, problem, cassette=path)


def token_exchange(flow: http.HTTPFlow) -> None:
    """A placeholder token, so that client libraries refresh offline; never stored nor logged with its token."""
    request = flow.request
    body = request.get_content(strict=False) or b""
    headers, answer = placeholder(request.host, request.path, body, request.headers.get("content-type", ""))
    flow.response = http.Response.make(200, answer, headers)


def own_error_text(flow: http.HTTPFlow, error: Exception) -> str:
    """What a bug of ours while handling `flow` says of its exception, in the log and the report alike. The
    request's credentials are registered with the scrubber first: an exception may quote them in any form, and
    the text (redact.loggable_error), the log and the report all go through it."""
    for name in CREDENTIAL_HEADERS:
        for value in flow.request.headers.get_all(name):
            register(value, value.partition(" ")[2])  # the whole value, and a `Bearer` token's own part
    return redact.loggable_error(error)


def own_error(flow: http.HTTPFlow, state: FlowState, hook: str, error: Exception) -> ErrorEntry:
    """A bug of ours: the client gets a JSON 500 it will not retry, the log the traceback; nothing is saved."""
    what = own_error_text(flow, error)
    message = (
        f"cassette_error: the cassette addon failed in its {hook} hook ({what}); the request was not forwarded. "
        "This is a bug in Cassette Proxy: please report it with the proxy log."
    )
    log.error(message, exc_info=True)
    state.target = None  # nothing is saved from a flow our code could not follow
    state.outcome = Outcome.ERROR
    # A response already streaming to the client cannot be replaced; mitmproxy ends it.
    if flow.live and not (flow.response is not None and hook == "responseheaders" and flow.response.stream):
        flow.response = error_response(500, "cassette_error", message)
    if flow.intercepted:
        flow.resume()
    return ErrorEntry(ErrorKind.OWN_ERROR, message, hook=hook)
