"""Secrets by name: a credential is recognised by what it is called, not only by its shape.

Presigned and SAS URL parameters are never stored, logged or keyed; JSON fields
named like a credential (`password`, `client_secret`, … at any depth, string
values only) are redacted at write time and in miss diffs, while the key still
uses the real value; `cassette scan` reports them.
"""

from __future__ import annotations

import json
import ssl

import httpx
import pytest
from cassette_proxy.cli import scan
from cassette_proxy.core.keys.key import RequestFacts, request_key
from cassette_proxy.core.secrets.redact import loggable_url, parse_rules, redact

RULES = parse_rules([])
PASSWORD, CLIENT_SECRET, API_KEY = "hunter2-FAKE-pw", "FAKE-client-secret-0042", "plainFAKEkeyNoShape"


def body(password: str = PASSWORD) -> dict:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "log me in"}],
        "metadata": {"Password": password, "nested": [{"client_secret": CLIENT_SECRET}], "API-Key": API_KEY},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "login",
                    "parameters": {"type": "object", "properties": {"password": {"type": "string"}}},
                },
            }
        ],
        "session": {"access_token": 12345},  # not a string: left as it is
    }


def test_credential_fields_are_redacted_at_any_depth_and_schemas_stay():
    stored = redact({"request": {"body_format": "json", "body": body()}}, RULES)["request"]["body"]
    assert stored["metadata"]["Password"] == "[REDACTED:credential-field]"
    assert stored["metadata"]["nested"][0]["client_secret"] == "[REDACTED:credential-field]"
    assert stored["metadata"]["API-Key"] == "[REDACTED:credential-field]"
    assert stored["tools"] == body()["tools"]  # a `password` property of a tool schema is an object
    assert stored["session"] == {"access_token": 12345}
    assert stored["messages"] == body()["messages"]


def test_the_key_uses_the_real_value_of_a_credential_field():
    def key(password: str) -> str:
        raw = json.dumps(body(password)).encode()
        return request_key(
            RequestFacts("POST", "https", "api.openai.com", 443, "/v1/x", [], {}, raw, "application/json")
        )

    assert key("one") != key("two")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAFAKEFAKEFAKE1234%2F2025"
            "&X-Amz-Security-Token=FAKE&X-Amz-Signature=abc&partNumber=2",
            "https://b.s3.amazonaws.com/o?partNumber=2",
        ),
        ("https://x.blob.core.windows.net/c/b?sv=2021&sp=r&se=2025&sig=FAKE", "https://x.blob.core.windows.net/c/b"),
        ("https://db.firebaseio.com/a.json?auth=FAKE&print=pretty", "https://db.firebaseio.com/a.json?print=pretty"),
        ("https://h/v1/m?key=FAKE", "https://h/v1/m"),
        ("https://h/v1/AKIAFAKEFAKEFAKE1234/m", "https://h/v1/[REDACTED:aws-access-key-id]/m"),
        ("https://h/v1/m?sp=1&st=2", "https://h/v1/m?sp=1&st=2"),  # not a SAS URL: ordinary parameters
        ("https://h/%ff?x=%ff&&=", "https://h/%ff?x=%ff&&="),
    ],
)
def test_loggable_urls_lose_their_credentials(url, shown):
    assert loggable_url(url) == shown


def test_scan_reports_credential_fields_but_not_redacted_ones(tmp_path):
    document = {"request": {"body_format": "json", "body": body()}}
    found = {(path, rule) for path, rule, _ in scan.scan_document(document, RULES, entropy=False)}
    assert found == {
        ("request.body.metadata.Password", "credential-field"),
        ("request.body.metadata.nested[0].client_secret", "credential-field"),
        ("request.body.metadata.API-Key", "credential-field"),
    }
    assert not list(scan.scan_document(redact(document, RULES), RULES, entropy=True))


PRESIGNED = (
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAFAKEFAKEFAKE1234%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host"
    "&X-Amz-Security-Token=FAKEsessionTOKENvalue&X-Amz-Signature=FAKEsignature0123&auth=FAKEfirebaseAUTH"
)
NEVER_WRITTEN = (
    PASSWORD,
    CLIENT_SECRET,
    API_KEY,
    "AKIAFAKEFAKEFAKE1234",
    "FAKEsession",
    "FAKEsignature",
    "FAKEfirebase",
)


def test_presigned_urls_and_credential_fields_never_reach_cassettes_reports_logs_or_miss_diffs(
    start_proxy, https_upstream, cassette_dir
):
    url = f"https://api.openai.com/v1/chat/completions?{PRESIGNED}&page=2"
    recorder = start_proxy(https_upstream, cassette_mode="record", flow_detail=0)
    with httpx.Client(proxy=recorder.url, verify=ssl.create_default_context(cafile=str(recorder.ca_bundle))) as http:
        assert http.post(url, json=body()).status_code == 200
    recorder.stop()
    (cassette,) = cassette_dir.rglob("*.json")
    stored = json.loads(cassette.read_text())
    assert stored["request"]["url"] == "https://api.openai.com/v1/chat/completions?page=2"
    assert stored["request"]["body"]["tools"] == body()["tools"]
    assert "cassette recorded" in recorder.log_text()

    replay = start_proxy(https_upstream, cassette_mode="replay", flow_detail=0)
    with httpx.Client(proxy=replay.url, verify=ssl.create_default_context(cafile=str(replay.ca_bundle))) as http:
        other_signature = url.replace("FAKEsignature0123", "FAKEsignature9999").replace("20250101T", "20260101T")
        hit = http.post(other_signature, json=body())  # a re-signed URL is the same request
        missed = http.post(url, json=body(password="another-FAKE-pw"))  # the key uses the real value
    report = replay.stop()
    assert hit.status_code == 200
    assert missed.status_code == 409
    assert report["counts"]["hits"] == 1
    assert "another-FAKE-pw" not in missed.text
    texts = [cassette.read_text(), missed.text, recorder.report_path.read_text(), replay.report_path.read_text(),
             recorder.log_text(), replay.log_text()]  # fmt: skip
    for secret in NEVER_WRITTEN:
        assert not [text for text in texts if secret in text], secret
