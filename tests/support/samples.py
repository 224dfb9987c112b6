"""Cassettes as the proxy writes them, for the tests of the `cassette` commands (which never need a proxy)."""

from __future__ import annotations

import json
from pathlib import Path

from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.keys.key import RequestFacts, request_key


def chat(prompt: str, answer: str, *, model: str = "gpt-4o-mini", finish: str = "stop", recorded_at: str = "") -> dict:
    """An OpenAI chat completion cassette, keyed like the proxy keys it."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    raw = json.dumps(body).encode()
    facts = RequestFacts(
        "POST", "https", "api.openai.com", 443, "/v1/chat/completions", [], {}, raw, "application/json"
    )
    cassette = new_cassette(
        request_key(facts),
        {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {},
         "body_format": "json", "body": body},
        {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json",
         "body": {"id": "chatcmpl-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", "object": "chat.completion", "created": 1700000000,
                  "model": f"{model}-2024-07-18",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": finish}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}},
        {"cassette_proxy": "0.1.0", "mitmproxy": "11.0.2"},
    )  # fmt: skip
    if recorded_at:
        cassette["recorded_at"] = recorded_at
    return cassette


def cassette_path(cassette: dict) -> str:
    return relative_name("https", "api.openai.com", 443, "/v1/chat/completions", cassette["key"])


def write(root: Path, cassette: dict, relative: str = "") -> Path:
    """Write a cassette where the proxy would (or at `relative`); returns its path."""
    path = root / (relative or cassette_path(cassette))
    write_atomic(path, dumps(cassette))
    return path


SAMPLE_KEY = "0123456789abcdef0123456789abcdef"


def minimal(**response) -> dict:
    """The smallest valid cassette, its response fields overridable: what file-format tests start from."""
    return new_cassette(
        SAMPLE_KEY,
        {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {}, "body_format": "json",
         "body": {"model": "m"}},
        {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json", "body": {"ok": True},
         **response},
        {"cassette_proxy": "test"},
    )  # fmt: skip
