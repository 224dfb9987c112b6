"""A small fake of the LLM APIs, run as its own process behind the proxy (the test machines reach no provider).

    python tests/support/fake_upstream.py --ready-file F [--cert C --key K]

It listens on 127.0.0.1 on a free port, writes {"pid", "port", "scheme"} to the
ready file, and answers like OpenAI, Anthropic and Ollama do, echoing the last
user message so that a test can tell one answer from another. Every answer
carries `x-fake-count`, the number of API requests served so far; the control
endpoint `GET /__fake__/stats` reports them without counting itself.

Request headers steer it: `x-fake-status: 429` answers that status (with
`retry-after: 7` on 429), `x-fake-delay: 0.5` waits before answering, `x-fake-numbered: 1`
prefixes the echo with the request count (different answers to identical requests), `x-fake-reset: 1`
sends the headers and part of the body, then resets the connection.
An embeddings request with `dimensions` gets real-shaped vectors: that many values,
packed as base64 float32 when `encoding_format` is base64 (the openai SDK's default).

A request with `"stream": true` gets a stream shaped like the real API's:
OpenAI chat (`data:` lines, a usage chunk with `stream_options.include_usage`,
then `data: [DONE]`), the Responses API and Anthropic messages (`event:` +
`data:` pairs), Ollama `/api/chat` (NDJSON, `application/x-ndjson`). Amazon Bedrock's runtime
paths (`/model/<id>/converse`, `/invoke`, `/converse-stream`,
`/invoke-with-response-stream`) answer like Bedrock, streams as AWS
event-stream frames with valid CRCs (`application/vnd.amazon.eventstream`).
Gemini and Vertex AI `…:generateContent` answer a `candidates` JSON (a `functionCall` without an id, as
Gemini answers, for the first declared function while no function response came back),
`…:streamGenerateContent?alt=sse` a `data:` line per word, as google-genai reads them, and without
`alt=sse` a JSON array of one such answer (as llm-gemini reads it). The Responses API
and Ollama's `/api/chat` answer whole JSON too when not streamed. An OAuth token endpoint (a path ending in
`/token`) answers a live-looking token, `LIVE_TOKEN`, which the proxy must never store or log;
`GET /<tenant>/v2.0/.well-known/openid-configuration` the discovery document MSAL reads first. Stream
headers: `x-fake-event-gap: 0.2` pauses between events, `x-fake-crlf: 1` ends
lines with CRLF, `x-fake-break-after: 3` drops the connection after 3 events
(no end of message), `x-fake-hold-open: 2` keeps the connection open that long
after the last event, `x-fake-stream-error: 1` ends the stream with the API's
in-stream error (Anthropic `error` event, Ollama `{"error"}` line, OpenAI chat
without `[DONE]`). A client that accepts gzip gets a gzip stream, as from a real API;
`x-fake-gzip: 1` gzips a JSON answer too (content-encoding: gzip), as real APIs do.

Behaviour rules switch the answers of a running fake without touching the requests (a provider changing
under recorded cassettes): `POST /__fake__/behaviour {"rules": [...]}` replaces them (`[]`: the default
answers again). A rule applies to every API request whose body contains its `when` text, in order:
`status` (+ `body`, `headers`) answers that instead, `times` limits how often a rule applies (a 429 then
success), `text` replaces the echo, `add` ({"dotted.path": value}, list items by number) and `drop`
(["dotted.path"]) edit the JSON answer, or each stream event's JSON whose `type`/`object` is `event`
(every event when the rule names none). The request log's entries carry `at`, the time they arrived.
"""

import argparse
import base64
import gzip
import json
import math
import os
import socket
import ssl
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    lock = threading.Lock()
    count = 0
    log: list[dict] = []  # noqa: RUF012 - one process, one state
    rules: list[dict] = []  # noqa: RUF012 - the behaviour rules, and how often each has applied
    uses: list[int] = []  # noqa: RUF012


def matching_rules(raw: bytes) -> list[dict]:
    """The behaviour rules that apply to this request (each one's use counted against its `times`)."""
    text = raw.decode("utf-8", "replace")
    chosen = []
    with State.lock:
        for index, rule in enumerate(State.rules):
            if str(rule.get("when", "")) in text and State.uses[index] < rule.get("times", float("inf")):
                State.uses[index] += 1
                chosen.append(rule)
    return chosen


def _walk_to(value, path: str):
    *parents, last = path.split(".")
    for name in parents:
        value = value[int(name)] if isinstance(value, list) else value.setdefault(name, {})
    return value, int(last) if isinstance(value, list) else last


def edited(payload, rules: list[dict]):
    """A JSON answer or stream event with the rules' `add` and `drop` edits (those for its event type)."""
    if not isinstance(payload, dict):
        return payload
    kind = payload.get("type") or payload.get("object")
    for rule in rules:
        if rule.get("event") not in (None, kind):
            continue
        for path, value in (rule.get("add") or {}).items():
            target, name = _walk_to(payload, path)
            target[name] = value
        for path in rule.get("drop") or []:
            try:
                target, name = _walk_to(payload, path)
                del target[name]
            except (KeyError, IndexError, TypeError):
                pass
    return payload


def edited_event(event, rules: list[dict]):
    """An SSE event or NDJSON line with its JSON edited; framing, `[DONE]` and binary frames kept as they are."""
    if not rules or not isinstance(event, str):
        return event
    lines = event.split("\n")
    for i, line in enumerate(lines):
        data = line[6:] if line.startswith("data: ") else line if line.startswith("{") else None
        if data is None:
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            continue
        text = json.dumps(edited(payload, rules))
        lines[i] = f"data: {text}" if line.startswith("data: ") else text
    return "\n".join(lines)


LIVE_TOKEN = "ya29.fake-LIVE-access-token-DO-NOT-STORE-0123456789"


def last_user_text(body: dict) -> str:
    for content in reversed(body.get("contents") or []):  # Gemini: contents[].parts[].text
        if not isinstance(content, dict) or content.get("role", "user") != "user":
            continue
        parts = [part for part in content.get("parts", []) if isinstance(part, dict)]
        if any("text" in part for part in parts):  # not a function response
            return " ".join(part.get("text", "") for part in parts)
    messages = body.get("messages") or (body["input"] if isinstance(body.get("input"), list) else [])
    for message in reversed(messages):  # chat messages, or the Responses API's input items (not embeddings' texts)
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return str(body.get("input", body.get("prompt", "")))


def openai_chat(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": body.get("model", "gpt-fake"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())},
    }


def responses_message(body: dict, text: str) -> dict:
    """A Responses API answer (`POST /v1/responses`, not streamed), as openai-agents reads it."""
    n = len(text.split())
    return {
        "id": "resp_fake", "object": "response", "created_at": 1700000000, "model": body.get("model"),
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"id": "msg_fake", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": n, "total_tokens": 5 + n,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip


def ollama_message(body: dict, text: str) -> dict:
    """Ollama's `/api/chat` answer with `"stream": false`."""
    return {"model": body.get("model"), "created_at": "2024-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": text}, "done": True, "done_reason": "stop",
            "prompt_eval_count": 5, "eval_count": len(text.split())}  # fmt: skip


def gemini_tool_call(body: dict) -> dict | None:
    """A `functionCall` without an id (as Gemini answers) for the first declared function, when the request declares
    tools and its last turn is not a function response; else None (answer with text)."""
    declared = [f for tool in body.get("tools") or [] for f in tool.get("functionDeclarations") or []]
    last = (body.get("contents") or [{}])[-1]
    answered = ("functionResponse", "function_response")  # camelCase from google-genai, snake_case from llm-gemini
    if not declared or any(name in part for part in last.get("parts") or [] for name in answered):
        return None
    call = {"functionCall": {"name": declared[0]["name"], "args": {}}}
    return {**gemini_response(""), "candidates": [{"content": {"role": "model", "parts": [call]}, "index": 0,
                                                   "finishReason": "STOP"}]}  # fmt: skip


def anthropic_message(body: dict, text: str) -> dict:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": len(text.split())},
    }


def vector(index: int, dimensions: int | None, encoding: str | None) -> list[float] | str:
    if not dimensions:
        return [0.1 * (index + 1), 0.2, 0.3]
    values = [math.sin((index + 1) * (k + 1)) / 10 for k in range(dimensions)]
    return base64.b64encode(struct.pack(f"<{dimensions}f", *values)).decode() if encoding == "base64" else values


def embeddings(body: dict) -> dict:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    size, encoding = body.get("dimensions"), body.get("encoding_format")
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector(i, size, encoding)} for i in range(len(inputs))
        ],
        "model": body.get("model", "embed-fake"),
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


def gemini_response(text: str, finish: bool = True) -> dict:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    n = len(text.split())
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": n, "totalTokenCount": 5 + n},
        "modelVersion": "gemini-fake",
        "responseId": "fake-response",
    }


def gemini_stream(text: str) -> list[str]:
    pieces = words(text)
    return [
        f"data: {json.dumps(gemini_response(piece, finish=i == len(pieces) - 1))}\r\n\r\n"
        for i, piece in enumerate(pieces)
    ]


def token_answer(path: str) -> dict:
    answer = {"access_token": LIVE_TOKEN, "expires_in": 3599, "token_type": "Bearer"}
    return {**answer, "ext_expires_in": 3599} if "/oauth2/v2.0/" in path else answer


def openid_configuration(path: str) -> dict:
    tenant = path.strip("/").split("/")[0]
    authority = f"https://login.microsoftonline.com/{tenant}"
    return {
        "token_endpoint": f"{authority}/oauth2/v2.0/token",
        "authorization_endpoint": f"{authority}/oauth2/v2.0/authorize",
        "device_authorization_endpoint": f"{authority}/oauth2/v2.0/devicecode",
        "issuer": f"{authority}/v2.0",
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
    }


def words(text: str) -> list[str]:
    """The pieces a stream sends: words with their following space, so joining them gives the text back."""
    parts = text.split(" ")
    return [part + " " for part in parts[:-1]] + [parts[-1]]


def sse(data: dict | str, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


def openai_chat_stream(body: dict, text: str, error: bool) -> list[str]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": body.get("model")}
    usage = (body.get("stream_options") or {}).get("include_usage")
    extra = {"usage": None} if usage else {}

    def chunk(delta: dict, finish: str | None = None) -> str:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in words(text)]
    if error:
        return events  # cut short: no finish_reason, no [DONE]
    events.append(chunk({}, "stop"))
    if usage:
        n = len(text.split())
        events.append(
            sse({**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}})
        )
    return [*events, sse("[DONE]")]


def responses_stream(body: dict, text: str) -> list[str]:
    n = len(text.split())
    response = {"id": "resp_fake", "object": "response", "created_at": 1700000000, "model": body.get("model"),
                "status": "in_progress", "output": [], "usage": None}  # fmt: skip
    item = {"id": "msg_fake", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    usage = {"input_tokens": 5, "output_tokens": n, "total_tokens": 5 + n,
             "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    steps = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.content_part.added", {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": part}),
        *(
            (
                "response.output_text.delta",
                {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": piece},
            )
            for piece in words(text)
        ),
        ("response.output_text.done", {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "text": text}),
        (
            "response.content_part.done",
            {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "part": done_part},
        ),
        ("response.output_item.done", {"output_index": 0, "item": done_item}),
        (
            "response.completed",
            {"response": {**response, "status": "completed", "output": [done_item], "usage": usage}},
        ),
    ]
    return [sse({"type": name, "sequence_number": i, **data}, name) for i, (name, data) in enumerate(steps)]


def anthropic_stream(body: dict, text: str, error: bool) -> list[str]:
    message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model"), "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    events = [
        sse({"type": "message_start", "message": message}, "message_start"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    if error:
        return [
            *events,
            sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
        ]
    events += [
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            "content_block_delta",
        )
        for piece in words(text)
    ]
    return [
        *events,
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(text.split())},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]


def ollama_stream(body: dict, text: str, error: bool) -> list[str]:
    base = {"model": body.get("model"), "created_at": "2024-01-01T00:00:00Z"}
    lines = [{**base, "message": {"role": "assistant", "content": piece}, "done": False} for piece in words(text)]
    if error:
        lines.append({"error": "fake upstream: model runner stopped"})
    else:
        lines.append({**base, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                      "prompt_eval_count": 5, "eval_count": len(text.split())})  # fmt: skip
    return [json.dumps(line) + "\n" for line in lines]


def aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (string headers), built here rather than by the addon's code under test."""
    encoded = b"".join(
        struct.pack("!B", len(name)) + name.encode() + struct.pack("!BH", 7, len(value.encode())) + value.encode()
        for name, value in headers.items()
    )
    prelude = struct.pack("!II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack("!I", zlib.crc32(message))


def aws_event(event_type: str, payload: dict) -> bytes:
    """An event frame as Bedrock sends it: compact JSON with a `p` padding field, three string headers."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    data = {**payload, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[: 4 + len(event_type)]}
    return aws_frame(headers, json.dumps(data, separators=(",", ":")).encode())


def bedrock_converse(text: str) -> dict:
    n = len(text.split())
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 5, "outputTokens": n, "totalTokens": 5 + n},
        "metrics": {"latencyMs": 42},
    }


def bedrock_converse_stream(text: str) -> list[bytes]:
    n = len(text.split())
    return [
        aws_event("messageStart", {"role": "assistant"}),
        *(aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}) for piece in words(text)),
        aws_event("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event("messageStop", {"stopReason": "end_turn"}),
        aws_event(
            "metadata",
            {"usage": {"inputTokens": 5, "outputTokens": n, "totalTokens": 5 + n}, "metrics": {"latencyMs": 42}},
        ),
    ]


def bedrock_invoke_stream(body: dict, text: str) -> list[bytes]:
    """InvokeModelWithResponseStream for an Anthropic model: each `chunk` carries a Messages stream event, base64."""
    chunks = []
    for event in anthropic_stream(body, text, error=False):
        data = json.loads(event.split("data: ", 1)[1])
        compact = json.dumps(data, separators=(",", ":")).encode()
        chunks.append(aws_event("chunk", {"bytes": base64.b64encode(compact).decode()}))
    return chunks


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: with Nagle's algorithm, the client's delayed ACK
    # adds 40 ms to every request on a reused connection.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # quiet: tests read the stats endpoint instead
        pass

    rules: tuple[dict, ...] = ()
    """The behaviour rules that apply to the request being answered."""

    def do_GET(self):
        if self.path.startswith("/__fake__/stats"):
            with State.lock:
                self.send_json(200, {"count": State.count, "log": State.log})
            return
        self.handle_api(b"")

    def do_POST(self):
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            self.handle_api(b"".join(chunks))
            return
        length = int(self.headers.get("content-length") or 0)
        if self.path.startswith("/__fake__/behaviour"):
            rules = json.loads(self.rfile.read(length) or b"{}").get("rules") or []
            with State.lock:
                State.rules, State.uses = list(rules), [0] * len(rules)
            self.send_json(200, {"rules": len(rules)})
            return
        self.handle_api(self.rfile.read(length))

    do_PUT = do_PATCH = do_DELETE = do_POST

    def handle_api(self, raw: bytes):
        with State.lock:
            State.count += 1
            count = State.count
            State.log.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": raw.decode("utf-8", "replace"),
                    "at": time.time(),
                }
            )
        self.rules = tuple(matching_rules(raw))
        delay = float(self.headers.get("x-fake-delay") or 0)
        if delay:
            time.sleep(delay)
        if self.headers.get("x-fake-reset"):
            self.wfile.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 999\r\n\r\n{"id":')
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        ruled = next((rule for rule in self.rules if rule.get("status")), None)
        if ruled:
            error = ruled.get("body") or {"error": {"message": f"fake upstream rule {ruled['status']}"}}
            self.send_json(int(ruled["status"]), error, count, ruled.get("headers") or {})
            return
        forced = int(self.headers.get("x-fake-status") or 0)
        if forced:
            extra = {"retry-after": "7"} if forced == 429 else {}
            error = {"error": {"message": f"fake upstream error {forced}", "type": "fake_error", "code": forced}}
            self.send_json(forced, error, count, extra)
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        text = f"echo: {last_user_text(body)}" if isinstance(body, dict) else "echo: ?"
        text = next((rule["text"] for rule in reversed(self.rules) if "text" in rule), text)
        if self.headers.get("x-fake-numbered"):
            text = f"#{count} {text}"
        path = self.path.split("?", 1)[0]
        error = self.headers.get("x-fake-stream-error") == "1"
        if path.startswith("/model/") and isinstance(body, dict):  # Amazon Bedrock runtime
            aws = {"x-amzn-requestid": f"fake-request-{count}"}
            if path.endswith("/converse"):
                self.send_json(200, bedrock_converse(text), count, aws)
            elif path.endswith("/converse-stream"):
                self.send_stream(bedrock_converse_stream(text), "application/vnd.amazon.eventstream", count, aws)
            elif path.endswith("/invoke-with-response-stream"):
                self.send_stream(bedrock_invoke_stream(body, text), "application/vnd.amazon.eventstream", count, aws)
            else:
                self.send_json(200, anthropic_message(body, text), count, aws)
        elif isinstance(body, dict) and body.get("stream") is True and path.endswith("/chat/completions"):
            self.send_stream(openai_chat_stream(body, text, error), "text/event-stream", count)
        elif isinstance(body, dict) and body.get("stream") is True and path.endswith("/responses"):
            self.send_stream(responses_stream(body, text), "text/event-stream", count)
        elif isinstance(body, dict) and body.get("stream") is True and path.endswith("/messages"):
            self.send_stream(anthropic_stream(body, text, error), "text/event-stream", count)
        elif path.endswith(":streamGenerateContent") and "alt=sse" not in self.path:
            # without alt=sse, a JSON array of responses (llm-gemini reads it with ijson)
            self.send_json(200, [gemini_tool_call(body) or gemini_response(text)], count)
        elif path.endswith(":streamGenerateContent"):
            self.send_stream(gemini_stream(text), "text/event-stream", count)
        elif path.endswith(":generateContent"):
            self.send_json(200, gemini_tool_call(body) or gemini_response(text), count)
        elif path.endswith("/.well-known/openid-configuration"):
            self.send_json(200, openid_configuration(path), count)
        elif path.endswith("/token") and self.command == "POST":
            self.send_json(200, token_answer(path), count)
        elif path == "/api/chat" and isinstance(body, dict) and body.get("stream", True):
            self.send_stream(ollama_stream(body, text, error), "application/x-ndjson", count)
        elif path == "/api/chat" and isinstance(body, dict):
            self.send_json(200, ollama_message(body, text), count)
        elif path.endswith("/responses") and isinstance(body, dict):
            self.send_json(200, responses_message(body, text), count)
        elif path.endswith("/chat/completions"):
            self.send_json(200, openai_chat(body, text), count)
        elif path.endswith("/messages"):
            self.send_json(200, anthropic_message(body, text), count)
        elif path.endswith("/embeddings"):
            self.send_json(200, embeddings(body), count)
        else:
            self.send_json(200, {"path": path, "method": self.command, "echo": raw.decode("utf-8", "replace")}, count)

    def send_stream(self, events: list[str] | list[bytes], content_type: str, count: int, extra: dict | None = None):
        """Send events as chunks over time, the way an API streams tokens (see the module docstring)."""
        gap = float(self.headers.get("x-fake-event-gap") or 0)
        break_after = int(self.headers.get("x-fake-break-after") or 0)
        hold_open = float(self.headers.get("x-fake-hold-open") or 0)
        if self.headers.get("x-fake-crlf") == "1":
            events = [event.replace("\n", "\r\n") if isinstance(event, str) else event for event in events]
        gzip = "gzip" in (self.headers.get("accept-encoding") or "")
        compressor = zlib.compressobj(wbits=31)
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.send_header("x-fake-count", str(count))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if gzip:
            self.send_header("content-encoding", "gzip")
        self.end_headers()
        self.wfile.flush()
        events = [edited_event(event, list(self.rules)) for event in events]
        for i, event in enumerate(events):
            if i and gap:
                time.sleep(gap)
            if break_after and i == break_after:
                self.close_connection = True
                self.connection.shutdown(2)  # SHUT_RDWR: drop mid-stream, with no end-of-body chunk
                return
            data = event.encode() if isinstance(event, str) else event
            if gzip:
                data = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if hold_open:
            time.sleep(hold_open)
        if gzip:
            tail = compressor.flush()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(tail), tail))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_json(self, status: int, payload: dict, count: int = 0, extra: dict | None = None):
        data = json.dumps(edited(payload, list(self.rules)) if status < 300 else payload).encode()
        if self.headers.get("x-fake-gzip") == "1":
            data = gzip.compress(data, mtime=0)
            extra = {**(extra or {}), "content-encoding": "gzip"}
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-fake-count", str(count))
        self.send_header("set-cookie", "session=fake-cookie-value")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    request_queue_size = 128
    """socketserver listens with a backlog of 5: a storm of connections through the proxy (each forwarded
    request also probes the upstream first) overflowed it under load, and a test saw mitmproxy's 502."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    scheme = "http"
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    ready = {"pid": os.getpid(), "port": server.server_address[1], "scheme": scheme}
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.replace(tmp, args.ready_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
