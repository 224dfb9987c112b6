"""`cassette scan`: planted secrets are found and masked; clean folders and encoded data pass."""

from __future__ import annotations

import base64
import json
import math
import random
import struct
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from cassette_proxy.cli import main
from cassette_proxy.cli.scan import looks_random
from cassette_proxy.core.files.location import cassette_files
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY
from samples import chat, write


def scan(capsys, *args: str) -> tuple[int, str]:
    code = main(["scan", *args])
    return code, capsys.readouterr().out


def test_planted_key_is_found_with_file_path_and_a_masked_excerpt(tmp_path, capsys):
    write(tmp_path, chat("hello", "hi"))
    planted = write(tmp_path, chat(f"use {FAKE_OPENAI_KEY} please", "ok"))
    code, out = scan(capsys, str(tmp_path))
    assert code == 1
    assert f"{planted}: request.body.messages[0].content: openai-key: sk-f…({len(FAKE_OPENAI_KEY)} chars)" in out
    assert FAKE_OPENAI_KEY not in out and "DO-NOT-STORE" not in out
    assert "1 finding(s) in 1 of 2 file(s)" in out


def test_clean_folder_passes(tmp_path, capsys):
    for i in range(3):
        write(tmp_path, chat(f"question {i}", f"answer {i}"))
    assert scan(capsys, str(tmp_path)) == (0, "no secrets found in 3 file(s)\n")


def embeddings_cassette(dimensions: int) -> dict:
    """An OpenAI embeddings response with encoding_format=base64, as the API sends it: packed float32 values."""
    rng = random.Random(dimensions)
    vector = base64.b64encode(struct.pack(f"<{dimensions}f", *(rng.gauss(0, 0.04) for _ in range(dimensions))))
    cassette = chat("unused", "unused")
    cassette["request"]["url"] = "https://api.openai.com/v1/embeddings"
    cassette["request"]["body"] = {"model": "text-embedding-3-small", "input": ["a", "b"], "encoding_format": "base64"}
    cassette["response"]["body"] = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vector.decode()} for i in range(2)],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }
    return cassette


@pytest.mark.parametrize("dimensions", [1536, 16])
def test_base64_embeddings_are_not_flagged(tmp_path, capsys, dimensions):
    write(tmp_path, embeddings_cassette(dimensions), "api.openai.com/v1/embeddings/e.json")
    assert scan(capsys, str(tmp_path))[0] == 0


def test_embeddings_recorded_through_the_proxy_scan_clean(
    https_upstream, start_proxy, client_env, cassette_dir, capsys
):
    """The openai SDK asks for base64 embeddings by default: what it records must not look like leaked keys.
    Both sizes through one proxy: what is tested is each recording, not a proxy per size."""
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0)
    for dimensions in (1536, 16):
        result = client.embeddings.create(model="text-embedding-3-small", input=["a", "b"], dimensions=dimensions)
        assert len(result.data[1].embedding) == dimensions
        assert result.data[1].embedding[0] == pytest.approx(math.sin(2) / 10, abs=1e-6)
    stored = [json.loads(path.read_text()) for path in cassette_files(cassette_dir)]
    assert sorted(cassette["request"]["body"]["dimensions"] for cassette in stored) == [16, 1536]
    for cassette in stored:
        assert cassette["request"]["body"]["encoding_format"] == "base64"
        assert isinstance(cassette["response"]["body"]["data"][0]["embedding"], str)
    assert scan(capsys, str(cassette_dir)) == (0, "no secrets found in 2 file(s)\n")


def test_short_base64_embedding_would_look_random_outside_its_field():
    """The field-name exemption above is what saves the 16-dimension vector: the token itself looks random."""
    vector = embeddings_cassette(16)["response"]["body"]["data"][0]["embedding"]
    assert looks_random(vector)


def test_random_token_of_unknown_shape_is_flagged(tmp_path, capsys):
    token = "".join(random.Random(7).choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", k=32))
    write(tmp_path, chat(f"the password is {token}", "noted"))
    code, out = scan(capsys, str(tmp_path))
    assert code == 1 and "high-entropy" in out and token not in out
    assert scan(capsys, "--no-entropy", str(tmp_path))[0] == 0


def test_streamed_body_with_provider_ids_is_clean(tmp_path, capsys):
    cassette = chat("stream please", "unused")
    events = [
        {"id": "chatcmpl-AbC123dEf456GhI789jKl012", "model": "gpt-4o-mini", "choices": [{"delta": {"content": "Hi"}}]},
        {"id": "chatcmpl-AbC123dEf456GhI789jKl012", "choices": [{"delta": {}, "finish_reason": "stop"}]},
    ]
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    cassette["response"].update(body_format="text", body=body)
    write(tmp_path, cassette)
    assert scan(capsys, str(tmp_path))[0] == 0


def test_secret_inside_a_stream_is_found_with_its_line(tmp_path, capsys):
    cassette = chat("stream please", "unused")
    body = f"event: content_block_delta\ndata: {json.dumps({'delta': {'text': FAKE_ANTHROPIC_KEY}})}\n\n"
    cassette["response"].update(body_format="text", body=body)
    write(tmp_path, cassette)
    code, out = scan(capsys, str(tmp_path))
    assert code == 1 and "response.body[line 2].delta.text: anthropic-key: sk-a…" in out


def test_private_key_in_a_plain_text_body_is_found_across_lines(tmp_path, capsys):
    cassette = chat("unused", "unused")
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    cassette["response"].update(body_format="text", body=f"config {{\n  key: {pem}\n}}\n")
    write(tmp_path, cassette)
    code, out = scan(capsys, str(tmp_path))
    assert code == 1 and "response.body: private-key: ----…" in out


def test_pii_is_reported_only_when_asked(tmp_path, capsys):
    write(tmp_path, chat("mail jane.doe@example.com", "ok"))
    assert scan(capsys, str(tmp_path))[0] == 0
    code, out = scan(capsys, "--rule", "pii", str(tmp_path))
    assert code == 1 and "email: jane…(20 chars)" in out


def test_the_cassettes_own_metadata_is_not_scanned(tmp_path, capsys):
    cassette = chat("hello", "hi")
    cassette["key"] = "4111111111111111abcdef0123456789"  # 16 digits that pass the Luhn check
    write(tmp_path, cassette)
    assert scan(capsys, "--rule", "card", str(tmp_path))[0] == 0


def test_custom_rule_is_scanned_for(tmp_path, capsys):
    write(tmp_path, chat("account acct_20931", "ok"))
    code, out = scan(capsys, "--rule", "/acct_[0-9]+/[REDACTED:account]", str(tmp_path))
    assert code == 1 and "request.body.messages[0].content" in out


def test_files_named_explicitly_are_scanned_and_missing_ones_are_an_error(tmp_path, capsys):
    planted = write(tmp_path, chat(f"key {FAKE_OPENAI_KEY}", "ok"))
    assert scan(capsys, str(planted))[0] == 1
    code, out = scan(capsys, str(tmp_path / "nope.json"))
    assert code == 2 and "no such file or folder" in out


def test_redacted_cassette_is_clean(tmp_path, capsys):
    from cassette_proxy.core.secrets.redact import parse_rules, redact

    write(tmp_path, redact(chat(f"key {FAKE_OPENAI_KEY} mail a@b.co", "ok"), parse_rules(["pii"])))
    assert scan(capsys, "--rule", "pii", str(tmp_path))[0] == 0


def test_console_script_exits_non_zero_for_a_pre_commit_hook(tmp_path):
    """What pre-commit runs: the installed `cassette` command with the staged file names."""
    planted = write(tmp_path, chat(f"key {FAKE_OPENAI_KEY}", "ok"))
    command = Path(sys.executable).with_name("cassette")
    done = subprocess.run([str(command), "scan", str(planted)], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "openai-key" in done.stdout and FAKE_OPENAI_KEY not in done.stdout


def test_unreadable_json_is_scanned_as_text(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('{"request": "' + FAKE_OPENAI_KEY)
    code, out = scan(capsys, str(broken))
    assert code == 1 and f"{broken}: (file): openai-key" in out
    assert cassette_files(tmp_path) == [broken]


def test_a_credential_field_inside_a_json_answer_stored_as_text_is_found(tmp_path, capsys):
    """A JSON answer above 1 MB is stored as its text; scan reads its fields as it reads a parsed body's."""
    cassette = chat("hello", "hi")
    answer = {"data": [{"i": 1}, {"password": "hunter2-but-longer"}]}
    cassette["response"].update(body_format="text", body=json.dumps(answer, separators=(",", ":")))
    planted = write(tmp_path, cassette)
    code, out = scan(capsys, str(tmp_path))
    assert code == 1
    assert f"{planted}: response.body.data[1].password: credential-field:" in out
    assert "hunter2-but-longer" not in out
