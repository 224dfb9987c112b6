"""A fake of the realtime WebSocket APIs, run as its own process behind the proxy (the test machines reach no provider).

    python tests/support/fake_realtime.py --ready-file F [--cert C --key K]

It listens on 127.0.0.1 on a free port (ws, or wss with a certificate), writes
{"pid", "port", "scheme"} to the ready file, and speaks two shapes:

- OpenAI Realtime, on a path ending in `/realtime` (`?model=…`): `session.created`
  on connect; `session.update` → `session.updated`; `conversation.item.create`
  → `conversation.item.created`; `input_audio_buffer.append`/`.commit` →
  `input_audio_buffer.committed`; `response.create` → `response.created`, the
  answer "Echo: <the last user text>" as `response.output_text.delta` events
  (or, with `output_modalities: ["audio"]`, `response.output_audio.delta` with
  base64 PCM and `response.output_audio_transcript.delta`), then `response.done`;
  a user text mentioning the weather gets a `get_weather` function call instead.
- Gemini Live, on a path containing `BidiGenerateContent` (`?key=…`): `setup` →
  `setupComplete`; `clientContent` → `serverContent` chunks (text, then audio
  as `inlineData`) ending in `turnComplete`; a user text mentioning the weather
  gets a `toolCall`; `toolResponse` → text and `turnComplete`. Its server
  messages are binary frames holding JSON, as Gemini sends them.
- The Responses API's WebSocket mode, on a path ending in `/responses`: each
  `response.create` → the events its HTTP twin streams, up to `response.completed`,
  answering "Echo: <the last user text>" (openai-agents' websocket transport).

Server ids (`event_…`, `item_…`, `resp_…`) are random, as the real APIs' are: a
replay that sends the recorded ones is told from a live answer. A user text
containing `drop the line` makes the server drop the TCP connection without a
close frame. `GET /__fake__/stats` answers {"count": sessions opened,
"messages": client messages received, "keys": API keys seen (for the test to
prove the client sent one), "last_event_ids": …}.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import ssl
import uuid
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed


class State:
    count = 0
    messages = 0
    keys: list[str] = []  # noqa: RUF012 - one process, one state


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


AUDIO = bytes(range(256)) * 24
"""6 KB of "PCM": its base64 (8 KB) is long enough to go to a session's sidecar."""


def user_text(item: dict) -> str:
    return " ".join(
        part.get("text", "") for part in item.get("content", []) if isinstance(part, dict) and part.get("text")
    )


async def openai_realtime(ws: ServerConnection, model: str) -> None:
    session = {
        "id": new_id("sess"),
        "object": "realtime.session",
        "model": model,
        "instructions": "",
        "type": "realtime",
    }
    last_text = ""
    modalities = ["text"]

    async def send(event: dict) -> None:
        await ws.send(json.dumps({"event_id": new_id("event"), **event}))

    await send({"type": "session.created", "session": session})
    async for raw in ws:
        State.messages += 1
        event = json.loads(raw)
        kind = event.get("type")
        if kind == "session.update":
            session.update(event.get("session", {}))
            modalities = session.get("output_modalities") or modalities
            await send({"type": "session.updated", "session": session})
        elif kind == "conversation.item.create":
            item = {"id": new_id("item"), "object": "realtime.item", "status": "completed", **event["item"]}
            last_text = user_text(item) or last_text
            await send({"type": "conversation.item.created", "previous_item_id": None, "item": item})
        elif kind == "input_audio_buffer.append":
            last_text = f"{len(base64.b64decode(event['audio']))} bytes of audio"
        elif kind == "input_audio_buffer.commit":
            await send({"type": "input_audio_buffer.committed", "item_id": new_id("item"), "previous_item_id": None})
        elif kind == "response.create":
            if "drop the line" in last_text:
                ws.transport.abort()
                return
            await respond(send, last_text, modalities)


async def respond(send, text: str, modalities: list[str]) -> None:
    response_id, item_id = new_id("resp"), new_id("item")
    await send(
        {
            "type": "response.created",
            "response": {"id": response_id, "object": "realtime.response", "status": "in_progress", "output": []},
        }
    )
    if "weather" in text.lower():
        call = {"type": "function_call", "id": item_id, "call_id": new_id("call"), "name": "get_weather"}
        await send(
            {
                "type": "response.output_item.added",
                "response_id": response_id,
                "output_index": 0,
                "item": {**call, "arguments": ""},
            }
        )
        for piece in ('{"city": ', '"Paris"}'):
            await send(
                {
                    "type": "response.function_call_arguments.delta",
                    "response_id": response_id,
                    "item_id": item_id,
                    "output_index": 0,
                    "call_id": call["call_id"],
                    "delta": piece,
                }
            )
        await send(
            {
                "type": "response.function_call_arguments.done",
                "response_id": response_id,
                "item_id": item_id,
                "output_index": 0,
                "call_id": call["call_id"],
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            }
        )
        output = [{**call, "arguments": '{"city": "Paris"}', "status": "completed"}]
    else:
        answer = f"Echo: {text}"
        where = {"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0}
        for word in answer.split(" "):
            if "audio" in modalities:
                await send({"type": "response.output_audio.delta", **where, "delta": base64.b64encode(AUDIO).decode()})
                await send({"type": "response.output_audio_transcript.delta", **where, "delta": word + " "})
            else:
                await send({"type": "response.output_text.delta", **where, "delta": word + " "})
        output = [
            {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
            }
        ]
    await send(
        {
            "type": "response.done",
            "response": {
                "id": response_id,
                "object": "realtime.response",
                "status": "completed",
                "output": output,
                "usage": {"total_tokens": 7},
            },
        }
    )


async def gemini_live(ws: ServerConnection) -> None:
    async def send(message: dict) -> None:
        await ws.send(json.dumps(message).encode())  # binary frames holding JSON, as Gemini sends them

    async for raw in ws:
        State.messages += 1
        message = {_camel(name): value for name, value in json.loads(raw).items()}  # proto JSON: either spelling
        if "setup" in message:
            await send({"setupComplete": {}})
        elif "clientContent" in message:
            text = " ".join(
                part.get("text", "")
                for turn in message["clientContent"].get("turns", [])
                for part in turn.get("parts", [])
            )
            if "drop the line" in text:
                ws.transport.abort()
                return
            if "weather" in text.lower():
                await send(
                    {
                        "toolCall": {
                            "functionCalls": [{"id": new_id("fc"), "name": "get_weather", "args": {"city": "Paris"}}]
                        }
                    }
                )
                continue
            for word in f"Echo: {text}".split(" "):
                await send({"serverContent": {"modelTurn": {"parts": [{"text": word + " "}]}}})
            audio = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": base64.b64encode(AUDIO).decode()}}
            await send({"serverContent": {"modelTurn": {"parts": [audio]}}})
            await send({"serverContent": {"turnComplete": True}})
        elif "toolResponse" in message:
            await send({"serverContent": {"modelTurn": {"parts": [{"text": "It is sunny in Paris."}]}}})
            await send({"serverContent": {"turnComplete": True}})


def responses_input_text(message: dict) -> str:
    """The last user text of a `response.create` (`input`: a string or a list of items)."""
    given = message.get("input")
    if isinstance(given, str):
        return given
    texts = [
        item["content"] if isinstance(item.get("content"), str) else user_text(item)
        for item in given or []
        if isinstance(item, dict) and item.get("role") == "user"
    ]
    return texts[-1] if texts else ""


async def openai_responses(ws: ServerConnection) -> None:
    """The Responses API's WebSocket mode: each `response.create` answered with the events its HTTP twin streams,
    up to `response.completed`; the answer is "Echo: <the last user text>" and its ids are new each time."""
    async for raw in ws:
        State.messages += 1
        message = json.loads(raw)
        if message.get("type") != "response.create":
            continue
        text = "Echo: " + responses_input_text(message)
        response = {"id": new_id("resp"), "object": "response", "created_at": 1700000000, "model": message.get("model"),
                    "status": "in_progress", "output": [], "usage": None,
                    "previous_response_id": message.get("previous_response_id")}  # fmt: skip
        item_id = new_id("msg")
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        usage = {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
        steps = [
            {"type": "response.created", "response": response},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
            *({"type": "response.output_text.delta", **where, "delta": word + " "} for word in text.split()),
            {"type": "response.output_text.done", **where, "text": text},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {**response, "status": "completed", "output": [item], "usage": usage}},
        ]  # fmt: skip
        for i, step in enumerate(steps):
            await ws.send(json.dumps({**step, "sequence_number": i}))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


async def handler(ws: ServerConnection) -> None:
    url = urlsplit(ws.request.path)
    query = parse_qs(url.query)
    State.count += 1
    key = (
        query.get("key", [""])[0]
        or ws.request.headers.get("x-goog-api-key", "")
        or ws.request.headers.get("authorization", "")
    )
    if key:
        State.keys.append(key)
    try:
        if "BidiGenerateContent" in url.path:
            await gemini_live(ws)
        elif url.path.endswith("/responses"):
            await openai_responses(ws)
        else:
            await openai_realtime(ws, query.get("model", [""])[0])
    except ConnectionClosed:
        pass


def process_request(connection: ServerConnection, request):
    if request.path == "/__fake__/stats":
        stats = {"count": State.count, "messages": State.messages, "keys": State.keys}
        return connection.respond(HTTPStatus.OK, json.dumps(stats) + "\n")
    return None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    tls = None
    if args.cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.cert, args.key)
    async with serve(handler, "127.0.0.1", 0, ssl=tls, process_request=process_request) as server:
        port = server.sockets[0].getsockname()[1]
        ready = {"pid": os.getpid(), "port": port, "scheme": "https" if tls else "http"}
        partial = f"{args.ready_file}.tmp"
        with open(partial, "w") as f:
            json.dump(ready, f)
        os.replace(partial, args.ready_file)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
