"""The requests every benchmark sends: realistic OpenAI chat calls, byte-identical on every send.

Stdlib only (plus tests/support/fake_upstream.py, on sys.path): it is imported by the
benchmark (client environment) and by make_flows.py (proxy environment). mitmproxy's server replay matches raw body
bytes, so a request must be built the same way each time it is sent.
"""

from __future__ import annotations

import json

from fake_upstream import last_user_text, openai_chat

CHAT_PATH = "/v1/chat/completions"
API_KEY = "sk-fake-bench-DO-NOT-STORE-0123456789abcdef"


def chat_body(name: str, stream: bool = False) -> bytes:
    """A chat completion request of typical size (a system prompt, one user turn, a few parameters)."""
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a concise assistant for a test suite. Answer in one sentence."},
            {"role": "user", "content": f"Request {name}: summarise why recorded replies make tests fast."},
        ],
        "temperature": 0,
        "max_tokens": 64,
    }
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def synthetic_body(i: int) -> bytes:
    """The body of synthetic interaction number i (cassettes, flows and the requests that hit them)."""
    return chat_body(f"synthetic-{i}")


def answer_of(body: bytes) -> dict:
    """What the fake upstream answers to this body, so a synthetic recording equals a real one."""
    request = json.loads(body)
    return openai_chat(request, f"echo: {last_user_text(request)}")


def request_headers(host: str, port: int, body: bytes) -> dict[str, str]:
    """The headers the openai Python SDK sends (fixed values, so that every send is the same bytes)."""
    return {
        "host": f"{host}:{port}",
        "accept-encoding": "gzip, deflate",
        "connection": "keep-alive",
        "accept": "application/json",
        "content-type": "application/json",
        "user-agent": "OpenAI/Python 2.0.0",
        "x-stainless-lang": "python",
        "x-stainless-package-version": "2.0.0",
        "x-stainless-os": "Linux",
        "x-stainless-arch": "x64",
        "x-stainless-runtime": "CPython",
        "x-stainless-runtime-version": "3.11.7",
        "authorization": f"Bearer {API_KEY}",
        "x-stainless-async": "false",
        "x-stainless-retry-count": "0",
        "x-stainless-read-timeout": "600",
        "content-length": str(len(body)),
    }


def raw_request(host: str, port: int, body: bytes, via_proxy: bool) -> bytes:
    """The bytes of one keep-alive POST; absolute-form target when sent to a forward proxy."""
    target = f"http://{host}:{port}{CHAT_PATH}" if via_proxy else CHAT_PATH
    head = [f"POST {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in request_headers(host, port, body).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
