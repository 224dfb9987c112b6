"""Reverse routes reach SDKs built with no base URL: each route sets the variable its SDK reads.

One `cassette run` records google-genai, `openai.AzureOpenAI`, the ollama client and boto3's Bedrock
runtime through four reverse routes, none of them told a base URL in code; a second replays them offline
with `--strict`, the fake upstream stopped, every request on its route and none on the forward proxy.
"""

from __future__ import annotations

import json
import sys

from cassette_command import cassette, redirect_args
from harness import FAKE_OPENAI_KEY, FakeUpstream

APP = f"""
import boto3, ollama, openai
from google import genai

gemini = genai.Client(api_key="fake-gemini-key-DO-NOT-STORE")
print("gemini:", gemini.models.generate_content(model="gemini-2.0-flash", contents="hello gemini").text)

azure = openai.AzureOpenAI(api_key="{FAKE_OPENAI_KEY}", api_version="2024-06-01", max_retries=0)
reply = azure.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "hello azure"}}])
print("azure:", reply.choices[0].message.content)

print("ollama:", ollama.chat(model="llama3", messages=[{{"role": "user", "content": "hello ollama"}}], stream=False).message.content)

bedrock = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="AKIAFAKEFAKEFAKEFAKE",
                       aws_secret_access_key="fake-secret-DO-NOT-STORE")
answer = bedrock.converse(modelId="anthropic.claude-3-haiku-20240307-v1:0",
                          messages=[{{"role": "user", "content": [{{"text": "hello bedrock"}}]}}])
print("bedrock:", answer["output"]["message"]["content"][0]["text"])
"""

ROUTES = [
    "--reverse", "gemini=https://generativelanguage.googleapis.com",
    "--reverse", "azure_openai=https://myres.openai.azure.com",
    "--reverse", "ollama=http://localhost:11434",
    "--reverse", "bedrock=https://bedrock-runtime.us-east-1.amazonaws.com",
]  # fmt: skip

EXPECTED = ["gemini: echo: hello gemini", "azure: echo: hello azure", "ollama: echo: hello ollama",
            "bedrock: echo: hello bedrock"]  # fmt: skip


def test_google_genai_azure_ollama_and_boto3_take_their_routes_with_no_code_change(tmp_path, upstream_certificate):
    app = tmp_path / "app.py"
    app.write_text(APP)
    upstream = FakeUpstream(tmp_path / "upstream", upstream_certificate).start()
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)}
    # An environment that already names the real endpoints, as a developer's shell does: the routes win.
    env |= {"AZURE_OPENAI_ENDPOINT": "https://myres.openai.azure.com", "OLLAMA_HOST": "http://localhost:11434"}
    try:
        report = tmp_path / "record.json"
        recorded = cassette("run", "--mode", "record", *ROUTES, "--report", str(report), "--",
                            sys.executable, str(app), cwd=tmp_path, env=env)  # fmt: skip
        assert recorded.returncode == 0, recorded.stderr
        assert recorded.stdout.split("\n")[:4] == EXPECTED
        counts = json.loads(report.read_text())
        assert counts["counts"]["recorded"] == 4
        assert counts["routes"] == {"forward": 0, "gemini": 1, "azure_openai": 1, "ollama": 1, "bedrock": 1}
    finally:
        upstream.stop()
    folders = sorted(
        p.parent.relative_to(tmp_path / "cassettes").parts[0] for p in (tmp_path / "cassettes").rglob("*.json")
    )
    assert folders == [
        "bedrock-runtime.us-east-1.amazonaws.com",
        "generativelanguage.googleapis.com",
        "localhost_11434",
        "myres.openai.azure.com",
    ]  # fmt: skip: keyed by the upstream, never by the listener
    stored = "".join(p.read_text() for p in (tmp_path / "cassettes").rglob("*.json"))
    assert "DO-NOT-STORE" not in stored and "AKIAFAKE" not in stored

    report = tmp_path / "replay.json"
    replayed = cassette("run", "--strict", *ROUTES, "--report", str(report), "--", sys.executable, str(app),
                        cwd=tmp_path, env=env)  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.split("\n")[:4] == EXPECTED
    counts = json.loads(report.read_text())
    assert (counts["counts"]["hits"], counts["counts"]["misses"], counts["counts"]["upstream"]) == (4, 0, 0)
    assert counts["routes"] == {"forward": 0, "gemini": 1, "azure_openai": 1, "ollama": 1, "bedrock": 1}
