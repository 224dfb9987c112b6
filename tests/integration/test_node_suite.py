"""The Node suite in tests/node, run as its users would: `cassette run -- npm test`, offline, on committed cassettes."""

from __future__ import annotations

import json

import pytest
from cassette_command import cassette
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, ROOT

NODE_SUITE = ROOT / "tests" / "node"
NODE_CASSETTES = ROOT / "cassettes" / "node"
COMMITTED = sorted(NODE_CASSETTES.rglob("*.json"))
REVERSE = ["--reverse", "openai=https://api.openai.com", "--reverse", "anthropic=https://api.anthropic.com"]
FORWARD_ROUTE = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS")


@pytest.mark.parametrize(
    ("route", "args", "command"),
    [
        ("forward proxy, preload", [], ["npm", "test"]),
        # Without the proxy variables, the preload and the CA, only the base URLs can reach the cassettes.
        ("reverse, zero CA", REVERSE, ["env", *(f"--unset={name}" for name in FORWARD_ROUTE), "npm", "test"]),
    ],
)
def test_node_suite_replays_its_committed_cassettes_offline(tmp_path, route, args, command):
    report = tmp_path / "report.json"
    result = cassette(
        "run", "--strict", "--dir", str(NODE_CASSETTES), "--report", str(report), *args, "--", *command, cwd=NODE_SUITE
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"# pass {len(COMMITTED)}" in result.stdout and "# fail 0" in result.stdout
    counts = json.loads(report.read_text())["counts"]
    assert (counts["hits"], counts["misses"], counts["upstream"]) == (len(COMMITTED), 0, 0)
    assert "experimental" not in result.stderr  # undici's warning is kept out of every Node process


def test_node_cassettes_are_committed_and_hold_no_key():
    assert len(COMMITTED) == 5
    for path in COMMITTED:
        text = path.read_text()
        assert FAKE_OPENAI_KEY not in text and FAKE_ANTHROPIC_KEY not in text
        headers = json.loads(text)["request"]["headers"]
        assert not {"authorization", "x-api-key"} & set(headers)
