"""A JSON file nested a thousand levels deep in an endpoint folder, in-process: a request keyed to it answers 500
`cassette_invalid` naming it (never `cassette_error`, "a bug in Cassette Proxy"), and every other miss in that
folder still answers its 409 with the closest recording (core/files/json_depth.py)."""

from __future__ import annotations

import json

from in_process import chat_flow

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

THOUSAND = "[" * 1000 + "]" * 1000


def ask(text: str) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}


def test_a_deep_file_is_its_own_error_and_misses_beside_it_still_answer_409(proxies, upstream):
    deep = proxies.record(upstream, ask("deep"), {"choices": []})
    intact = proxies.record(upstream, ask("intact"), {"choices": []})
    deep.write_text(THOUSAND)
    (deep.parent / f"{9:032x}.json").write_text("[" * 150 + "]" * 150)  # parses, past the depth limit
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    keyed = proxy.request(chat_flow(ask("deep"), upstream.url()))
    error = json.loads(keyed.response.content)["error"]
    assert keyed.response.status_code == 500 and error["type"] == "cassette_invalid"
    assert "JSON nested deeper than 100 levels" in error["message"] and str(deep) in error["message"]
    for _ in range(2):  # the second miss reads the folder's cassettes from the search's cache
        missed = proxy.request(chat_flow(ask("intact, changed"), upstream.url()))
        assert missed.response.status_code == 409
        closest = json.loads(missed.response.content)["error"]["closest"]
        assert [entry["cassette"] for entry in closest] == [intact.relative_to(proxies.cassette_dir).as_posix()]
    report = proxy.done()
    assert report["counts"]["misses"] == 2 and [e["type"] for e in report["errors"]] == ["cassette_invalid"]
