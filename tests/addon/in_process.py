"""The cassette addon in mitmproxy's own test context (`taddons`), driven through its hooks as mitmdump drives them.

The one place the in-process tests name the addon's class: a rename is one line here (`Addon`). Only mitmproxy's
public interface is used: options set as `--set` sets them, hooks called in mitmproxy's order, and what the addon
leaves behind: the flow's response, the files under the cassette folder, the run report `done()` writes.

A forwarded request is held by the addon until it has probed the upstream, so a recording goes to a
`LoopbackUpstream`: a socket listening on 127.0.0.1 that the probe reaches (and counts) but that never answers;
`InProcessProxy.answer` hands the addon the upstream's response, as mitmproxy would once it arrived.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from cassette_proxy.proxy.addon import CassetteAddon as Addon
from mitmproxy import hooks, http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

CHAT_PATH = "/v1/chat/completions"


def chat_flow(
    body: dict | bytes, url: str = f"https://api.openai.com{CHAT_PATH}", headers: dict[str, str] | None = None
) -> http.HTTPFlow:
    """A client's POST, as mitmproxy hands it to the `request` hook."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    flow = tflow.tflow()
    flow.request = http.Request.make("POST", url, content, {"content-type": "application/json", **(headers or {})})
    return flow


def json_answer(body: dict, status: int = 200, **headers: str) -> http.Response:
    """An upstream's JSON response."""
    return http.Response.make(status, json.dumps(body), {"content-type": "application/json", **headers})


class LoopbackUpstream:
    """A socket listening on 127.0.0.1 that stands in for an API: the kernel completes each connection (so the addon's
    reachability probe succeeds) and nothing answers; `connections()` counts the connections made so far."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.setblocking(False)
        self.port: int = self.socket.getsockname()[1]
        self.host = f"127.0.0.1:{self.port}"
        self.accepted = 0

    def url(self, path: str = CHAT_PATH) -> str:
        return f"http://{self.host}{path}"

    def connections(self) -> int:
        while True:
            try:
                connection, _ = self.socket.accept()
            except BlockingIOError:
                return self.accepted
            connection.close()
            self.accepted += 1

    def close(self) -> None:
        self.socket.close()


class InProcessProxy:
    """One addon in its own mitmproxy test context: `start(...)`, then `request`, `answer`, `done`, `close`.

    One at a time: mitmproxy's `ctx`, which the addon reads options through, is the newest context's."""

    def __init__(self, cassette_dir: Path, report: Path) -> None:
        self.cassette_dir = cassette_dir
        self.report_path = report
        self.addon = Addon()
        self.context = taddons.context(self.addon, Proxyserver())
        self.options = self.context.options
        self.loop = self.context.master.event_loop

    def start(self, *settings: str, **options: object) -> InProcessProxy:
        """Configure every option as mitmdump does at start, then apply `settings` (`name=value`, parsed as `--set`
        parses them) and `options` (values): a bad one raises the OptionsError that stops mitmdump."""
        self.context.master.addons.invoke_addon_sync(self.addon, hooks.ConfigureHook(set(self.options.keys())))
        self.options.update(cassette_dir=str(self.cassette_dir), cassette_report=str(self.report_path), **options)
        self.options.set(*settings)
        return self

    def request(self, flow: http.HTTPFlow) -> http.HTTPFlow:
        """The `request` hook, then what mitmproxy waits for before it forwards a request the addon held."""
        self.loop.run_until_complete(self._request(flow))
        return flow

    async def _request(self, flow: http.HTTPFlow) -> None:
        await self.addon.request(flow)
        async with asyncio.timeout(30):
            await flow.wait_for_resume()

    def control(self, token: str, path: str, body: dict, status: int = 200) -> dict:
        """A call on the control channel (`/v1/test/start`, …) as a runner makes it: its JSON answer, which must
        come with `status`."""
        flow = tflow.tflow()
        flow.request = http.Request.make(
            "POST", f"http://cassette.control{path}", json.dumps(body), {"x-cassette-control-token": token}
        )
        self.request(flow)
        assert flow.response is not None and flow.response.status_code == status, flow.response
        return json.loads(flow.response.content)

    def answered(self, flow: http.HTTPFlow) -> http.HTTPFlow:
        """The `request` hook, then the `responseheaders` hook mitmproxy runs for an answer the addon made there
        (a hit, a miss), before it sends it to the client."""
        self.request(flow)
        assert flow.response is not None, "the addon let this request through: use answer() for its response"
        self.addon.responseheaders(flow)
        return flow

    def answer(self, flow: http.HTTPFlow, response: http.Response) -> http.HTTPFlow:
        """The upstream's response to a request the addon let through, via the hooks mitmproxy runs for it."""
        assert flow.response is None, "the addon answered this request itself: mitmproxy would not forward it"
        flow.response = response
        self.addon.responseheaders(flow)
        self.loop.run_until_complete(self.addon.response(flow))
        return flow

    def done(self) -> dict:
        """Shutdown: the addon waits for its writer threads, then writes the run report, which is returned."""
        self.addon.done()
        return json.loads(self.report_path.read_text())

    def close(self) -> None:
        self.loop.close()


def files_under(folder: Path) -> list[Path]:
    """Every file, hidden ones too (a writer's temp files start with a dot)."""
    return sorted(path for path in folder.rglob("*") if path.is_file())


class Proxies:
    """In-process proxies on one cassette folder, started one after another, each with its own report."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cassette_dir = folder / "cassettes"
        self.started: list[InProcessProxy] = []

    def start(self, *settings: str, **options: object) -> InProcessProxy:
        proxy = InProcessProxy(self.cassette_dir, self.folder / f"report{len(self.started)}.json")
        self.started.append(proxy)
        return proxy.start(*settings, **options)

    def record(self, upstream: LoopbackUpstream, body: dict, answer: dict, **options: object) -> Path:
        """Record `body` answered by `answer` through the upstream; the one cassette that wrote."""
        before = set(files_under(self.cassette_dir)) if self.cassette_dir.exists() else set()
        proxy = self.start(cassette_mode="record", cassette_hosts=["127.0.0.1"], **options)
        proxy.answer(proxy.request(chat_flow(body, upstream.url())), json_answer(answer))
        assert proxy.done()["counts"]["recorded"] == 1
        [path] = set(files_under(self.cassette_dir)) - before
        return path

    def close(self) -> None:
        for proxy in self.started:
            proxy.close()
