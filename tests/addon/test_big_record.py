"""Recording a big answer (above 1 MB): stored as its text, exactly as received, built in the writer thread
(parsing it on the event loop stalled every client for seconds: benchmarks/record_big.py), with redaction still
reaching credential fields inside it; parsed as before when a redaction rule is scoped inside the body."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cassette_proxy.core.files.cassette_file import LARGE_JSON_BYTES, load
from cassette_proxy.core.report import Report
from cassette_proxy.core.secrets import redact
from cassette_proxy.proxy.record import Recorder, RecordTarget
from cassette_proxy.proxy.writer import Writer
from mitmproxy.test import tflow, tutils

SECRET = "sk-live-DO-NOT-STORE-0123456789abcdef"


def big_answer() -> bytes:
    """About 2 MB of JSON as an API may write it (compact, `\\u` escapes, a float spelled `1.50`), a credential
    field nested inside, and one in a differently written name."""
    rows = [{"object": "embedding", "index": i, "embedding": [round(i / 7 + j / 1e4, 6) for j in range(64)],
             "note": f"rangée {i} ✓"} for i in range(2500)]  # fmt: skip
    rows[10]["api_key"] = SECRET
    rows[20]["Client-Secret"] = "hunter2-also-secret"
    text = json.dumps({"object": "list", "data": rows, "model": "text-embedding-3-small"}, separators=(",", ":"))
    body = text.replace('"index":0,', '"index":0,"scale":1.50,', 1).encode()  # as written, not as Python would
    assert len(body) > LARGE_JSON_BYTES
    return body


def record(tmp_path: Path, body: bytes, rules: tuple[redact.Rule, ...]) -> dict:
    writer = Writer(Report())
    writer.configure(rules, {})
    recorder = Recorder(writer)
    recorder.configure((), frozenset({200}))
    flow = tflow.tflow(resp=tutils.tresp(content=body, headers=[(b"content-type", b"application/json")]))
    path = tmp_path / "cassettes" / "a.json"
    path.parent.mkdir(parents=True)
    request = {"method": "POST", "url": "https://api.openai.com/v1/embeddings", "headers": {}, "body_format": "json",
               "body": {"input": ["x"]}}  # fmt: skip
    target = RecordTarget(key="0" * 32, path=path, relative="a.json", request=request, existed=False)

    async def save() -> str | None:
        return await recorder.save_whole(flow.response, target)

    assert asyncio.run(save()) is None
    assert SECRET not in path.read_text()
    return load(path)


def test_a_big_answer_is_stored_as_received_but_for_its_credential_fields(tmp_path):
    body = big_answer()
    cassette = record(tmp_path, body, redact.parse_rules([]))

    response = cassette["response"]
    assert response["body_format"] == "text"
    expected = body.decode().replace(SECRET, "[REDACTED:credential-field]")
    expected = expected.replace("hunter2-also-secret", "[REDACTED:credential-field]")
    assert response["body"] == expected  # byte for byte: no spaces added, `1.50` and the escapes kept
    assert json.loads(response["body"])["data"][20]["Client-Secret"] == "[REDACTED:credential-field]"


def test_a_rule_scoped_inside_the_body_gets_the_parsed_body(tmp_path):
    body = big_answer()
    rules = redact.parse_rules(["#response.body.data.*.note#rangée#row"])
    assert redact.needs_structure(rules)

    stored = json.loads(record(tmp_path, body, rules)["response"]["body"])

    assert stored["data"][3]["note"] == "row 3 ✓"
    assert stored["data"][10]["api_key"] == "[REDACTED:credential-field]"
    assert stored["data"][5]["embedding"] == json.loads(body)["data"][5]["embedding"]
    assert stored["data"][0]["scale"] == 1.5
