"""`cassette scan` precision on a realistic folder of recordings: no false alarm, every planted secret found.

A scanner that flags normal cassettes gets switched off. The folder holds what
a real suite records (web-search results full of URLs, image URLs with SAS
signatures, tool-call and container ids, base64 images, thinking signatures,
streams) and a few planted secrets of the kinds that leak. Findings are counted
per (file, JSON path, rule).
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
import struct
import zlib
from pathlib import Path

from cassette_proxy.cli import main, scan
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps, events_fields, new_cassette
from cassette_proxy.core.secrets.redact import parse_rules

RNG = random.Random(12)
BASE62 = string.ascii_letters + string.digits


def token(length: int, alphabet: str = BASE62) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(length))


def png(width: int, height: int) -> str:
    """A real PNG of random pixels, base64: what a vision request carries."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(RNG.randrange(256) for _ in range(width * 3)) for _ in range(height))
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return base64.b64encode(raw + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")).decode()


def sas_url(host: str, path: str) -> str:
    """An Azure blob URL signed the way OpenAI's image URLs are."""
    sig = base64.b64encode(RNG.randbytes(32)).decode().replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    return (
        f"https://{host}/{path}?st=2025-01-10T09%3A12%3A31Z&se=2025-01-10T11%3A12%3A31Z&sp=r&sv=2024-08-04&sr=b"
        f"&rscd=inline&rsct=image/png&skoid={token(8)}-{token(4)}&sktid={token(8)}&skt=2025-01-10T00%3A11%3A44Z"
        f"&ske=2025-01-11T00%3A11%3A44Z&sks=b&skv=2024-08-04&sig={sig}"
    )


def search_url() -> str:
    return f"https://www.{token(6).lower()}.com/news/2025/{token(22)}?srsltid=AfmBOo{token(40)}&utm_source=openai"


def cassette(host: str, path: str, request_body, response_body, *, events: list[str] | None = None) -> dict:
    response = (
        {"status": 200, "headers": {"content-type": "text/event-stream", "x-request-id": f"req_{token(24)}"},
         **events_fields([{"ms": 10 * i, "text": text} for i, text in enumerate(events)])}
        if events else
        {"status": 200, "headers": {"content-type": "application/json", "request-id": f"req_{token(24)}",
                                    "cf-ray": f"{token(16, '0123456789abcdef')}-CDG"},
         "body_format": "json", "body": response_body}
    )  # fmt: skip
    return new_cassette(
        token(32, "0123456789abcdef"),
        {"method": "POST", "url": f"https://{host}{path}", "headers": {"anthropic-version": "2023-06-01"},
         "body_format": "json", "body": request_body},
        response,
        {"cassette_proxy": "0.1.0", "mitmproxy": "12.1.1"},
    )  # fmt: skip


def anthropic_web_search(i: int) -> dict:
    results = [
        {"type": "web_search_result", "url": search_url(), "title": f"Result {n}", "page_age": "April 30, 2025",
         "encrypted_content": token(600, BASE62 + "+/")}
        for n in range(5)
    ]  # fmt: skip
    citation = {"type": "web_search_result_location", "url": results[0]["url"], "title": "Result 0",
                "encrypted_index": token(120, BASE62 + "+/"), "cited_text": "The index rose 2.3% on Tuesday."}  # fmt: skip
    return cassette(
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 1024, "container": f"container_011CQ{token(19)}",
         "messages": [{"role": "user", "content": f"What moved the markets today? ({i})"}],
         "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]},
        {"id": f"msg_01{token(22)}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
         "container": {"id": f"container_011CQ{token(19)}", "expires_at": "2025-05-01T12:00:00Z"},
         "content": [
             {"type": "server_tool_use", "id": f"srvtoolu_01{token(22)}", "name": "web_search",
              "input": {"query": "markets today"}},
             {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_01{token(22)}", "content": results},
             {"type": "text", "text": f"Stocks rose (see {results[1]['url']}).", "citations": [citation]},
         ],
         "usage": {"input_tokens": 2100, "output_tokens": 90, "server_tool_use": {"web_search_requests": 1}}},
    )  # fmt: skip


def openai_responses_web_search() -> dict:
    url = search_url()
    return cassette(
        "api.openai.com",
        "/v1/responses",
        {"model": "gpt-4.1", "tools": [{"type": "web_search_preview"}], "input": "Latest news on fusion?",
         "previous_response_id": f"resp_{token(48, '0123456789abcdef')}"},
        {"id": f"resp_{token(48, '0123456789abcdef')}", "object": "response", "model": "gpt-4.1-2025-04-14",
         "output": [
             {"type": "web_search_call", "id": f"ws_{token(48, '0123456789abcdef')}", "status": "completed"},
             {"type": "reasoning", "id": f"rs_{token(48, '0123456789abcdef')}",
              "encrypted_content": token(400, BASE62 + "+/=")},
             {"type": "message", "id": f"msg_{token(48, '0123456789abcdef')}", "role": "assistant",
              "content": [{"type": "output_text",
                           "text": f"A new record was set ([{token(6)}.com]({url})).",
                           "annotations": [{"type": "url_citation", "url": url, "title": "Fusion record",
                                            "start_index": 27, "end_index": 80}]}]},
         ]},
    )  # fmt: skip


def openai_image() -> dict:
    host = "oaidalleapiprodscus.blob.core.windows.net"
    url = sas_url(host, f"private/org-{token(24)}/user-{token(24)}/img-{token(24)}.png")
    return cassette(
        "api.openai.com",
        "/v1/images/generations",
        {"model": "dall-e-3", "prompt": "a lighthouse at dusk", "n": 1, "size": "1024x1024"},
        {"created": 1736500351, "data": [{"url": url, "revised_prompt": "A lighthouse on a cliff at dusk."}]},
    )


def openai_tool_calls() -> dict:
    call = f"call_{token(24)}"
    return cassette(
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o-mini", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "tool_calls": [{"id": call, "type": "function",
                                                  "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
            {"role": "tool", "tool_call_id": call, "content": '{"temp": 18}'}],
         "tools": [{"type": "function", "function": {"name": "login", "parameters": {
             "type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}}}]},
        {"id": f"chatcmpl-{token(29)}", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
         "system_fingerprint": f"fp_{token(10, '0123456789abcdef')}",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "18 °C."}}],
         "usage": {"prompt_tokens": 80, "completion_tokens": 4, "total_tokens": 84}},
    )  # fmt: skip


def anthropic_vision_and_thinking() -> dict:
    image = png(24, 24)
    return cassette(
        "api.anthropic.com",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
         "messages": [{"role": "user", "content": [
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png(1, 1)}},
             {"type": "text", "text": "What is in these images?"}]}]},
        {"id": f"msg_01{token(22)}", "type": "message", "role": "assistant",
         "content": [{"type": "thinking", "thinking": "Noise.", "signature": token(300, BASE62 + "+/=")},
                     {"type": "tool_use", "id": f"toolu_01{token(22)}", "name": "describe", "input": {}},
                     {"type": "text", "text": "Random pixels."}]},
    )  # fmt: skip


def openai_vision_data_uri() -> dict:
    return cassette(
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Describe it"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png(2, 2)}", "detail": "low"}}]}]},
        {"id": f"chatcmpl-{token(29)}", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A dot."}}]},
    )  # fmt: skip


def openai_stream() -> dict:
    chunk_id = f"chatcmpl-{token(29)}"
    events = [
        "data: " + json.dumps({"id": chunk_id, "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                               "system_fingerprint": "fp_44709d6fcb",
                               "choices": [{"index": 0, "delta": {"content": word}}]}) + "\n\n"
        for word in ["Hello", " there"]
    ] + ["data: [DONE]\n\n"]  # fmt: skip
    return cassette(
        "api.openai.com",
        "/v1/chat/completions",
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        None,
        events=events,
    )


def gemini_grounding() -> dict:
    redirect = f"https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQ{token(160, BASE62 + '_-')}"
    return cassette(
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "Who won yesterday?"}]}], "tools": [{"google_search": {}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Team A.", "thoughtSignature": token(200)}]},
                         "groundingMetadata": {"groundingChunks": [{"web": {"uri": redirect, "title": "espn.com"}}],
                                               "webSearchQueries": ["who won yesterday"]}}],
         "modelVersion": "gemini-2.5-flash", "responseId": token(22)},
    )  # fmt: skip


def files_and_batches() -> dict:
    return cassette(
        "api.openai.com",
        "/v1/batches",
        {"input_file_id": f"file-{token(22)}", "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        {"id": f"batch_{token(32, '0123456789abcdef')}", "object": "batch", "input_file_id": f"file-{token(22)}",
         "output_file_id": None, "status": "validating", "metadata": {"run": "nightly"}},
    )  # fmt: skip


# --- planted secrets: (name, cassette, expected (path, rule)) ------------------------------------------------

RANDOM_TOKEN = token(28)
PLANTED = {
    "openai-key-in-prompt": (
        lambda: cassette("api.openai.com", "/v1/chat/completions",
                         {"model": "gpt-4o-mini", "messages": [{"role": "user",
                          "content": f"Why does sk-proj-{token(40)}{token(8, string.digits)} fail?"}]},
                         {"choices": []}),
        ("request.body.messages[0].content", "openai-key"),
    ),
    "unnamed-random-token-in-prompt": (
        lambda: cassette("api.openai.com", "/v1/chat/completions",
                         {"model": "gpt-4o-mini", "messages": [{"role": "user",
                          "content": f"Deploy with token {RANDOM_TOKEN} tonight"}]}, {"choices": []}),
        ("request.body.messages[0].content", "high-entropy"),
    ),
    "password-field": (
        lambda: cassette("api.anthropic.com", "/v1/messages",
                         {"model": "claude-haiku-4-5", "messages": [], "metadata": {"password": "correct horse staple"}},
                         {"content": []}),
        ("request.body.metadata.password", "credential-field"),
    ),
    "aws-key-in-a-url-field": (
        lambda: cassette("api.openai.com", "/v1/responses", {"model": "gpt-4.1", "input": "fetch"},
                         {"output": [{"type": "url_citation",
                                      "url": "https://bucket.s3.amazonaws.com/o?AWSAccessKeyId=AKIAIOSFODNN7FAKE123"}]}),
        ("response.body.output[0].url", "aws-access-key-id"),
    ),
    "github-token-in-a-tool-result": (
        lambda: cassette("api.anthropic.com", "/v1/messages",
                         {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": f"toolu_01{token(22)}",
                              "content": f"GITHUB_TOKEN=ghp_{token(36)}"}]}]},
                         {"content": []}),
        ("request.body.messages[0].content[0].content", "github-token"),
    ),
    "jwt-in-a-stream": (
        lambda: cassette("api.openai.com", "/v1/chat/completions", {"model": "gpt-4o-mini", "stream": True}, None,
                         events=["data: " + json.dumps({"id": f"chatcmpl-{token(29)}", "choices": [{"delta": {
                             "content": f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOi{token(20)}.{token(30)}"}}]}) + "\n\n"]),
        ("response.body[0].text[line 1].choices[0].delta.content", "jwt"),
    ),
    "client-secret-nested": (
        lambda: cassette("api.openai.com", "/v1/responses",
                         {"model": "gpt-4.1", "tools": [{"type": "mcp", "server_url": "https://mcp.example.com/sse",
                          "headers": {"Client-Secret": "s3cr3t-but-no-shape"}}]}, {"output": []}),
        ("request.body.tools[0].headers.Client-Secret", "credential-field"),
    ),
}  # fmt: skip


def build_folder(root: Path) -> dict[str, tuple[str, str]]:
    """Write the realistic recordings and the planted secrets; returns {file: expected finding} for the planted."""
    clean = [anthropic_web_search(i) for i in range(6)] + [
        openai_responses_web_search(), openai_image(), openai_image(), openai_tool_calls(),
        anthropic_vision_and_thinking(), openai_vision_data_uri(), openai_stream(), gemini_grounding(),
        files_and_batches(),
    ]  # fmt: skip
    for n, content in enumerate(clean):
        write_atomic(root / "clean" / f"{n:02}-{content['key']}.json", dumps(content))
    expected = {}
    for name, (make, finding) in PLANTED.items():
        path = root / "planted" / f"{name}.json"
        write_atomic(path, dumps(make()))
        expected[str(path)] = finding
    return expected


def test_a_realistic_folder_scans_with_no_false_positive_and_every_planted_secret_found(tmp_path, capsys):
    expected = build_folder(tmp_path)
    rules = parse_rules([])
    files = scan.files_to_scan([tmp_path])
    assert len(files) == 15 + len(PLANTED)
    findings = [f for file, root in files for f in scan.scan_file(file, root, rules, entropy=True)]
    false_positives = [str(f) for f in findings if f.file not in expected]
    assert false_positives == []
    assert {f.file: (f.path, f.rule) for f in findings} == expected
    assert len(findings) == len(PLANTED)  # one finding each: precision 1.0, recall 1.0

    code = main(["scan", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{len(PLANTED)} finding(s) in {len(PLANTED)} of {len(files)} file(s)" in out
    assert RANDOM_TOKEN not in out


def test_the_realistic_clean_recordings_alone_pass(tmp_path, capsys):
    build_folder(tmp_path)
    assert main(["scan", str(tmp_path / "clean")]) == 0
    assert "no secrets found in 15 file(s)" in capsys.readouterr().out


def test_a_file_scan_cannot_read_safely_is_a_finding_not_a_hang(tmp_path, capsys):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    assert main(["scan", str(fifo), str(zero)]) == 1  # files named explicitly, as pre-commit passes them
    out = capsys.readouterr().out
    assert f"{fifo}: (file): unreadable: is not a regular file (a fifo)" in out
    assert f"{zero}: (file): unreadable: resolves to /dev/zero, outside the cassette folder {tmp_path}" in out
