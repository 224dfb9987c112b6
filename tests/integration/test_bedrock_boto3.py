"""Amazon Bedrock through boto3 under `cassette run`: Converse and InvokeModel, plain and streamed.

botocore trusts only AWS_CA_BUNDLE (here it names a corporate CA, as on a CI
image), signs every request with SigV4 (fresh `authorization` and `x-amz-date`
each time) and percent-encodes the `:` of the model id; the streamed answers
are AWS event-stream binary frames whose CRCs botocore checks. Recorded once
against the fake upstream, then replayed twice offline with --strict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from harness import FakeUpstream, make_certificate

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKEFAKE",
    "AWS_SECRET_ACCESS_KEY": "fakeSecretKeyDoNotStore0123456789abcdefgh",
    "AWS_SESSION_TOKEN": "FakeSessionTokenDoNotStore0123456789",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}

BEDROCK_CLIENT = """
import base64, json, sys, boto3
from botocore.config import Config
client = boto3.client("bedrock-runtime", config=Config(retries={"max_attempts": 1}))
model = "anthropic.claude-3-haiku-20240307-v1:0"
prompt = sys.argv[1]

def user(text):
    return [{"role": "user", "content": [{"text": text}]}]

reply = client.converse(modelId=model, messages=user(prompt + " converse"))
print("converse:", reply["output"]["message"]["content"][0]["text"], reply["stopReason"])

stream = client.converse_stream(modelId=model, messages=user(prompt + " converse-stream"))
events = list(stream["stream"])
text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
print("converse-stream:", text, [next(iter(e)) for e in events][-1], events[-1]["metadata"]["usage"]["totalTokens"])

body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 50,
                   "messages": [{"role": "user", "content": prompt + " invoke"}]})
reply = json.loads(client.invoke_model(modelId=model, body=body)["body"].read())
print("invoke:", reply["content"][0]["text"])

body = body.replace(" invoke", " invoke-stream")
stream = client.invoke_model_with_response_stream(modelId=model, body=body)
chunks = [json.loads(e["chunk"]["bytes"]) for e in stream["body"]]
print("invoke-stream:", "".join(c["delta"]["text"] for c in chunks if c["type"] == "content_block_delta"))
"""


@pytest.fixture(scope="module")
def aws_env(tmp_path_factory) -> dict[str, str]:
    """Fake credentials, no shared AWS files, and a CA bundle export that trusts a corporate CA only."""
    folder = tmp_path_factory.mktemp("aws")
    corporate_cert, _ = make_certificate(folder)
    return {
        **FAKE_AWS,
        "AWS_CONFIG_FILE": str(folder / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(folder / "no-credentials"),
        "AWS_CA_BUNDLE": str(corporate_cert),
        "NO_PROXY": ".amazonaws.com",
    }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, aws_env) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("bedrock")
    upstream = FakeUpstream(folder / "upstream", make_certificate(folder)).start()
    try:
        env = {**aws_env, "CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)}
        result = cassette("run", "--mode", "record", "--strict", "--dir", str(folder / "cassettes"), "--",
                          sys.executable, "-c", BEDROCK_CLIENT, "hello bedrock", cwd=folder, env=env)  # fmt: skip
        served = upstream.stats()
    finally:
        upstream.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 recorded" in result.stderr, result.stderr
    assert served["count"] == 4
    # What botocore really sent: the model id's `:` percent-encoded, and SigV4 headers.
    sent = served["log"][0]
    assert sent["path"] == "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    assert sent["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAFAKEFAKEFAKEFAKE/")
    assert {"X-Amz-Date", "X-Amz-Security-Token"} <= set(sent["headers"])
    return folder / "cassettes", result.stdout


EXPECTED = [
    "converse: echo: hello bedrock converse end_turn",
    "converse-stream: echo: hello bedrock converse-stream metadata 9",
    "invoke: echo: hello bedrock invoke",
    "invoke-stream: echo: hello bedrock invoke-stream",
]


def test_record_gets_the_upstream_answers(recorded):
    _, stdout = recorded
    assert stdout.splitlines() == EXPECTED


@pytest.mark.parametrize("run", [1, 2])
def test_replays_offline_with_strict(tmp_path, recorded, aws_env, run):
    """No fake upstream and no redirect: every answer, streamed frames included, comes from the cassettes."""
    cassettes, _ = recorded
    result = cassette("run", "--strict", "--dir", str(cassettes), "--", sys.executable, "-c", BEDROCK_CLIENT,
                      "hello bedrock", cwd=tmp_path, env=aws_env)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == EXPECTED
    assert "cassette: replay: 4 hits, 0 misses, 0 recorded, 0 upstream" in result.stderr


def test_cassettes_hold_no_aws_credentials_or_signatures(recorded):
    cassettes, _ = recorded
    files = sorted(cassettes.rglob("*.json"))
    assert len(files) == 4
    text = "\n".join(path.read_text() for path in files)
    for secret in [*FAKE_AWS.values()][:3]:
        assert secret not in text
    for signed in ("AWS4-HMAC-SHA256", "Signature=", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"):
        assert signed.lower() not in text.lower()


def test_model_id_is_keyed_decoded_and_stored_in_a_safe_folder(recorded):
    cassettes, _ = recorded
    folders = {path.parent.relative_to(cassettes).as_posix() for path in cassettes.rglob("*.json")}
    assert folders == {
        f"bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1_0/{action}"
        for action in ("converse", "converse-stream", "invoke", "invoke-with-response-stream")
    }
    urls = {json.loads(path.read_text())["request"]["url"] for path in cassettes.rglob("*.json")}
    assert (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1:0/converse" in urls
    )


def test_converse_stream_is_stored_as_readable_frames(recorded):
    cassettes, _ = recorded
    (path,) = cassettes.rglob("converse-stream/*.json")
    response = json.loads(path.read_text())["response"]
    assert response["headers"]["content-type"] == "application/vnd.amazon.eventstream"
    assert response["body_format"] == "eventstream"
    kinds = [frame["headers"][":event-type"] for frame in response["body"]]
    assert kinds[0] == "messageStart" and kinds[-1] == "metadata"
    deltas = [frame["payload"]["delta"]["text"] for frame in response["body"] if "delta" in frame["payload"]]
    assert "".join(deltas) == "echo: hello bedrock converse-stream"


def test_invoke_stream_chunks_are_stored_decoded(recorded):
    """The model's own events inside InvokeModelWithResponseStream chunks are readable (and so redactable)."""
    cassettes, _ = recorded
    (path,) = cassettes.rglob("invoke-with-response-stream/*.json")
    frames = json.loads(path.read_text())["response"]["body"]
    assert all(frame["payload_bytes"] == "json" for frame in frames)
    assert [frame["payload"]["bytes"]["type"] for frame in frames][-1] == "message_stop"
