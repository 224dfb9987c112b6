"""Gemini (google-genai), Vertex AI behind a google-auth service-account refresh, and Azure OpenAI, end to end:
`cassette run --mode record` against the fake upstream (the redirect addon stands in for DNS), then
`cassette run --strict` twice with the upstream gone. No client code knows about the proxy.

Their credentials (`x-goog-api-key`, `?key=`, Azure's `api-key`, the OAuth access token) never reach a
cassette, the summary or the report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from fake_upstream import LIVE_TOKEN
from harness import FakeUpstream
from test_token_exchange import service_account_info

FAKE_GEMINI_KEY = "AIza" + "FAKE-DO-NOT-STORE-0123456789abcdefg"
FAKE_AZURE_KEY = "fakeazurekeyDONOTSTORE0123456789"

GEMINI = """
import sys, requests
from google import genai
client = genai.Client(api_key=sys.argv[1])
print(client.models.generate_content(model="gemini-2.0-flash", contents="gemini hello").text)
print("".join(c.text for c in client.models.generate_content_stream(model="gemini-2.0-flash", contents="gemini stream me")))
# REST with the key in the query, as curl examples do; the same body as the SDK call above.
url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent?key=" + sys.argv[1]
body = {"contents": [{"parts": [{"text": "gemini rest"}], "role": "user"}]}
print(requests.post(url, json=body, timeout=30).json()["candidates"][0]["content"]["parts"][0]["text"])
"""

AZURE = """
import sys
from openai import AzureOpenAI
client = AzureOpenAI(api_key=sys.argv[1], api_version=sys.argv[2], azure_endpoint="https://cassette-test.openai.azure.com", max_retries=0)
messages = [{"role": "user", "content": "azure hello"}]
print(client.chat.completions.create(model="gpt-4o-mini-deployment", messages=messages).choices[0].message.content)
stream = client.chat.completions.create(model="gpt-4o-mini-deployment", messages=[{"role": "user", "content": "azure stream"}], stream=True)
print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
"""

AZURE_ENTRA_ID = """
import sys, msal
from openai import AzureOpenAI
app = msal.ConfidentialClientApplication(
    "11111111-2222-3333-4444-555555555555", client_credential=sys.argv[1],
    authority="https://login.microsoftonline.com/00000000-0000-0000-0000-00000000cafe",
)
def token():
    answer = app.acquire_token_for_client(scopes=["https://cognitiveservices.azure.com/.default"])
    assert "access_token" in answer, answer
    return answer["access_token"]
client = AzureOpenAI(azure_ad_token_provider=token, api_version="2024-10-21", azure_endpoint="https://cassette-test.openai.azure.com", max_retries=0)
print(client.chat.completions.create(model="gpt-4o-mini-deployment", messages=[{"role": "user", "content": "entra hello"}]).choices[0].message.content)
print("placeholder token" if token().startswith("cassette-placeholder-") else "live token")
"""

VERTEX = """
import json, sys
from google import genai
from google.oauth2 import service_account
info = json.load(open(sys.argv[1]))
credentials = service_account.Credentials.from_service_account_info(info, scopes=["https://www.googleapis.com/auth/cloud-platform"])
client = genai.Client(vertexai=True, project="cassette-test", location="us-central1", credentials=credentials)
print(client.models.generate_content(model="gemini-2.0-flash", contents="vertex hello").text)
print("placeholder token" if credentials.token.startswith("cassette-placeholder-") else "live token")
"""


def record_then_replay_twice(tmp_path: Path, upstream: FakeUpstream, command: list[str]) -> tuple[list, Path]:
    """The three runs' results (record, replay, replay) and the cassette folder."""
    folder = tmp_path / "cassettes"
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)}
    try:
        runs = [
            cassette("run", "--mode", "record", "--strict", "--dir", str(folder), "--", *command, cwd=tmp_path, env=env)
        ]
    finally:
        upstream.stop()
    runs += [cassette("run", "--strict", "--dir", str(folder), "--", *command, cwd=tmp_path) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr
    return runs, folder


def stored_text(folder: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(folder.rglob("*.json")))


@pytest.fixture
def upstream(tmp_path, upstream_certificate) -> FakeUpstream:
    return FakeUpstream(tmp_path / "upstream", upstream_certificate).start()


def test_google_genai_generate_and_stream_replay_and_never_store_the_key(tmp_path, upstream):
    assert len(FAKE_GEMINI_KEY) == 39  # shaped like a real key, so the built-in secret rules would see it too
    runs, folder = record_then_replay_twice(tmp_path, upstream, [sys.executable, "-c", GEMINI, FAKE_GEMINI_KEY])
    record, *replays = runs
    assert record.stdout.splitlines() == ["echo: gemini hello", "echo: gemini stream me", "echo: gemini rest"]
    assert "0 hits, 0 misses, 3 recorded" in record.stderr
    for replay in replays:
        assert replay.stdout == record.stdout
        assert "cassette: replay: 3 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough" in replay.stderr
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json"))
    assert all(name.startswith("generativelanguage.googleapis.com/v1") for name in names), names
    assert sorted(name.split("/")[-2] for name in names) == [  # the model and method, `:` made safe for folders
        "gemini-2.0-flash_generateContent",
        "gemini-2.0-flash_generateContent",
        "gemini-2.0-flash_streamGenerateContent",
    ]
    stream = next(json.loads(p.read_text()) for p in folder.rglob("*.json") if "stream" in str(p))
    assert stream["response"]["body_format"] == "events"
    assert "alt=sse" in stream["request"]["url"]
    for text in (stored_text(folder), *(r.stdout + r.stderr for r in runs)):
        assert FAKE_GEMINI_KEY not in text


def test_azure_openai_deployment_and_api_version_replay_and_never_store_the_key(tmp_path, upstream):
    command = [sys.executable, "-c", AZURE, FAKE_AZURE_KEY, "2024-10-21"]
    runs, folder = record_then_replay_twice(tmp_path, upstream, command)
    record, *replays = runs
    assert record.stdout.splitlines() == ["echo: azure hello", "echo: azure stream"]
    for replay in replays:
        assert replay.stdout == record.stdout
        assert "cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough" in replay.stderr
    urls = sorted(json.loads(p.read_text())["request"]["url"] for p in folder.rglob("*.json"))
    assert (
        urls
        == [
            "https://cassette-test.openai.azure.com/openai/deployments/gpt-4o-mini-deployment/chat/completions?api-version=2024-10-21"
        ]
        * 2
    )
    assert FAKE_AZURE_KEY not in stored_text(folder)
    # The API version changes what the service does: it is part of the key.
    other_version = cassette(
        "run", "--strict", "--dir", str(folder), "--", sys.executable, "-c", AZURE, FAKE_AZURE_KEY, "2025-01-01-preview",
        cwd=tmp_path,
    )  # fmt: skip
    assert other_version.returncode != 0
    assert "api-version=2025-01-01-preview" in other_version.stderr
    assert FAKE_AZURE_KEY not in other_version.stdout + other_version.stderr


def test_azure_openai_with_an_entra_id_token_from_msal_replays_offline(tmp_path, upstream):
    """MSAL reads the tenant's OpenID discovery document (no secret in it: recorded like an API call), then trades
    the client secret for a token (never stored; the placeholder in replay)."""
    runs, folder = record_then_replay_twice(tmp_path, upstream, [sys.executable, "-c", AZURE_ENTRA_ID, FAKE_AZURE_KEY])
    record, *replays = runs
    assert record.stdout.splitlines() == ["echo: entra hello", "live token"]
    assert "0 hits, 0 misses, 2 recorded, 2 upstream, 0 passthrough, 1 token exchanges" in record.stderr
    for replay in replays:
        assert replay.stdout.splitlines() == ["echo: entra hello", "placeholder token"]
        assert "cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough, 1 token exchanges" in (
            replay.stderr
        )
    hosts = sorted(str(p.relative_to(folder)).split("/")[0] for p in folder.rglob("*.json"))
    assert hosts == ["cassette-test.openai.azure.com", "login.microsoftonline.com"]
    for text in (stored_text(folder), *(r.stdout + r.stderr for r in runs)):
        assert LIVE_TOKEN not in text
        assert FAKE_AZURE_KEY not in text


def test_google_auth_service_account_refreshes_offline_and_vertex_call_replays(tmp_path, upstream):
    account = tmp_path / "service-account.json"
    account.write_text(json.dumps(service_account_info()))
    runs, folder = record_then_replay_twice(tmp_path, upstream, [sys.executable, "-c", VERTEX, str(account)])
    record, *replays = runs
    assert record.stdout.splitlines() == ["echo: vertex hello", "live token"]
    assert "0 hits, 0 misses, 1 recorded, 1 upstream, 0 passthrough, 1 token exchanges" in record.stderr
    for replay in replays:
        assert replay.stdout.splitlines() == ["echo: vertex hello", "placeholder token"]
        assert "cassette: replay: 1 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough, 1 token exchanges" in (
            replay.stderr
        )
    names = [str(p.relative_to(folder)) for p in folder.rglob("*.json")]
    assert len(names) == 1, names
    assert names[0].startswith("us-central1-aiplatform.googleapis.com/"), names
    private_key = json.loads(account.read_text())["private_key"].splitlines()[1]
    for text in (stored_text(folder), *(r.stdout + r.stderr for r in runs)):
        assert LIVE_TOKEN not in text
        assert private_key not in text
