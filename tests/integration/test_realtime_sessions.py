"""Realtime sessions over WebSocket, end to end: real clients (the openai SDK, `websockets`, google-genai, the openai
npm SDK), a real mitmdump with the addon, and a fake realtime upstream of our own (OpenAI Realtime and Gemini
Live shapes, ws and wss) that is stopped before every replay.

Each test records once, then replays with the upstream gone: the server's events are the recorded ones (its
ids are random, so a live answer would differ), a changed client message is a miss the client is told about
(the API's own error shape, a 4409 close) and the report counts, and no API key reaches the disk.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from harness import ROOT, SUPPORT, FakeUpstream, Proxy

CLIENT = SUPPORT / "realtime_client.py"
NODE_SESSION = ROOT / "tests" / "node" / "realtime" / "session.mjs"
SECRET_MARK = "DO-NOT-STORE"
"""Part of every fake API key the clients send (realtime_client.py, session.mjs)."""


@pytest.fixture
def realtime_upstream(tmp_path, upstream_certificate):
    """The fake realtime APIs over wss (its certificate trusted by mitmproxy through ssl_verify_upstream_trusted_ca)."""
    fake = FakeUpstream(tmp_path / "realtime-upstream", upstream_certificate, script=SUPPORT / "fake_realtime.py")
    yield fake.start()
    fake.stop()


def run_client(env: dict[str, str], *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(CLIENT), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=int(os.environ.get("RT_TIMEOUT", "120")),
    )
    assert done.returncode == 0 and done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout)


def session(proxy: Proxy, *args: str) -> dict:
    """One conversation through `proxy` as a user's shell points clients at it: HTTPS_PROXY and a CA bundle."""
    return run_client(proxy.client_env(), *args)


def assert_no_secret_on_disk(*places: Path) -> None:
    for place in places:
        for path in [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]:
            assert SECRET_MARK.encode() not in path.read_bytes(), f"an API key reached {path}"


def answer_text(events: list[dict]) -> str:
    return "".join(e.get("delta", "") for e in events if e["type"] == "response.output_text.delta")


def test_openai_sdk_session_records_once_and_replays_offline_through_the_forward_proxy(
    start_proxy, realtime_upstream, cassette_dir
):
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    recorded = session(recorder, "openai", "Say hello", "--event-ids", "evt_rec")
    cut = session(recorder, "openai", "Please drop the line", "--model", "gpt-realtime-cut")
    report = recorder.stop()
    assert recorded["closed"] is None and recorded["events"][-1]["type"] == "response.done"
    assert answer_text(recorded["events"]) == "Echo: Say hello "
    # The upstream dropped the connection without a close frame: so is the client's (ws_drop.py), never a 1000.
    assert "response.done" not in [e["type"] for e in cut["events"]]
    assert report["counts"]["recorded"] == 1 and report["counts"]["upstream"] == 2
    assert [e["type"] for e in report["errors"]] == ["session_incomplete"]  # the cut session: an error, no cassette
    assert "gpt-realtime-cut" in report["errors"][0]["url"]
    assert cut["closed"] == {"code": None, "reason": ""}  # the SDK raised ConnectionClosedError: no close frame
    assert "close code 1006" in report["errors"][0]["message"]
    assert "the client's connection was dropped too" in report["errors"][0]["message"]
    [saved] = cassette_dir.rglob("*.json")
    assert saved.parent == cassette_dir / "api.openai.com" / "v1" / "realtime"
    assert json.loads(saved.read_text())["session"]["close"] == {"by": "client", "code": 1000, "reason": ""}
    assert realtime_upstream.stats()["keys"] == ["Bearer sk-fake-openai-DO-NOT-STORE-0123456789abcdef"] * 2
    realtime_upstream.stop()

    player = start_proxy(realtime_upstream, cassette_mode="replay", flow_detail=0)
    first = session(player, "openai", "Say hello", "--event-ids", "evt_one")
    second = session(player, "openai", "Say hello", "--event-ids", "evt_two")
    changed = session(player, "openai", "Say goodbye")
    report = player.stop()
    assert first == second == recorded  # the recorded server events, their random ids included
    error = next(e for e in changed["events"] if e["type"] == "error")["error"]
    assert error["code"] == error["type"] == "cassette_miss"
    assert 'item.content[0].text: "Say hello" → "Say goodbye"' in error["message"]
    assert error["cassette"] == saved.relative_to(cassette_dir).as_posix()
    assert changed["closed"]["code"] == 4409 and changed["closed"]["reason"].startswith("cassette_miss")
    assert report["counts"] | {"hits": 2, "misses": 1, "upstream": 0, "errors": 0} == report["counts"]
    [miss] = report["misses"]
    assert miss["session"]["differences"] == ['item.content[0].text: "Say hello" → "Say goodbye"']
    assert_no_secret_on_disk(cassette_dir, recorder.log, player.log, recorder.report_path, player.report_path)


def test_two_conversations_to_one_model_url_record_in_one_run_and_replay_offline_in_either_order(
    start_proxy, realtime_upstream, cassette_dir
):
    """Two tests to one model (the same `session.update`, another user text): both recorded in one record run,
    each replayed with its own answer whatever the order; a third conversation misses with the nearest's diff."""
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    hello = session(recorder, "openai", "Say hello")
    goodbye = session(recorder, "openai", "Say goodbye")
    session(recorder, "openai", "Say hello")  # recorded already: run live (its ids are new), the recording kept
    report = recorder.stop()
    assert report["counts"] | {"recorded": 2, "overwritten": 0, "upstream": 3, "misses": 0} == report["counts"]
    assert len(list(cassette_dir.rglob("*.json"))) == 2
    realtime_upstream.stop()

    player = start_proxy(realtime_upstream, cassette_mode="replay", flow_detail=0)
    # Each gets its own recording's answer, its random ids included (hello's: the first recording, never rewritten).
    # The messages before the one that tells them apart (`session.update`) are in both: under load the SDK's next
    # message may come after the 0.2 s hold, and those get the first recording's answer (tests/addon pins the hold).
    for text, recorded in [("Say goodbye", goodbye), ("Say hello", hello)]:
        replayed = session(player, "openai", text)
        assert replayed["events"][-1] == recorded["events"][-1] and replayed["events"][-1]["type"] == "response.done"
        assert answer_text(replayed["events"]) == answer_text(recorded["events"]) == f"Echo: {text} "
    changed = session(player, "openai", "Say hi")
    report = player.stop()
    assert report["counts"] | {"hits": 2, "misses": 1, "upstream": 0} == report["counts"]
    error = next(e for e in changed["events"] if e["type"] == "error")["error"]
    assert "the nearest of the 2 sessions recorded for this URL" in error["message"]
    assert error["differences"] == ['item.content[0].text: "Say hello" → "Say hi"']


def agents(proxy: Proxy, *args: str) -> dict:
    """openai-agents with its websocket transport (`responses_websocket_session`) through `proxy`."""
    return run_client({**proxy.client_env(), "OPENAI_AGENTS_DISABLE_TRACING": "1"}, "agents", *args)


def upstream_turns(upstream) -> int:
    """The `response.create` messages (and any other client message) the fake upstream received so far."""
    return upstream.stats()["messages"]


def test_openai_agents_over_the_responses_websocket_record_and_replay_turn_by_turn(
    start_proxy, realtime_upstream, cassette_dir
):
    """Every agent opens `wss://api.openai.com/v1/responses`: each `response.create` is a turn with its own
    cassette, keyed like its `POST /v1/responses` twin. Two agents recorded in one run replay in either order; in
    record mode a recorded turn is answered from its cassette and only a new follow-up reaches the upstream (the
    fake upstream counts the turns it got); a follow-up continuing a replayed response's id misses there, never
    sent, and update mode records it anew; a changed prompt in one turn misses with the diff of the nearest turn."""
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    hello, goodbye = agents(recorder, "Say hello"), agents(recorder, "Say goodbye")
    report = recorder.stop()
    assert (hello["answers"], goodbye["answers"]) == (["Echo: Say hello"], ["Echo: Say goodbye"])
    assert report["counts"] | {"recorded": 2, "misses": 0} == report["counts"], report["errors"]
    turns = sorted(cassette_dir.rglob("*.json"))
    assert len(turns) == 2 and all("api.openai.com/v1/responses/" in p.as_posix() for p in turns)
    recorded = json.loads(turns[0].read_text())
    assert recorded["request"]["method"] == "POST" and recorded["turn"]["over"] == "websocket"
    assert_no_secret_on_disk(cassette_dir)

    kept = {path: path.read_bytes() for path in turns}
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    before = upstream_turns(realtime_upstream)
    # A new follow-up sending the conversation so far: its first turn is recorded already.
    followed = agents(recorder, "Say hello", "--follow-up", "Say more", "--history")
    report = recorder.stop()
    assert followed["answers"] == ["Echo: Say hello", "Echo: Say more"]
    assert report["counts"] | {"hits": 1, "recorded": 1, "misses": 0} == report["counts"], report["errors"]
    assert len(list(cassette_dir.rglob("*.json"))) == 3
    assert all(path.read_bytes() == data for path, data in kept.items())  # the recorded turns are not rewritten
    # Only the new turn reached the upstream: the recorded one was answered from its cassette.
    assert upstream_turns(realtime_upstream) - before == 1

    # A follow-up continuing the replayed answer by its id cannot go live (the provider never made that id): a
    # miss, nothing sent; update mode records the conversation anew, every turn live.
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    before = upstream_turns(realtime_upstream)
    continued = agents(recorder, "Say goodbye", "--follow-up", "Say more")
    report = recorder.stop()
    assert continued["answers"] == ["Echo: Say goodbye"]
    assert "cassette_miss" in continued["error"] and "continues response" in continued["error"], continued
    assert report["counts"] | {"hits": 1, "recorded": 0, "misses": 1} == report["counts"], report["errors"]
    assert upstream_turns(realtime_upstream) - before == 0
    updater = start_proxy(realtime_upstream, cassette_mode="update", flow_detail=0)
    updated = agents(updater, "Say goodbye", "--follow-up", "Say more")
    report = updater.stop()
    assert updated["answers"] == ["Echo: Say goodbye", "Echo: Say more"]
    assert report["counts"] | {"hits": 0, "recorded": 1, "overwritten": 1} == report["counts"], report["errors"]
    assert upstream_turns(realtime_upstream) - before == 2
    assert len(list(cassette_dir.rglob("*.json"))) == 4
    realtime_upstream.stop()

    player = start_proxy(realtime_upstream, cassette_mode="replay", flow_detail=0)
    assert agents(player, "Say goodbye")["answers"] == goodbye["answers"]
    assert agents(player, "Say hello", "--follow-up", "Say more", "--history")["answers"] == followed["answers"]
    assert agents(player, "Say goodbye", "--follow-up", "Say more")["answers"] == updated["answers"]
    assert agents(player, "Say hello")["answers"] == hello["answers"]
    changed = agents(player, "Say goodbye", "--follow-up", "Say less")
    report = player.stop()
    assert changed["answers"] == ["Echo: Say goodbye"]
    assert "cassette_miss" in changed["error"] and '"Say more" → "Say less"' in changed["error"], changed
    assert report["counts"] | {"hits": 7, "misses": 1, "upstream": 0} == report["counts"]
    assert len(list(cassette_dir.rglob("*.json"))) == 4


def test_gemini_live_sessions_replay_binary_frames_and_never_store_the_api_key(
    start_proxy, realtime_upstream, cassette_dir
):
    recorder = start_proxy(realtime_upstream, cassette_mode="record", flow_detail=0)
    tool_call = session(recorder, "gemini", "What is the weather in Paris?")  # `?key=` in the URL
    genai = session(recorder, "genai", "Say hello")  # google-genai: `x-goog-api-key`
    report = recorder.stop()
    assert report["counts"]["recorded"] == 2, report["errors"]
    assert [next(iter(m)) for m in tool_call["events"]] == [
        "setupComplete",
        "toolCall",
        "serverContent",
        "serverContent",
    ]
    assert all(tool_call["binary"])  # Gemini answers in binary frames holding JSON
    assert realtime_upstream.stats()["keys"] == ["AIzaFAKE-gemini-DO-NOT-STORE-0123456789abc"] * 2
    sidecars = list(cassette_dir.rglob("*.bin"))
    assert len(sidecars) == 1  # google-genai's session has audio; its base64 lives beside the cassette
    audio = next(p["inline_data"]["data"] for e in genai["events"] for p in e["server_content"].get("model_turn", {}).get("parts", []) if "inline_data" in p)  # fmt: skip
    assert all(audio[:64] not in p.read_text() for p in cassette_dir.rglob("*.json"))
    realtime_upstream.stop()

    player = start_proxy(realtime_upstream, cassette_mode="replay", flow_detail=0)
    assert session(player, "gemini", "What is the weather in Paris?") == tool_call  # `bytes`: each frame's digest
    assert session(player, "genai", "Say hello") == genai
    missed = session(player, "genai", "Say goodbye")
    report = player.stop()
    assert (
        missed["closed"]["code"] == 409 and "cassette_miss" in missed["closed"]["reason"]
    )  # google-genai's ClientError
    assert 'parts[0].text: "Say hello" → "Say goodbye"' in missed["closed"]["reason"]
    assert report["counts"] | {"hits": 2, "misses": 1, "upstream": 0} == report["counts"]
    assert_no_secret_on_disk(cassette_dir, recorder.log, player.log, recorder.report_path, player.report_path)
    for cassette_file in cassette_dir.rglob("*.json"):
        assert "key=" not in json.loads(cassette_file.read_text())["request"]["url"]


def test_google_genai_live_recorded_forward_replays_through_a_reverse_route(tmp_path, realtime_upstream):
    """google-genai's Live URL is `//ws/…` through HTTPS_PROXY and `/ws/…` from GOOGLE_GEMINI_BASE_URL: one key."""
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(realtime_upstream)}
    command = ["sh", "-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(CLIENT))} genai 'Say hello' > out.txt"]
    recorded = cassette("run", "--mode", "record", "--strict", "--", *command, cwd=tmp_path, env=env)
    assert recorded.returncode == 0 and "1 recorded" in recorded.stderr, recorded.stderr
    forward = json.loads((tmp_path / "out.txt").read_text())
    realtime_upstream.stop()

    reverse = ("--reverse", "gemini=https://generativelanguage.googleapis.com")
    replayed = cassette("run", "--strict", *reverse, "--", *command, cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "1 hits, 0 misses" in replayed.stderr and "routes: forward 0, gemini 1" in replayed.stderr
    assert json.loads((tmp_path / "out.txt").read_text()) == forward


SUITE = (
    "{python} {client} openai 'What is the weather?' --model gpt-realtime-mini && node {node} {text!r}"
    " && {python} {client} gemini 'Say hello'"
)
"""A suite with three realtime tests: the Python SDK over ws:// and the npm SDK over wss://, both at
OPENAI_BASE_URL, and `websockets` over wss:// to Gemini Live through HTTPS_PROXY with the run's CA bundle."""


def suite(text: str) -> list[str]:
    command = SUITE.format(
        python=shlex.quote(sys.executable), client=shlex.quote(str(CLIENT)), node=NODE_SESSION, text=text
    )
    return ["sh", "-c", f"({command}) > out.txt"]


def test_reverse_route_sessions_replay_under_cassette_run_and_a_miss_fails_strict(tmp_path, realtime_upstream):
    """`--reverse openai=…` gives OPENAI_BASE_URL: the Python SDK makes it ws://, the npm SDK wss://; the forward
    route (`HTTPS_PROXY`, the CA bundle `cassette run` wires) carries Gemini Live. All three replay."""
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(realtime_upstream)}
    reverse = ("--reverse", "openai=https://api.openai.com")
    recorded = cassette(
        "run", "--mode", "record", "--strict", *reverse, "--", *suite("Say hello"), cwd=tmp_path, env=env
    )
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "3 recorded" in recorded.stderr and "routes: forward 1, openai 2" in recorded.stderr
    python_run, node_run, gemini_run = (json.loads(line) for line in (tmp_path / "out.txt").read_text().splitlines())
    assert gemini_run["closed"] is None and all(gemini_run["binary"])
    assert any(e["type"] == "response.function_call_arguments.done" for e in python_run["events"])
    assert node_run["closed"]["code"] == 1000
    realtime_upstream.stop()

    replayed = cassette("run", "--strict", *reverse, "--", *suite("Say hello"), cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "3 hits, 0 misses, 0 recorded, 0 upstream" in replayed.stderr
    replayed_runs = [json.loads(line) for line in (tmp_path / "out.txt").read_text().splitlines()]
    assert replayed_runs == [python_run, node_run, gemini_run]

    missed = cassette("run", "--strict", *reverse, "--", *suite("Say goodbye"), cwd=tmp_path, env=env)
    assert missed.returncode != 0  # the suite swallowed the error event; --strict does not
    assert (
        "2 hits, 1 misses" in missed.stderr and "cassette: miss GET https://api.openai.com/v1/realtime" in missed.stderr
    )
    node_missed = json.loads((tmp_path / "out.txt").read_text().splitlines()[1])
    assert node_missed["closed"]["code"] == 4409
    assert [e["type"] for e in node_missed["events"]][-1] == "error"
    assert_no_secret_on_disk(tmp_path / "cassettes")
