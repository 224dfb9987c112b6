"""WebSocket sessions in-process (mitmproxy's taddons/tflow): the hooks the addon runs for an upgrade, the seal's
one narrow exemption, what a recording saves and refuses to save, and the loopback server a replay is played by
(driven by a wsproto client, as mitmproxy drives it)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time

import pytest
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.files.session_file import Close, Session
from cassette_proxy.core.keys.recipe import Recipe, facts_of
from cassette_proxy.core.keys.url import public_url
from cassette_proxy.core.sessions.session_match import MatchSettings, SessionChoice, SessionScript
from cassette_proxy.core.sessions.session_turns import TurnChoice
from cassette_proxy.proxy.facts import request_facts
from cassette_proxy.proxy.state import Outcome, state_of
from cassette_proxy.proxy.websocket.session_server import HOLD_SECONDS, SessionPlay, SessionServer
from in_process import Addon
from mitmproxy import connection, http, websocket
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.proxy import server_hooks
from mitmproxy.test import taddons, tflow
from session_samples import client, realtime_frames, server, write_session
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import Opcode

KEY = "AIzaFAKE-gemini-DO-NOT-STORE-0123456789abc"
BEARER = "Bearer sk-fake-openai-DO-NOT-STORE-0123456789abcdef"


def upgrade(url: str = "https://api.openai.com/v1/realtime?model=gpt-realtime", **headers: str) -> http.HTTPFlow:
    flow = tflow.tflow()
    flow.request = http.Request.make(
        "GET",
        url,
        b"",
        {
            "upgrade": "websocket",
            "connection": "Upgrade",
            "sec-websocket-version": "13",
            "sec-websocket-key": "k",
            **headers,
        },
    )
    return flow


@pytest.fixture
def proxy(tmp_path):
    """The addon in mitmproxy's test context: `proxy.configure(**options)`, then `proxy.run(hook, flow)`."""
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:

        class Driver:
            root = tmp_path / "cassettes"

            def configure(self, **options) -> Addon:
                tctx.options.update(cassette_dir=str(self.root), **options)
                addon.configure(set(tctx.options.keys()))
                return addon

            def run(self, hook: str, flow) -> None:
                result = getattr(addon, hook)(flow)
                if asyncio.iscoroutine(result):
                    tctx.master.event_loop.run_until_complete(result)

        yield Driver()
        addon.sessions.server.stop()


def test_a_replayed_session_goes_to_the_loopback_server_which_alone_the_seal_lets_through(proxy):
    write_session(proxy.root, realtime_frames())
    addon = proxy.configure(cassette_mode="replay", cassette_hosts=["*"])
    flow = upgrade()
    proxy.run("request", flow)
    assert flow.response is None  # answered by the session server, not in the hook
    assert (flow.request.scheme, flow.request.host) == ("http", "127.0.0.1")
    assert flow.request.port == addon.sessions.server.port and flow.request.path.startswith(SessionServer.PREFIX)
    assert state_of(flow).outcome is Outcome.SESSION
    assert addon.seal.exempt == {("127.0.0.1", addon.sessions.server.port)}
    for host, port, refused in [
        ("127.0.0.1", addon.sessions.server.port, False),
        ("127.0.0.1", addon.sessions.server.port + 1, True),  # `cassette_hosts=*`: loopback is controlled too
        ("localhost", addon.sessions.server.port, True),
        ("api.openai.com", 443, True),
    ]:
        data = server_hooks.ServerConnectionHookData(
            server=connection.Server(address=(host, port)), client=tflow.tclient_conn()
        )
        addon.server_connect(data)
        assert bool(data.server.error) is refused, (host, port)


def test_a_session_ignore_path_that_can_never_match_stops_the_proxy_naming_the_option():
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx, pytest.raises(Exception, match="cassette_session_ignore"):
        tctx.configure(addon, cassette_session_ignore=["item..id"])


def test_a_plain_request_for_a_session_and_a_bare_101_are_refused_not_played(proxy):
    path = write_session(proxy.root, realtime_frames())
    proxy.configure(cassette_mode="replay")
    plain = tflow.tflow()
    plain.request = http.Request.make("GET", "https://api.openai.com/v1/realtime?model=gpt-realtime")
    proxy.run("request", plain)
    assert plain.response.status_code == 500 and b"not a WebSocket upgrade" in plain.response.content
    hollow = json.loads(path.read_text())
    del hollow["session"]
    path.write_text(json.dumps({**hollow, "cassette_format": 2}))
    flow = upgrade()
    proxy.run("request", flow)
    assert flow.response.status_code == 500 and b"without a recorded session" in flow.response.content


def test_an_upgrade_with_no_recording_misses_409_naming_what_changed(proxy):
    write_session(proxy.root, realtime_frames())
    addon = proxy.configure(cassette_mode="replay")
    flow = upgrade("https://api.openai.com/v1/realtime?model=gpt-realtime-mini")
    proxy.run("request", flow)
    assert flow.response.status_code == 409
    assert "query model" in json.loads(flow.response.content)["error"]["message"]
    assert len(addon.report.misses) == 1


def test_a_path_starting_with_two_slashes_keeps_its_first_segment():
    """google-genai's Live URL is `wss://host//ws/…BidiGenerateContent`: `ws` is part of the path, not a host."""
    request = upgrade("https://generativelanguage.googleapis.com/").request
    # As the request line has it: `make` would parse the URL, and mitmproxy 12 reads `//ws` there as `////ws`.
    request.path = "//ws/x.v1.GenerativeService.BidiGenerateContent?a=1"
    facts = request_facts(request, frozenset(), "generativelanguage.googleapis.com")
    assert facts.path == "//ws/x.v1.GenerativeService.BidiGenerateContent"
    assert facts_of({"method": "GET", "url": public_url(facts)}).path == facts.path  # as a stored request reads back


def recorded_flow(close_code: int = 1000, by_client: bool = True, frames=None, **upgrade_options) -> http.HTTPFlow:
    flow = upgrade(**upgrade_options)
    flow.response = http.Response.make(
        101, b"", {"upgrade": "websocket", "sec-websocket-accept": "x", "x-request-id": "r1"}
    )
    flow.response.timestamp_end = 1000.0
    flow.websocket = websocket.WebSocketData()
    for i, frame in enumerate(frames or realtime_frames()):
        flow.websocket.messages.append(
            websocket.WebSocketMessage(Opcode.TEXT, frame.from_client, frame.payload, 1000 + frame.ms / 1000 + i * 1e-6)
        )
    flow.websocket.close_code, flow.websocket.closed_by_client = close_code, by_client
    return flow


def record(proxy, flow, mode="record", before=None, **options) -> Addon:
    """Record `flow`'s session; `before(proxy)` runs once the addon is configured (a test's start, say)."""
    addon = proxy.configure(cassette_mode=mode, **options)
    if before is not None:
        before(proxy)
    addon.upstream.forward = lambda flow: None  # no probe, no timer: nothing is connected in-process
    websocket_data = flow.websocket
    flow.websocket, response, flow.response = None, flow.response, None
    proxy.run("request", flow)
    flow.response, flow.websocket = response, websocket_data
    proxy.run("response", flow)
    proxy.run("websocket_end", flow)
    addon.sessions.done()
    return addon


def test_a_recorded_session_is_saved_whole_without_its_credentials(proxy):
    flow = recorded_flow(
        url=f"https://generativelanguage.googleapis.com/ws/x.BidiGenerateContent?key={KEY}", authorization=BEARER
    )
    secret = "sk-" + "a1b2c3d4" * 4
    flow.websocket.messages[1].content = json.dumps(
        {"type": "session.update", "session": {"instructions": secret}}
    ).encode()
    addon = record(proxy, flow, cassette_hosts=["*"], cassette_record_statuses=["101", "2xx"])
    [saved] = proxy.root.rglob("*.json")
    text = saved.read_text()
    assert "DO-NOT-STORE" not in text and "key=" not in text and secret not in text
    cassette = load(saved, proxy.root)
    assert cassette["response"] == {"status": 101, "headers": {"x-request-id": "r1"}}
    frames = cassette["session"]["frames"]
    assert [f["from"] for f in frames] == ["server", "client", "server", "client", "server", "client", *["server"] * 4]
    assert frames[1]["match_digest"] and "[REDACTED" in frames[1]["json"]["session"]["instructions"]
    assert frames[6]["ms"] == 120  # offsets from the 101
    assert addon.report.recorded == 1 and addon.report.errors == []


def test_a_session_recorded_in_a_test_with_its_own_ignore_paths_names_them(proxy):
    """A test's own ignore paths (its start's options) key its session's messages: its cassette says so."""
    token = "control-token-for-tests-0123456789"

    def start_test(proxy) -> None:
        start = tflow.tflow()
        start.request = http.Request.make(
            "POST",
            "http://cassette.control/v1/test/start",
            json.dumps({"test": "t.py::test_one", "options": {"ignore": ["event_id"]}}),
            {"x-cassette-control-token": token, "content-type": "application/json"},
        )
        proxy.run("request", start)
        assert start.response is not None and start.response.status_code == 200, start.response

    addon = record(
        proxy, recorded_flow(), before=start_test, cassette_control_token=token, cassette_ignore=["metadata.a"]
    )
    [saved] = proxy.root.rglob("*.json")
    assert load(saved, proxy.root)["keyed_with"]["ignore"] == ["metadata.a", "event_id"]
    assert addon.report.recorded == 1


@pytest.mark.parametrize(
    ("code", "by_client", "why"),
    [
        (1006, True, "cut off before its close frame (close code 1006: the client dropped the connection"),
        (1006, False, "the upstream dropped the connection; the client's connection was dropped too"),
        (1011, False, "a server failure"),
    ],
)
def test_a_session_cut_off_or_failed_is_not_saved_and_the_report_says_why(proxy, code, by_client, why):
    addon = record(proxy, recorded_flow(code, by_client))
    assert list(proxy.root.rglob("*.json")) == []
    [error] = addon.report.errors
    assert error.kind == "session_incomplete" and why in error.message


def test_a_101_is_never_a_plain_cassette_whatever_the_record_statuses(proxy):
    flow = recorded_flow()
    flow.websocket = None  # mitmproxy relays no session (its `websocket` option off)
    addon = proxy.configure(cassette_mode="record", cassette_record_statuses=["101", "2xx"])
    addon.upstream.forward = lambda flow: None
    response, flow.response = flow.response, None
    proxy.run("request", flow)
    flow.response = response
    proxy.run("response", flow)
    assert list(proxy.root.rglob("*.json")) == []
    assert [e.kind for e in addon.report.errors] == ["not_a_websocket"]


def saved_answers(root) -> dict[str, str]:
    """Each saved session's file name → the assistant text it recorded."""
    return {
        path.name: "".join(f["json"].get("delta", "") for f in load(path)["session"]["frames"] if "json" in f)
        for path in sorted(root.rglob("*.json"))
    }


def test_record_mode_saves_each_new_conversation_to_one_url_beside_the_others_and_keeps_a_known_one(proxy):
    record(proxy, recorded_flow(frames=realtime_frames("Say hello", "Hi")))
    record(proxy, recorded_flow(frames=realtime_frames("Say goodbye", "Bye")))
    addon = record(proxy, recorded_flow(frames=realtime_frames("Say hello", "Hello again")))  # the same messages
    saved = saved_answers(proxy.root)
    first = next(name for name in saved if len(name) == len("0" * 32 + ".json"))
    key = first.removesuffix(".json")
    assert saved.pop(first) == "Hi "  # the first conversation keeps `<key>.json`: kept, never rewritten
    assert saved == {f"{key}.2.json": "Bye "}  # the next one numbered beside it
    report = addon.report  # one proxy: the three sessions in one report
    assert (report.recorded, report.overwritten, report.upstream, report.errors) == (2, 0, 3, [])


def test_update_mode_replaces_only_the_session_it_records_again(proxy):
    record(proxy, recorded_flow(frames=realtime_frames("Say hello", "Hi")))
    record(proxy, recorded_flow(frames=realtime_frames("Say goodbye", "Bye")))
    before = saved_answers(proxy.root)
    addon = record(proxy, recorded_flow(frames=realtime_frames("Say goodbye", "Farewell")), mode="update")
    after = saved_answers(proxy.root)
    assert after.keys() == before.keys() and sorted(after.values()) == ["Farewell ", "Hi "]
    assert (addon.report.recorded, addon.report.overwritten) == (2, 1)  # the two first, then the one replaced


def test_in_record_mode_an_upgrade_with_recorded_sessions_is_forwarded_to_be_recorded_if_new(proxy):
    write_session(proxy.root, realtime_frames())
    addon = proxy.configure(cassette_mode="record")
    addon.upstream.forward = lambda flow: None
    flow = upgrade()
    proxy.run("request", flow)
    state = state_of(flow)
    assert flow.request.host == "api.openai.com" and state.outcome != "session" and state.target is not None


def test_a_replayed_upgrade_is_played_from_every_session_recorded_for_its_url(proxy):
    write_session(proxy.root, realtime_frames("Say hello"))
    record(proxy, recorded_flow(frames=realtime_frames("Say goodbye", "Bye")))
    addon = proxy.configure(cassette_mode="replay")
    flow = upgrade()
    proxy.run("request", flow)
    [played] = addon.sessions.server.items.values()
    assert played.choice.candidates == 2
    assert "cassette run" not in played.hint and "--set cassette_mode=record" in played.hint  # started by hand


def test_a_session_still_open_when_the_proxy_stops_is_not_saved(proxy):
    flow = recorded_flow()
    addon = proxy.configure(cassette_mode="record")
    addon.upstream.forward = lambda flow: None
    websocket_data, response = flow.websocket, flow.response
    flow.websocket = flow.response = None
    proxy.run("request", flow)
    flow.response, flow.websocket = response, websocket_data
    proxy.run("response", flow)
    addon.done()
    assert list(proxy.root.rglob("*.json")) == []
    assert [e.kind for e in addon.report.errors] == ["session_incomplete"]
    assert "proxy stopped" in addon.report.errors[0].message


# -- the session server, driven as mitmproxy drives it ---------------------------------------------------------


class WsClient:
    """A wsproto client over asyncio streams: the side mitmproxy plays towards the session server."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.events: list = []

    @classmethod
    async def connect(cls, port: int, path: str, subprotocols=()) -> WsClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        ws = cls(reader, writer)
        writer.write(ws.ws.send(Request(host="api.openai.com", target=path, subprotocols=list(subprotocols))))
        return ws

    def send(self, event) -> None:
        self.writer.write(self.ws.send(event))

    async def next(self, timeout: float = 5):
        while not self.events:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            self.ws.receive_data(data or None)
            self.events.extend(self.ws.events())
            if not data and not self.events:
                raise ConnectionError("closed")
        return self.events.pop(0)


def play(frames, close=None, speed=None, subprotocol=None, ended=None) -> SessionPlay:
    session = Session(tuple(frames), close, ("event_id",))
    return SessionPlay(
        choice=SessionChoice([("api.openai.com/v1/realtime/k.json", SessionScript(session, MatchSettings()))]),
        shape="openai-realtime",
        headers=[(b"x-request-id", b"r1")],
        subprotocol=subprotocol,
        speed=speed,
        on_end=lambda p, outcome, details: (ended if ended is not None else []).append((outcome, details)),
    )


def run(coroutine):
    return asyncio.new_event_loop().run_until_complete(coroutine)


def test_the_server_plays_the_opening_then_answers_each_matching_message_and_pings():
    async def scenario():
        server = SessionServer()
        await server.start()
        ended = []
        frames = realtime_frames()
        path = server.register(play(frames, Close("server", 1000, "bye"), subprotocol="realtime", ended=ended))
        ws = await WsClient.connect(server.port, path, ["realtime", "openai-beta.realtime-v1"])
        accepted = await ws.next()
        assert isinstance(accepted, AcceptConnection) and accepted.subprotocol == "realtime"
        assert (b"x-request-id", b"r1") in accepted.extra_headers
        assert json.loads((await ws.next()).data)["type"] == "session.created"
        ws.send(Ping(b"p"))
        assert isinstance(await ws.next(), Pong)
        got = []
        for message in (json.loads(f.payload) for f in frames if f.from_client):
            ws.send(TextMessage(json.dumps({**message, "event_id": "other"})))
        while not isinstance(event := await ws.next(), CloseConnection):
            got.append(json.loads(event.data)["type"])
        assert got == [
            "session.updated",
            "conversation.item.created",
            "response.created",
            *["response.output_text.delta"] * 2,
            "response.done",
        ]
        assert (event.code, event.reason) == (1000, "bye")  # the recorded close, after the last message
        ws.send(event.response())
        await asyncio.sleep(0.05)
        assert ended == [("hit", None)]
        server.stop()

    run(scenario())


def test_a_changed_message_gets_the_error_event_and_close_4409():
    async def scenario():
        server = SessionServer()
        await server.start()
        ended = []
        frames = realtime_frames()
        path = server.register(play(frames, ended=ended))
        ws = await WsClient.connect(server.port, path)
        await ws.next(), await ws.next()  # accepted, session.created
        ws.send(
            TextMessage(
                json.dumps({"type": "session.update", "event_id": "e9", "session": {"instructions": "Be long."}})
            )
        )
        error = json.loads((await ws.next()).data)
        assert error["type"] == "error" and error["error"]["code"] == "cassette_miss"
        assert error["error"]["event_id"] == "e9"
        assert error["error"]["differences"] == ['session.instructions: "Be brief." → "Be long."']
        close = await ws.next()
        assert isinstance(close, CloseConnection) and close.code == 4409 and close.reason.startswith("cassette_miss")
        assert ended[0][0] == "miss" and ended[0][1]["message_number"] == 1
        server.stop()

    run(scenario())


def two_conversations() -> SessionChoice:
    """Two tests to one model, recorded: the same `session.update`, another user text (and other server ids)."""
    hello, goodbye = realtime_frames("Say hello", "Hi"), realtime_frames("Say goodbye", "Bye")
    goodbye[0] = server(3, {"type": "session.created", "event_id": "event_g", "session": {"id": "sess_g"}})
    return SessionChoice(
        [(name, SessionScript(Session(tuple(f), None, ("event_id",)), MatchSettings())) for name, f in [("hello.json", hello), ("goodbye.json", goodbye)]]
    )  # fmt: skip


def test_a_client_sending_back_to_back_gets_the_one_conversation_its_messages_match_whole():
    async def scenario():
        server_ = SessionServer()
        await server_.start()
        ended = []
        played = play([])
        played.choice, played.on_end = two_conversations(), lambda p, outcome, _: ended.append((outcome, p.cassette))
        ws = await WsClient.connect(server_.port, server_.register(played))
        await ws.next()  # accepted: the opening waits, since two sessions match as yet
        for message in (json.loads(f.payload) for f in realtime_frames("Say goodbye") if f.from_client):
            ws.send(TextMessage(json.dumps(message)))
        got = [json.loads((await ws.next()).data) for _ in range(6)]
        assert got[0]["event_id"] == "event_g"  # goodbye's own opening, not the first session's
        assert [g.get("delta") for g in got if "delta" in g] == ["Bye "]
        ws.send(CloseConnection(1000))
        await asyncio.sleep(0.05)
        assert ended == [("hit", "goodbye.json")]
        server_.stop()

    run(scenario())


def test_a_client_that_waits_for_an_answer_gets_the_first_sessions_then_its_own():
    async def scenario():
        server_ = SessionServer()
        await server_.start()
        played = play([])
        played.choice = two_conversations()
        began = time.monotonic()  # before the handshake, which starts the hold: the wait measured is never shorter
        ws = await WsClient.connect(server_.port, server_.register(played))
        await ws.next()
        assert json.loads((await ws.next()).data)["event_id"] == "event_1"  # quiet: the first session's opening
        assert time.monotonic() - began >= HOLD_SECONDS * 0.9
        first, second, third = (json.loads(f.payload) for f in realtime_frames("Say goodbye") if f.from_client)
        ws.send(TextMessage(json.dumps(first)))
        assert json.loads((await ws.next()).data)["type"] == "session.updated"
        ws.send(TextMessage(json.dumps(second)))
        ws.send(TextMessage(json.dumps(third)))
        got = [json.loads((await ws.next()).data) for _ in range(4)]
        assert [g.get("delta") for g in got if "delta" in g] == ["Bye "]
        server_.stop()

    run(scenario())


def test_recorded_timing_keeps_the_gaps_and_binary_frames_stay_binary():
    frames = [client(0, {"setup": {}}), server(300, {"setupComplete": {}}, binary=True), server(500, {"x": 1})]

    async def scenario():
        server_ = SessionServer()
        await server_.start()
        path = server_.register(play(frames, speed=2.0))
        ws = await WsClient.connect(server_.port, path)
        await ws.next()
        began = time.monotonic()
        ws.send(TextMessage(json.dumps({"setup": {}})))
        first = await ws.next()
        at_first = time.monotonic() - began
        second = await ws.next()
        at_second = time.monotonic() - began
        assert isinstance(first, BytesMessage) and json.loads(first.data) == {"setupComplete": {}}
        assert isinstance(second, TextMessage)
        assert at_first >= 0.15 and at_second >= 0.25  # 300 ms and 500 ms after the message, at twice the speed
        server_.stop()

    run(scenario())


def test_an_unregistered_path_is_refused_and_a_session_is_served_once():
    async def scenario():
        server = SessionServer()
        await server.start()
        path = server.register(play(realtime_frames()))
        stranger = await WsClient.connect(server.port, SessionServer.PREFIX + "0" * 32)
        assert isinstance(await stranger.next(), RejectConnection)
        first = await WsClient.connect(server.port, path)
        assert isinstance(await first.next(), AcceptConnection)
        again = await WsClient.connect(server.port, path)
        assert isinstance(await again.next(), RejectConnection)
        server.stop()

    run(scenario())


def responses_frames(texts: list[str], ids: list[str], cache_key: str) -> list:
    """An openai-agents connection to the Responses WebSocket mode: one `response.create` per text, each continuing
    the previous answer, answered up to `response.completed`."""
    frames, ms, previous = [], 0, None
    for text, response_id in zip(texts, ids, strict=True):
        create = {"type": "response.create", "model": "gpt-4.1", "input": [{"role": "user", "content": text}],
                  "prompt_cache_key": cache_key, "stream": True}  # fmt: skip
        if previous:
            create["previous_response_id"] = previous
        response = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
        frames += [
            client(ms, create),
            server(ms + 2, {"type": "response.created", "response": response}),
            server(ms + 3, {"type": "response.output_text.delta", "delta": f"Echo: {text}"}),
            server(ms + 4, {"type": "response.completed", "response": {**response, "status": "completed"}}),
        ]
        ms, previous = ms + 10, response_id
    return frames


def test_a_responses_websocket_connection_is_saved_turn_by_turn_and_a_known_turn_is_kept(proxy):
    url = "https://api.openai.com/v1/responses"
    run = "agents-sdk:run:" + "a" * 32
    flow = recorded_flow(frames=responses_frames(["Hi", "More"], ["resp_live1", "resp_live2"], run), url=url,
                         authorization=BEARER)  # fmt: skip
    addon = record(proxy, flow)
    saved = sorted(proxy.root.rglob("*.json"))
    assert len(saved) == 2 and all("DO-NOT-STORE" not in p.read_text() for p in saved)
    turns = {load(p)["turn"]["number"]: load(p) for p in saved}
    assert turns[1]["request"]["method"] == "POST" and turns[1]["request"]["url"] == url
    assert [f["from"] for f in turns[2]["session"]["frames"]] == ["client", "server", "server", "server"]
    assert turns[2]["session"]["frames"][0]["ms"] == 0  # timed from the turn's own request
    # The continued response's id, made up on every live run, is keyed as the turn it continues.
    assert turns[2]["request"]["body"]["previous_response_id"] == "cassette-turn:" + turns[1]["key"]
    assert (addon.report.recorded, addon.report.errors) == (2, [])

    other_run = "agents-sdk:run:" + "b" * 32  # a new Runner.run(): the preset keys it alike
    flow = recorded_flow(frames=responses_frames(["Hi", "Less"], ["resp_live3", "resp_live4"], other_run), url=url)
    before = {p: p.read_bytes() for p in saved}
    addon = record(proxy, flow)
    assert all(p.read_bytes() == data for p, data in before.items())  # the known first turn is kept as it was
    assert len(list(proxy.root.rglob("*.json"))) == 3 and addon.report.recorded == 2 + 1  # one report: both runs

    addon = proxy.configure(cassette_mode="replay")
    replayed = upgrade(url)
    proxy.run("request", replayed)
    assert state_of(replayed).outcome is Outcome.SESSION and replayed.request.host == "127.0.0.1"  # played turn by turn


# -- record mode on a Responses WebSocket connection: recorded turns replayed, new ones live -----------------------

RESPONSES_URL = "https://api.openai.com/v1/responses"
LIVE_IDS = itertools.count(1)
"""The fake upstream's response ids: new on every answer, as the provider's."""


def create_message(*texts: str, previous: str | None = None) -> dict:
    """openai-agents' `response.create`: its input the conversation so far (user texts, the echoed answers)."""
    items = []
    for i, text in enumerate(texts):
        if i:
            items.append({"role": "assistant", "content": f"Echo: {texts[i - 1]}"})
        items.append({"role": "user", "content": text})
    message = {"type": "response.create", "model": "gpt-4.1", "input": items, "stream": True}
    return message | ({"previous_response_id": previous} if previous else {})


class LiveConnection:
    """A Responses WebSocket connection forwarded in record mode, driven as mitmproxy drives it: each message
    appended to the flow and its websocket_message hook run; an injected message appended (and hooked) as
    mitmproxy's `inject.websocket` does; a client message not dropped reaches a fake upstream that answers it."""

    def __init__(self, proxy, mode: str = "record") -> None:
        self.proxy = proxy
        self.addon = proxy.configure(cassette_mode=mode)
        self.addon.upstream.forward = lambda flow: None
        self.flow = upgrade(RESPONSES_URL, authorization=BEARER)
        proxy.run("request", self.flow)
        self.flow.response = http.Response.make(101, b"", {"upgrade": "websocket"})
        self.flow.response.timestamp_end = time.time()
        self.flow.websocket = websocket.WebSocketData()
        proxy.run("response", self.flow)
        self.upstream: list[dict] = []
        """The client messages the upstream got."""
        self.client: list[dict] = []
        """What the client got, in order."""
        self.queued: list[tuple[bytes, bool]] = []
        self.addon.sessions.inject = lambda flow, payload, is_text: self.queued.append((payload, is_text))
        self.ids = (f"resp_live{n}" for n in LIVE_IDS)

    def _arrive(self, from_client: bool, payload: bytes, injected: bool = False) -> websocket.WebSocketMessage:
        message = websocket.WebSocketMessage(Opcode.TEXT, from_client, payload, injected=injected)
        self.flow.websocket.messages.append(message)
        self.proxy.run("websocket_message", self.flow)
        return message

    def send(self, create: dict) -> None:
        message = self._arrive(True, json.dumps(create).encode())
        while self.queued:  # mitmproxy handles what was injected once the hook returned, in order
            payload, _ = self.queued.pop(0)
            self.client.append(json.loads(self._arrive(False, payload, injected=True).content))
        if message.dropped:
            return
        self.upstream.append(create)
        response = {"id": next(self.ids), "object": "response", "status": "in_progress", "output": []}
        text = "Echo: " + create["input"][-1]["content"]
        for event in [
            {"type": "response.created", "response": response},
            {"type": "response.output_text.delta", "delta": text},
            {"type": "response.completed", "response": {**response, "status": "completed"}},
        ]:
            self.client.append(json.loads(self._arrive(False, json.dumps(event).encode()).content))

    def answers(self) -> list[str]:
        return [e["delta"] for e in self.client if e["type"] == "response.output_text.delta"]

    def last_id(self) -> str:
        return next(e["response"]["id"] for e in reversed(self.client) if e["type"] == "response.completed")

    def close(self):
        self.flow.websocket.close_code, self.flow.websocket.closed_by_client = 1000, True
        self.proxy.run("websocket_end", self.flow)
        return self.addon.report


def turn_files(root) -> dict[str, dict]:
    """Each saved turn's cassette by the last user text of its request."""
    return {load(p)["request"]["body"]["input"][-1]["content"]: load(p) for p in sorted(root.rglob("*.json"))}


def test_record_mode_answers_a_recorded_turn_from_its_recording_and_sends_only_the_new_one_live(proxy):
    first = LiveConnection(proxy)
    first.send(create_message("Hi"))
    first.close()
    recorded = turn_files(proxy.root)["Hi"]
    before = {p: p.read_bytes() for p in proxy.root.rglob("*.json")}

    again = LiveConnection(proxy)
    again.send(create_message("Hi"))
    again.send(create_message("Hi", "More"))
    report = again.close()
    assert again.upstream == [create_message("Hi", "More")]  # the recorded turn never reached the upstream
    assert again.answers() == ["Echo: Hi", "Echo: More"]
    # The client got the recorded events of turn 1 (its recorded id), in order, then turn 2's live ones.
    replayed = [f["json"] for f in recorded["session"]["frames"][1:]]
    assert again.client[:3] == replayed and again.client[0]["response"]["id"] == first.last_id()
    assert again.client[3]["response"]["id"] not in (first.last_id(), None)
    saved = turn_files(proxy.root)
    assert saved.keys() == {"Hi", "More"} and saved["More"]["turn"]["number"] == 2  # its number on its connection
    assert [f["from"] for f in saved["More"]["session"]["frames"]] == ["client", "server", "server", "server"]
    assert all(p.read_bytes() == data for p, data in before.items())  # the replayed turn's file untouched
    assert (report.hits, report.recorded, len(report.misses), report.errors) == (1, 2, 0, [])


def test_a_live_continuation_of_a_replayed_response_is_a_miss_never_sent(proxy):
    first = LiveConnection(proxy)
    first.send(create_message("Hi"))
    first.close()
    again = LiveConnection(proxy)
    again.send(create_message("Hi"))
    replayed_id = again.last_id()
    again.send(create_message("More", previous=replayed_id))
    again.send(create_message("Hi", "Again"))  # after the miss: neither sent nor answered from a recording
    report = again.close()
    assert again.upstream == []
    error, later = (e for e in again.client if e["type"] == "error")
    assert error["status"] == 409 and error["error"]["code"] == "cassette_miss"
    assert f"continues response {replayed_id}" in error["error"]["message"]
    assert "--set cassette_mode=update" in error["error"]["message"]
    assert "missed at turn 2" in later["error"]["message"]
    assert len(list(proxy.root.rglob("*.json"))) == 1
    [miss] = report.misses
    assert miss["method"] == "POST" and miss["session"]["message_number"] == 2
    assert (report.hits, report.recorded, report.errors) == (1, 1, [])


def test_update_mode_sends_every_turn_live_and_replaces_the_recorded_ones(proxy):
    first = LiveConnection(proxy)
    first.send(create_message("Hi"))
    first.close()
    again = LiveConnection(proxy, mode="update")
    again.send(create_message("Hi"))
    again.send(create_message("More", previous=again.last_id()))  # continues a live answer: sent
    report = again.close()
    assert len(again.upstream) == 2 and report.hits == 0
    saved = turn_files(proxy.root)
    assert saved["Hi"]["session"]["frames"][1]["json"]["response"]["id"] == again.client[0]["response"]["id"]
    assert again.client[0]["response"]["id"] != first.last_id()  # update: answered live, its own new id saved
    assert saved["More"]["request"]["body"]["previous_response_id"] == "cassette-turn:" + saved["Hi"]["key"]
    assert (report.recorded, report.overwritten) == (2, 1)


def test_the_session_server_reads_a_turns_recording_off_the_event_loop_and_answers_turns_in_order():
    """A Responses WebSocket turn's lookup reads its cassette file: in a worker thread, the loop never blocked,
    and each turn's events still follow its own `response.create`."""
    frames = responses_frames(["Hi", "More"], ["resp_a", "resp_b"], "agents-sdk:run:" + "c" * 32)
    recordings = {json.loads(frames[i].payload)["input"][0]["content"]: frames[i : i + 4] for i in (0, 4)}
    threads = []
    in_order = iter(recordings)

    def lookup(key: str):
        threads.append(threading.current_thread())
        text = next(in_order)
        return f"api.openai.com/v1/responses/{text}.json", Session(tuple(recordings[text]), None, ())

    upgrade_request = {"url": RESPONSES_URL, "headers": {}}

    async def scenario():
        server_ = SessionServer()
        await server_.start()
        given: dict[str, str] = {}
        choice = TurnChoice(upgrade_request, Recipe(), lookup, lambda *a: ("", "missed", []), given)
        played = play([])
        played.choice = choice
        ws = await WsClient.connect(server_.port, server_.register(played))
        await ws.next()  # accepted
        for text in recordings:
            ws.send(TextMessage(recordings[text][0].payload.decode()))
        got = [json.loads((await ws.next()).data) for _ in range(6)]
        assert [g["type"] for g in got] == ["response.created", "response.output_text.delta", "response.completed"] * 2
        assert [g["delta"] for g in got if "delta" in g] == ["Echo: Hi", "Echo: More"]
        assert choice.played == ["api.openai.com/v1/responses/Hi.json", "api.openai.com/v1/responses/More.json"]
        server_.stop()

    run(scenario())
    assert len(threads) == 2 and threading.main_thread() not in threads


def test_a_side_that_drops_its_connection_is_relayed_as_a_drop_any_other_close_as_it_came(proxy):
    """mitmproxy relays a lost connection as the close wsproto reads for it (1006), which wsproto sends as 1000:
    with the addon loaded, nothing is sent for it, and the connection closing after it is a drop to that side."""
    from cassette_proxy.proxy.websocket import ws_drop
    from mitmproxy.proxy.layers.websocket import WebsocketConnection

    proxy.configure()
    assert ws_drop.installed()
    client_side = tflow.tclient_conn()
    dropped = WebsocketConnection(ConnectionType.SERVER, conn=client_side).send2(CloseConnection(1006))
    assert dropped.connection is client_side and dropped.data == b""
    closed = WebsocketConnection(ConnectionType.SERVER, conn=client_side).send2(CloseConnection(1011, "failed"))
    assert closed.data[:4] == b"\x88\x08\x03\xf3"  # a close frame: code 1011, as the upstream sent it
