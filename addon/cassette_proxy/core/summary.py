"""What a cassette says, in a few fields a reviewer reads: model, first user message, finish reason, content.

Knows the request and response shapes of the APIs we record (OpenAI chat,
Responses and embeddings, Anthropic, Gemini, Ollama), whole or streamed
(read through events.py, like every reader of a stream), and falls back to nothing rather than guessing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from .stream_events import payloads, stored_events

_MODEL_IN_URL = re.compile(r"/(?:models|deployments)/([^/:?]+)")
"""Gemini names the model in the path (`/models/gemini-2.0-flash:generateContent`), Azure the deployment."""


@dataclass(frozen=True)
class RequestSummary:
    method: str
    url: str
    model: str
    first_user_message: str


@dataclass(frozen=True)
class ResponseSummary:
    status: int | None
    model: str
    finish_reason: str
    content: str


def one_line(text: str, limit: int) -> str:
    """Whitespace folded to single spaces, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text(part.get("text") if isinstance(part, dict) else part) for part in content).strip()
    return ""


def conversation(body: Any) -> list[tuple[str, str]]:
    """(role, text) of every message a request sends, in order; embeddings inputs and prompts as `input`."""
    if not isinstance(body, dict):
        return []
    turns = []
    for name in ("system", "instructions"):  # Anthropic, OpenAI Responses
        if body.get(name):
            turns.append(("system", _text(body[name])))
    messages = body.get("messages") or (body["input"] if isinstance(body.get("input"), list) else [])
    for message in messages:
        if isinstance(message, dict):
            turns.append((str(message.get("role", "")), _text(message.get("content"))))
        elif isinstance(message, str):
            turns.append(("input", message))
    for content in body.get("contents") or []:  # Gemini
        if isinstance(content, dict):
            turns.append((str(content.get("role", "user")), _text(content.get("parts"))))
    for name in ("input", "prompt"):
        if isinstance(body.get(name), str):
            turns.append(("input", body[name]))
    return turns


def first_user_message(body: Any) -> str:
    return next((text for role, text in conversation(body) if role in ("user", "input")), "")


def summarize_request(request: dict) -> RequestSummary:
    body = request.get("body") if request.get("body_format") == "json" else None
    url = request.get("url", "")
    model = body.get("model") if isinstance(body, dict) else None
    in_url = _MODEL_IN_URL.search(url)
    return RequestSummary(
        method=request.get("method", ""),
        url=url,
        model=str(model or (in_url.group(1) if in_url else "")),
        first_user_message=first_user_message(body),
    )


def _call(name: Any, arguments: Any) -> str:
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True) if arguments else ""
    return f"[call {name}] {arguments}" if name else arguments


def _embedding(vector: Any) -> str:
    """A vector is not readable; its size and a digest show whether it changed."""
    digest = hashlib.sha256(json.dumps(vector).encode()).hexdigest()[:12]
    size = f"{len(vector)} values" if isinstance(vector, list) else f"{len(str(vector))} base64 chars"
    return f"[embedding {size}, sha256 {digest}]"


def _event(event: dict) -> tuple[str, list[str], list[str]]:
    """(model, finish reasons, text pieces) of a whole response or of one stream event, for every known API."""
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    response = event.get("response") if isinstance(event.get("response"), dict) else {}
    model = event.get("model") or event.get("modelVersion") or message.get("model") or response.get("model") or ""
    texts: list[str] = []
    finishes = [event.get("stop_reason"), event.get("done_reason"), response.get("status")]
    if event.get("object") == "response":
        details = event.get("incomplete_details") or {}
        finishes.append(details.get("reason") or event.get("status"))
    for choice in event.get("choices") or []:  # OpenAI chat, whole (message) or streamed (delta)
        part = choice.get("message") or choice.get("delta") or {}
        texts.append(part.get("content") or choice.get("text") or "")
        for call in part.get("tool_calls") or []:
            function = call.get("function") or {}
            texts.append(_call(function.get("name"), function.get("arguments")))
        finishes.append(choice.get("finish_reason"))
    blocks = [event["content_block"]] if isinstance(event.get("content_block"), dict) else []
    blocks += event["content"] if isinstance(event.get("content"), list) else []
    for block in blocks:  # Anthropic message content, or a streamed block's start
        if isinstance(block, dict):
            texts.append(block.get("text") or _call(block.get("name"), block.get("input")))
    delta = event.get("delta")
    if isinstance(delta, dict):  # Anthropic stream
        texts.append(delta.get("text") or delta.get("partial_json") or "")
        finishes.append(delta.get("stop_reason"))
    elif isinstance(delta, str):  # OpenAI Responses stream
        texts.append(delta)
    for item in event.get("output") or []:  # OpenAI Responses, whole
        texts.append(_text(item.get("content")) or _call(item.get("name"), item.get("arguments")))
    for candidate in event.get("candidates") or []:  # Gemini
        for part in (candidate.get("content") or {}).get("parts") or []:
            call = part.get("functionCall") or {}
            texts.append(part.get("text") or _call(call.get("name"), call.get("args")))
        finishes.append(candidate.get("finishReason"))
    if isinstance(message.get("content"), str):  # Ollama chat
        texts.append(message["content"])
    if isinstance(event.get("response"), str):  # Ollama generate
        texts.append(event["response"])
    if event.get("object") == "list":  # OpenAI embeddings
        texts += [_embedding(item["embedding"]) for item in event.get("data") or [] if "embedding" in item]
    return str(model), [str(f) for f in finishes if f], [t for t in texts if isinstance(t, str) and t]


def summarize_response(response: dict) -> ResponseSummary:
    body = response.get("body")
    streamed = stored_events(response)
    if streamed is not None:
        events = [event for event in payloads(streamed) if isinstance(event, dict)]
    elif response.get("body_format") == "json":
        events = [body] if isinstance(body, dict) else []
    else:
        events = []
    model, finishes, texts = "", [], []
    for event in events:
        event_model, event_finishes, event_texts = _event(event)
        model = model or event_model
        finishes += event_finishes
        texts += event_texts
    return ResponseSummary(
        status=response.get("status"),
        model=model,
        finish_reason=finishes[-1] if finishes else "",
        content="".join(texts) if len(events) > 1 else "\n".join(texts),
    )
