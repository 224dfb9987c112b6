"""A run the proxy saw nothing of: when it warns, and which causes it names from the environment."""

from __future__ import annotations

from collections import Counter

import pytest
from cassette_proxy.core.defaults import DEFAULT_HOSTS
from cassette_proxy.core.report import Report
from cassette_proxy.launch import silent_run


@pytest.mark.parametrize(
    ("report", "silent"),
    [
        (Report(mode="record"), True),
        (Report(mode="record", passthrough=3, telemetry=2, token_exchanges=1), True),  # nothing for a cassette host
        (Report(mode="record", upstream=1), False),  # forwarded, even if not saved
        (Report(mode="record", hits=1), False),
        (Report(mode="record", misses=[{"url": "wss://api.openai.com/v1/realtime"}]), False),  # a session's miss
        (Report(mode="update", misses=[{"url": "u"}]), False),
        (Report(mode="replay"), True),
        (Report(mode="replay", misses=[{"url": "u"}]), False),
        (Report(mode="replay", hits=2), False),
        (Report(mode="off"), False),
    ],
)
def test_it_warns_only_when_no_request_for_a_cassette_host_arrived(report, silent):
    assert silent_run.saw_nothing(report) is silent
    assert (silent_run.warning(report, {}, DEFAULT_HOSTS) is not None) is silent


def test_the_causes_the_environment_shows_are_named():
    report = Report(mode="replay", passthrough_hosts=Counter({"api.example-llm.dev": 4}))
    environ = {
        "OLLAMA_HOST": "http://localhost:11434",  # straight to a local server
        "OPENAI_BASE_URL": "https://gateway.example.com/v1",  # a host outside the scope
        "ANTHROPIC_BASE_URL": "https://api.anthropic.com",  # in scope: through the proxy, no cause
    }
    text = silent_run.warning(report, environ, DEFAULT_HOSTS, node_bypassed=True)
    assert text.startswith("cassette: warning: no request for a controlled host reached the proxy in this replay run")
    assert "Node's fetch ignored the proxy" in text and "npm install --save-dev undici@6" in text
    assert "OLLAMA_HOST=http://localhost:11434 sends clients straight to a local server" in text
    assert "OPENAI_BASE_URL=https://gateway.example.com/v1 sends clients to gateway.example.com, outside" in text
    assert "ANTHROPIC_BASE_URL" not in text
    assert "api.example-llm.dev (4); if one is your model API, add it (--hosts)" in text
    assert "or these tests make no model call" in text
