"""In-process tests of what the proxy keeps of a test's requests for the plugin's `vcr` fixture (proxy/played.py):
asked for at the test's start, answered over the control channel, credentials dropped and redacted as on disk."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from in_process import chat_flow, json_answer

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

TOKEN = "control-token-for-tests-0123456789"
SECRET = "sk-proj-" + "A1b2C3d4E5f6" * 4
ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}


def start(proxies, mode: str):
    return proxies.start(cassette_mode=mode, cassette_hosts=["127.0.0.1"], cassette_control_token=TOKEN)


def test_a_recorded_request_comes_back_as_sent_less_its_credentials(proxies, upstream):
    proxy = start(proxies, "record")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_a", "played": True})
    sent = json.dumps({**ASK, "note": f"key {SECRET}"}).encode()
    flow = chat_flow(sent, upstream.url(), {"authorization": f"Bearer {SECRET}", "X-Trace": "one"})
    proxy.answer(proxy.request(flow), json_answer({"answer": "hi"}))

    [interaction] = proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_a"})["interactions"]
    assert interaction["outcome"] == "recorded"
    assert json.loads(Path(interaction["cassette"]).read_text())["response"]["body"] == {"answer": "hi"}
    request = interaction["request"]
    assert request["method"] == "POST" and request["uri"] == upstream.url()
    assert request["headers"]["X-Trace"] == "one" and "authorization" not in {h.lower() for h in request["headers"]}
    body = base64.b64decode(request["body_base64"])
    assert json.loads(body)["messages"] == ASK["messages"]
    assert SECRET not in body.decode() and SECRET not in json.dumps(interaction)  # redacted as on disk


def test_replayed_requests_name_the_cassette_each_time_it_answers(proxies, upstream):
    proxies.record(upstream, ASK, {"answer": "hi"})
    proxy = start(proxies, "replay")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_b", "played": True})
    for _ in range(2):
        assert proxy.request(chat_flow(ASK, upstream.url())).response.status_code == 200
    proxy.request(chat_flow({**ASK, "model": "other"}, upstream.url()))  # a miss is no recording of the test
    interactions = proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_b"})["interactions"]
    assert [i["outcome"] for i in interactions] == ["hit", "hit"]
    assert interactions[0]["cassette"] == interactions[1]["cassette"]
    assert base64.b64decode(interactions[0]["request"]["body_base64"]) == json.dumps(ASK).encode()  # the bytes sent


def test_the_next_test_starts_empty_and_a_test_that_did_not_ask_keeps_nothing(proxies, upstream):
    proxies.record(upstream, ASK, {"answer": "hi"})
    proxy = start(proxies, "replay")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_c", "played": True})
    proxy.request(chat_flow(ASK, upstream.url()))
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_d", "played": True})
    assert proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_d"})["interactions"] == []
    stale = proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_c"})
    assert stale["interactions"] is None and stale["current"] == "t.py::test_d"  # never another test's requests
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_e"})
    proxy.request(chat_flow(ASK, upstream.url()))
    assert proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_e"})["interactions"] is None
    assert proxy.addon.played.entries == []


def test_a_test_resuming_after_a_wider_fixture_keeps_what_it_had(proxies, upstream):
    proxies.record(upstream, ASK, {"answer": "hi"})
    proxy = start(proxies, "replay")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_f", "played": True})
    proxy.request(chat_flow(ASK, upstream.url()))
    proxy.control(TOKEN, "/v1/test/end", {"test": "t.py::test_f"})
    proxy.request(chat_flow(ASK, upstream.url()))  # the module fixture's request: no test's
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_f", "played": True, "resume": True})
    assert len(proxy.control(TOKEN, "/v1/test/played", {"test": "t.py::test_f"})["interactions"]) == 1
