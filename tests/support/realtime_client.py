"""Realtime clients as a user's test suite runs them: the openai SDK, the `websockets` library, google-genai.

    python tests/support/realtime_client.py openai|gemini|genai TEXT [--model M] [--event-ids PREFIX] [--audio]

Each runs one conversation (a session update or setup, a user text, the answer; a
user text about the weather gets a tool call, which `gemini` answers) through
whatever the environment points it at (HTTPS_PROXY and SSL_CERT_FILE, or
OPENAI_BASE_URL), and prints one JSON object: {"events": every server message,
parsed, in order; "closed": the close code and reason if the server closed}.
Client code only: nothing here knows about the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os

FAKE_OPENAI_KEY = "sk-fake-openai-DO-NOT-STORE-0123456789abcdef"
FAKE_GEMINI_KEY = "AIzaFAKE-gemini-DO-NOT-STORE-0123456789abc"


async def openai_session(text: str, model: str = "gpt-realtime", event_ids: str = "", audio: bool = False) -> dict:
    import openai
    import websockets

    client = openai.AsyncOpenAI(api_key=os.environ.get("OPENAI_API_KEY", FAKE_OPENAI_KEY))
    events, closed = [], None

    def with_id(event: dict, n: int) -> dict:
        return {**event, "event_id": f"{event_ids}_{n}"} if event_ids else event

    try:
        async with client.realtime.connect(model=model) as connection:
            modalities = ["audio"] if audio else ["text"]
            await connection.send(
                with_id(
                    {
                        "type": "session.update",
                        "session": {"type": "realtime", "instructions": "Be brief.", "output_modalities": modalities},
                    },
                    1,
                )
            )
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            await connection.send(with_id({"type": "conversation.item.create", "item": item}, 2))
            await connection.send(with_id({"type": "response.create"}, 3))
            async for event in connection:
                events.append(event.to_dict())
                if event.type in ("response.done", "error"):
                    break
            if events and events[-1]["type"] == "error":  # a miss: the server closes next
                async for event in connection:
                    events.append(event.to_dict())
    except websockets.ConnectionClosed as e:
        closed = {"code": e.rcvd.code, "reason": e.rcvd.reason} if e.rcvd else {"code": None, "reason": ""}
    except openai.OpenAIError as e:
        closed = {"code": None, "reason": f"{type(e).__name__}: {e}"}
    return {"events": events, "closed": closed}


GEMINI_URL = (
    "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService"
    ".BidiGenerateContent?key={key}"
)


async def gemini_session(text: str, model: str = "models/gemini-live-2.5-flash") -> dict:
    """Gemini Live with the `websockets` library, the key in the URL as Google's samples put it."""
    import websockets

    events, closed, binary, digests = [], None, [], []
    url = GEMINI_URL.format(key=os.environ.get("GEMINI_API_KEY", FAKE_GEMINI_KEY))
    try:
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"setup": {"model": model, "generationConfig": {"responseModalities": ["TEXT"]}}}))
            await ws.send(
                json.dumps(
                    {"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": True}}
                )
            )
            async for raw in ws:
                binary.append(isinstance(raw, bytes))
                digests.append(hashlib.sha256(raw if isinstance(raw, bytes) else raw.encode()).hexdigest()[:16])
                message = json.loads(raw)
                events.append(message)
                if "toolCall" in message:
                    call = message["toolCall"]["functionCalls"][0]
                    answer = {
                        "functionResponses": [{"id": call["id"], "name": call["name"], "response": {"sky": "sunny"}}]
                    }
                    await ws.send(json.dumps({"toolResponse": answer}))
                if message.get("serverContent", {}).get("turnComplete"):
                    break
    except websockets.ConnectionClosed as e:
        closed = {"code": e.rcvd.code, "reason": e.rcvd.reason} if e.rcvd else {"code": None, "reason": ""}
    return {"events": events, "closed": closed, "binary": binary, "bytes": digests}


async def genai_session(text: str, model: str = "gemini-live-2.5-flash") -> dict:
    """Gemini Live with google-genai, which sends the key in `x-goog-api-key`."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=os.environ.get("GEMINI_API_KEY", FAKE_GEMINI_KEY))
    events, closed = [], None
    config = types.LiveConnectConfig(response_modalities=["TEXT"])
    try:
        async with client.aio.live.connect(model=model, config=config) as session:
            await session.send_client_content(turns=types.Content(role="user", parts=[types.Part(text=text)]))
            async for message in session.receive():
                events.append(message.model_dump(exclude_none=True, mode="json"))
    except genai.errors.APIError as e:
        closed = {"code": e.code, "reason": str(e)}
    return {"events": events, "closed": closed}


async def agents_session(text: str, follow_up: str = "", history: bool = False) -> dict:
    """openai-agents over the Responses API's WebSocket mode: one connection for the agent's turns, a follow-up
    continuing from the first answer's `previous_response_id` (with `history`: sending the conversation so far as
    its input instead)."""
    from agents import Agent, responses_websocket_session

    agent = Agent(name="Echo", instructions="Repeat what you are told.", model="gpt-4.1")
    answers = []
    async with responses_websocket_session(api_key=os.environ.get("OPENAI_API_KEY", FAKE_OPENAI_KEY)) as ws:
        result = await ws.run(agent, text)
        answers.append(result.final_output)
        if follow_up:
            try:
                if history:
                    result = await ws.run(agent, [*result.to_input_list(), {"role": "user", "content": follow_up}])
                else:
                    result = await ws.run(agent, follow_up, previous_response_id=result.last_response_id)
            except Exception as e:  # a turn's miss: the error event, as openai-agents raises it
                return {"answers": answers, "error": getattr(e, "error_message", None) or str(e)}
            answers.append(result.final_output)
    return {"answers": answers, "last_response_id": result.last_response_id}


SESSIONS = {"openai": openai_session, "gemini": gemini_session, "genai": genai_session, "agents": agents_session}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=sorted(SESSIONS))
    parser.add_argument("text")
    parser.add_argument("--model")
    parser.add_argument("--event-ids", default="")
    parser.add_argument("--audio", action="store_true")
    parser.add_argument("--follow-up", default="")
    parser.add_argument("--history", action="store_true")
    args = parser.parse_args()
    options = {"model": args.model} if args.model else {}
    if args.client == "openai":
        options.update(event_ids=args.event_ids, audio=args.audio)
    if args.client == "agents":
        options = {"follow_up": args.follow_up, "history": args.history}
    print(json.dumps(asyncio.run(SESSIONS[args.client](args.text, **options))))


if __name__ == "__main__":
    main()
