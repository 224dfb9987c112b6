"""A session cassette as a conversation: who said what (user text, assistant text and transcripts, tool calls and
their results, audio as sizes) and the timeline of every frame, for `cassette show`, `diff` and `view`.

It reads what the file stores (no sidecar: audio kept there shows as its size)
and returns conversation.py's `Conversation`, so the viewer renders a session
like any cassette. OpenAI Realtime (typed events) and Gemini Live (one key per
message, camelCase or snake_case) are read; anything else shows as JSON.
Never raises on an odd shape.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..keys.body import parse_ignore_paths, without_paths
from ..sessions.session_match import GEMINI, OPENAI
from .conversation import Answer, Conversation, Part, TimelineEvent, Turn, size_text, turn_number
from .diff import differences
from .summary import ResponseSummary

RESPONSES = "openai-responses"
"""The Responses API's WebSocket mode (`wss://…/v1/responses`, openai-agents' websocket transport): each
`response.create` is one call, answered with the events its HTTP twin streams."""

_SIDECAR_SIZE = re.compile(r"^\[sidecar: (\d+) bytes\]$")


def _frames(cassette: dict[str, Any]) -> list[dict[str, Any]]:
    session = cassette.get("session")
    frames = session.get("frames") if isinstance(session, dict) else None
    return [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []


def _message(frame: dict[str, Any]) -> Any:
    if "json" in frame:
        return frame["json"]
    if "text" in frame:
        return frame["text"]
    return None


def _camel(value: Any) -> Any:
    """Gemini's messages with snake_case names (google-genai sends `client_content`) read as camelCase."""
    if isinstance(value, dict):
        return {_camel_name(k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _camel_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _data_size(data: Any) -> int:
    """Bytes behind a base64 string, or behind its sidecar placeholder."""
    if not isinstance(data, str):
        return 0
    if match := _SIDECAR_SIZE.match(data):
        return int(match.group(1))
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _audio(size: int, label: str = "audio") -> Part:
    return Part("file", f"[{label}, {size_text(size)}]", "audio")


class _Reader:
    """Turns built up frame by frame; consecutive pieces of one speaker join into one turn."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.model = ""
        self.tools: list[str] = []
        self.usage: dict[str, Any] = {}
        self.finish = ""
        self.audio_out = 0

    def add(self, role: str, part: Part) -> None:
        if self.turns and self.turns[-1].role == role:
            parts = self.turns[-1].parts
            if part.kind == "text" and parts and parts[-1].kind == "text":
                parts[-1] = Part("text", parts[-1].text + part.text)
                return
            parts.append(part)
            return
        self.turns.append(Turn(role, [part]))

    def flush_audio(self) -> None:
        if self.audio_out:
            self.add("assistant", _audio(self.audio_out))
            self.audio_out = 0

    # -- OpenAI Realtime -------------------------------------------------------------------------------------

    def openai_client(self, event: dict[str, Any]) -> str:
        kind = str(event.get("type", ""))
        if kind == "session.update" and isinstance(event.get("session"), dict):
            session = event["session"]
            if session.get("instructions"):
                self.add("system", Part("text", str(session["instructions"])))
            self.tools += [str(t.get("name")) for t in session.get("tools") or [] if isinstance(t, dict)]
            self.model = str(session.get("model") or self.model)
        elif kind == "conversation.item.create" and isinstance(event.get("item"), dict):
            self._openai_item(event["item"])
        elif kind == "input_audio_buffer.append":
            self.add("user", _audio(_data_size(event.get("audio"))))
        return ""

    def _openai_item(self, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call_output":
            self.add("tool", Part("tool_result", str(item.get("output", "")), str(item.get("call_id", ""))))
            return
        role = str(item.get("role") or "user")
        for part in item.get("content") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                self.add(role, Part("text", part["text"]))
            elif part.get("type") == "input_audio":
                self.add(role, _audio(_data_size(part.get("audio"))))
            else:
                self.add(role, Part("json", json.dumps(part, ensure_ascii=False)))

    def openai_server(self, event: dict[str, Any]) -> str:
        kind = str(event.get("type", ""))
        delta = sent if isinstance(sent := event.get("delta"), str) else ""
        if kind in ("response.output_text.delta", "response.text.delta"):
            self.add("assistant", Part("text", delta))
            return delta
        if kind in ("response.output_audio_transcript.delta", "response.audio_transcript.delta"):
            self.add("assistant", Part("text", delta))
            return delta
        if kind in ("response.output_audio.delta", "response.audio.delta"):
            self.audio_out += _data_size(delta)
            return ""
        if kind == "response.function_call_arguments.done":
            self.add("assistant", Part("tool_call", str(event.get("arguments", "")), str(event.get("name", ""))))
        elif kind == "conversation.item.input_audio_transcription.completed":
            self.add("user", Part("text", str(event.get("transcript", ""))))
        elif kind == "response.done" and isinstance(event.get("response"), dict):
            self.flush_audio()
            response = event["response"]
            self.finish = str(response.get("status") or self.finish)
            if isinstance(response.get("usage"), dict):
                self.usage = response["usage"]
        elif kind in ("session.created", "session.updated") and isinstance(event.get("session"), dict):
            self.model = str(event["session"].get("model") or self.model)
        elif kind == "error" and isinstance(event.get("error"), dict):
            self.add("error", Part("text", str(event["error"].get("message", ""))))
        return ""

    # -- the Responses API's WebSocket mode -------------------------------------------------------------------

    def responses_client(self, event: dict[str, Any]) -> str:
        if event.get("type") != "response.create":
            return ""
        self.model = str(event.get("model") or self.model)
        if isinstance(event.get("instructions"), str) and not any(t.role == "system" for t in self.turns):
            self.add("system", Part("text", event["instructions"]))
        for tool in event.get("tools") or []:
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(name, str) and name not in self.tools:
                self.tools.append(name)
        given = event.get("input")
        for item in [{"role": "user", "content": given}] if isinstance(given, str) else given or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                self.add("tool", Part("tool_result", str(item.get("output", "")), str(item.get("call_id", ""))))
            elif isinstance(item.get("role"), str) and isinstance(item.get("content"), str):
                self.add(item["role"], Part("text", item["content"]))
            elif isinstance(item.get("role"), str):
                self._openai_item(item)
        return ""

    def responses_server(self, event: dict[str, Any]) -> str:
        kind = str(event.get("type", ""))
        item = event.get("item")
        if kind == "response.output_item.done" and isinstance(item, dict) and item.get("type") == "function_call":
            self.add("assistant", Part("tool_call", str(item.get("arguments", "")), str(item.get("name", ""))))
            return ""
        response = event.get("response")
        if kind in ("response.completed", "response.failed", "response.incomplete") and isinstance(response, dict):
            self.finish = str(response.get("status") or self.finish)
            self.model = self.model or str(response.get("model") or "")
            if isinstance(response.get("usage"), dict):
                self.usage = response["usage"]
            return ""
        if kind == "response.function_call_arguments.done":
            return ""  # its call is read whole, with its name, from `response.output_item.done`
        return self.openai_server(event)

    # -- Gemini Live -----------------------------------------------------------------------------------------

    def gemini_client(self, message: dict[str, Any]) -> str:
        message = _camel(message)
        if isinstance(message.get("setup"), dict):
            setup = message["setup"]
            self.model = str(setup.get("model") or self.model)
            instruction = setup.get("systemInstruction")
            for part in instruction.get("parts", []) if isinstance(instruction, dict) else []:
                if isinstance(part, dict) and part.get("text"):
                    self.add("system", Part("text", str(part["text"])))
            for tool in setup.get("tools") or []:
                for declaration in tool.get("functionDeclarations", []) if isinstance(tool, dict) else []:
                    self.tools.append(str(declaration.get("name")))
        if isinstance(message.get("clientContent"), dict):
            for turn in message["clientContent"].get("turns") or []:
                if isinstance(turn, dict):
                    self._gemini_parts(str(turn.get("role") or "user"), turn.get("parts"))
        if isinstance(message.get("realtimeInput"), dict):
            realtime = message["realtimeInput"]
            if isinstance(realtime.get("text"), str):
                self.add("user", Part("text", realtime["text"]))
            for blob in [realtime.get("audio"), *(realtime.get("mediaChunks") or [])]:
                if isinstance(blob, dict):
                    self.add("user", _audio(_data_size(blob.get("data"))))
        if isinstance(message.get("toolResponse"), dict):
            for answer in message["toolResponse"].get("functionResponses") or []:
                if isinstance(answer, dict):
                    text = json.dumps(answer.get("response"), ensure_ascii=False)
                    self.add("tool", Part("tool_result", text, str(answer.get("name", ""))))
        return ""

    def _gemini_parts(self, role: str, parts: Any) -> str:
        added = ""
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                self.add("assistant" if role == "model" else role, Part("text", part["text"]))
                added += part["text"]
            elif isinstance(part.get("inlineData"), dict):
                size = _data_size(part["inlineData"].get("data"))
                if role == "model":
                    self.audio_out += size
                else:
                    self.add(role, _audio(size))
        return added

    def gemini_server(self, message: dict[str, Any]) -> str:
        message = _camel(message)
        content = message.get("serverContent")
        added = ""
        if isinstance(content, dict):
            turn = content.get("modelTurn")
            if isinstance(turn, dict):
                added += self._gemini_parts("model", turn.get("parts"))
            for name, role in (("inputTranscription", "user"), ("outputTranscription", "assistant")):
                if isinstance(content.get(name), dict) and content[name].get("text"):
                    self.add(role, Part("text", str(content[name]["text"])))
                    added += str(content[name]["text"]) if role == "assistant" else ""
            if content.get("turnComplete"):
                self.flush_audio()
                self.finish = "turnComplete"
        if isinstance(message.get("toolCall"), dict):
            for call in message["toolCall"].get("functionCalls") or []:
                if isinstance(call, dict):
                    text = json.dumps(call.get("args"), ensure_ascii=False)
                    self.add("assistant", Part("tool_call", text, str(call.get("name", ""))))
        if isinstance(message.get("usageMetadata"), dict):
            self.usage = message["usageMetadata"]
        if isinstance(message.get("message"), str) and "code" in message:  # an error object
            self.add("error", Part("text", message["message"]))
        return added


def session_shape(cassette: dict[str, Any]) -> str:
    url = str((cassette.get("request") or {}).get("url", ""))
    first = next((_message(f) for f in _frames(cassette) if f.get("from") == "client"), None)
    if "BidiGenerateContent" in url or (isinstance(first, dict) and "setup" in first):
        return GEMINI
    if urlsplit(url).path.endswith("/responses") or (
        isinstance(first, dict) and first.get("type") == "response.create" and "input" in first
    ):
        return RESPONSES
    return OPENAI


def _frame_name(shape: str, frame: dict[str, Any]) -> str:
    arrow = "→" if frame.get("from") == "client" else "←"
    message = _message(frame)
    if isinstance(message, dict):
        if shape in (OPENAI, RESPONSES) and "type" in message:
            return f"{arrow} {message['type']}"
        message = _camel(message)
        name = next(iter(message), "{}")
        inner = message.get(name)
        if isinstance(inner, dict) and inner and name == "serverContent":
            name += "." + next(iter(inner))
        return f"{arrow} {name}"
    if "text" in frame:
        return f"{arrow} text"
    return f"{arrow} {frame.get('frame', 'binary')} data"


def session_conversation(cassette: dict[str, Any]) -> Conversation:
    """The conversation a session cassette holds, its timeline every frame in order."""
    shape = session_shape(cassette)
    reader = _Reader()
    timeline = []
    for frame in _frames(cassette):
        message = _message(frame)
        added = ""
        if isinstance(message, dict):
            if shape == OPENAI:
                added = (
                    reader.openai_client(message) if frame.get("from") == "client" else reader.openai_server(message)
                )
            elif shape == RESPONSES:
                added = (
                    reader.responses_client(message)
                    if frame.get("from") == "client"
                    else reader.responses_server(message)
                )
            else:
                added = (
                    reader.gemini_client(message) if frame.get("from") == "client" else reader.gemini_server(message)
                )
        ms = frame.get("ms") if isinstance(frame.get("ms"), int) else None
        timeline.append(TimelineEvent(ms, _frame_name(shape, frame), added))
    reader.flush_audio()
    request = stored if isinstance(stored := cassette.get("request"), dict) else {}
    url = str(request.get("url", ""))
    model = reader.model or (parse_qs(urlsplit(url).query).get("model") or [""])[0]
    turns = reader.turns
    last = turns.pop() if turns and turns[-1].role == "assistant" else Turn("assistant", [])
    offsets = [e.ms for e in timeline if e.ms is not None]
    answer = Answer(
        status=101,
        model=model,
        finish_reason=reader.finish,
        usage=reader.usage,
        parts=last.parts,
        streamed=True,
        timeline=timeline,
        first_event_ms=offsets[0] if offsets else None,
        longest_gap_ms=max((b - a for a, b in itertools.pairwise(offsets)), default=0) if offsets else None,
    )
    return Conversation(shape, str(request.get("method", "GET")), url, model, {}, reader.tools, turns, answer)


def assistant_text(conversation: Conversation) -> str:
    """Everything the assistant said in the session, turn after turn: what a re-recording's review compares."""
    turns = [*conversation.turns, Turn("assistant", conversation.answer.parts)]
    said = ["".join(p.text for p in t.parts if p.kind in ("text", "tool_call")) for t in turns if t.role == "assistant"]
    return "\n".join(text for text in said if text)


def session_summary(cassette: dict[str, Any]) -> ResponseSummary:
    conversation = session_conversation(cassette)
    return ResponseSummary(101, conversation.model, conversation.answer.finish_reason, assistant_text(conversation))


def session_close(cassette: dict[str, Any]) -> str:
    close = (cassette.get("session") or {}).get("close")
    if not isinstance(close, dict):
        return "not recorded"
    reason = f" {close.get('reason')!r}" if close.get("reason") else ""
    return f"by the {close.get('by')}, code {close.get('code')}{reason}"


def client_message_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What the client sent differently in a re-recorded session, message by message (recorded → now), less
    the fields the new recording's matching ignores (`session.ignore`: client-made event ids)."""
    try:
        ignored = parse_ignore_paths((new.get("session") or {}).get("ignore") or [])
    except ValueError:
        ignored = ()
    before = [without_paths(_message(f), ignored) for f in _frames(old) if f.get("from") == "client"]
    after = [without_paths(_message(f), ignored) for f in _frames(new) if f.get("from") == "client"]
    out = []
    for i in range(1, max(len(before), len(after)) + 1):
        if i > len(before):
            out.append(f"client message {i}: added")
        elif i > len(after):
            out.append(f"client message {i}: removed")
        else:
            out += [f"client message {i}: {change}" for change in differences(before[i - 1], after[i - 1])]
    return out


def session_lines(cassette: dict[str, Any]) -> list[str]:
    """What `cassette show` prints of a session after the request line: the turns, then how it went."""
    conversation = session_conversation(cassette)
    frames = _frames(cassette)
    sent = sum(f.get("from") == "client" for f in frames)
    last_ms = max((f["ms"] for f in frames if isinstance(f.get("ms"), int)), default=0)
    turns = (
        [*conversation.turns, Turn("assistant", conversation.answer.parts)]
        if conversation.answer.parts
        else conversation.turns
    )
    calls = ""
    if conversation.shape == RESPONSES:
        n = sum(isinstance(m := _message(f), dict) and m.get("type") == "response.create" for f in frames)
        calls = f"{n} calls (response.create), " if n != 1 else "1 call (response.create), "
    number = turn_number(cassette)
    recorded_in = stored if isinstance(stored := cassette.get("turn"), dict) else {}
    # A turn is one call of a connection: the connection's close is no part of it.
    ended = "" if number is not None else f", closed {session_close(cassette)}"
    lines = [
        f"model:     {conversation.model or '-'}",
        *([f"tools:     {', '.join(conversation.tools)}"] if conversation.tools else []),
        *(
            [f"turn:      {number} of a Responses WebSocket connection to {recorded_in.get('url', '?')}"]
            if number
            else []
        ),
        f"session:   {conversation.shape}, {calls}{len(frames)} messages ({sent} from the client, "
        f"{len(frames) - sent} from the server) over {last_ms} ms{ended}",
        "turns:",
    ]
    for turn in turns:
        for part in turn.parts:
            what = f"{part.name}({part.text})" if part.kind in ("tool_call", "tool_result") else part.text
            lines.append(f"  {turn.role}: {' '.join(what.split())[:200]}")
    return lines
