"""A cassette as a conversation: the turns a request sends, the answer it got, and how a streamed answer arrived.

The one reader of what a cassette says: `cassette view` renders what this
returns, and `show`, `ls`, `diff` and `drift` read their fields from it
(summary.py projects it onto a few fields a reviewer reads). It is pure (no
mitmproxy, no I/O), so each API's shape is tested on its own. Request shapes
differ enough that each API has its own reader; responses are read by one
accumulator that knows every API's keys, whole or streamed, because a stream
is the same fields cut into events. Stream bodies are cut with
stream_events.py's splitter: one parser for the stored events. Anything
unrecognised is kept as readable JSON, never an error.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from ..files import json_depth
from ..files.stream_events import NDJSON, SSE, guess_kind, payload_lines, split_text, sse_fields, stream_kind

ANTHROPIC = "anthropic"
OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
OPENAI_EMBEDDINGS = "openai-embeddings"
OPENAI_COMPLETIONS = "openai-completions"
GEMINI = "gemini"
OLLAMA = "ollama"
UNKNOWN = "unknown"
MCP = "mcp"
"""An MCP JSON-RPC request (core/sessions/mcp.py), over streamable HTTP or stdio (`cassette mcp`)."""

PARAMETERS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "maxOutputTokens",
    "num_predict",
    "stream",
    "seed",
    "stop",
    "tool_choice",
    "response_format",
    "reasoning",
    "thinking",
)
"""Request fields a reader of a recording wants at a glance (their nested forms too: Gemini's generationConfig,
Ollama's options)."""


@dataclass
class Part:
    """One piece of a turn: text, a tool call or its result, an image or file (as a placeholder), or raw JSON."""

    kind: str  # text, tool_call, tool_result, image, file, embedding, json
    text: str = ""
    name: str = ""
    """Tool name, media type or event name, by kind; for text, `thinking` (reasoning) or `refusal`, else empty."""


THINKING = "thinking"
REFUSAL = "refusal"


@dataclass
class Turn:
    role: str
    parts: list[Part]


@dataclass
class TimelineEvent:
    ms: int | None
    """Offset from the start of the response, as recorded; None when the stream was stored without timing."""
    name: str
    text: str
    """What this event added to the answer (a text or argument delta), else empty."""


@dataclass
class Answer:
    status: int | None = None
    model: str = ""
    finish_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    parts: list[Part] = field(default_factory=list)
    streamed: bool = False
    timeline: list[TimelineEvent] = field(default_factory=list)
    first_event_ms: int | None = None
    longest_gap_ms: int | None = None
    choices: int = 0
    """Alternative answers the response holds (OpenAI choices, Gemini candidates); 0 where an API has one."""
    raw: bool = False
    """No reader knew the body: `parts` holds it as readable JSON or text, and no field above came from it."""

    @property
    def text(self) -> str:
        """What the model said: its text parts, without its reasoning and its refusals."""
        return "".join(part.text for part in self.parts if part.kind == "text" and not part.name)

    @property
    def refusal(self) -> str:
        return "".join(part.text for part in self.parts if part.kind == "text" and part.name == REFUSAL)

    @property
    def tool_calls(self) -> list[Part]:
        return [part for part in self.parts if part.kind == "tool_call"]


@dataclass
class Conversation:
    shape: str
    method: str
    url: str
    model: str
    parameters: dict[str, Any]
    tools: list[str]
    turns: list[Turn]
    answer: Answer

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["answer"]["text"] = self.answer.text
        return data

    @property
    def first_user_message(self) -> str:
        return next(_user_texts(self.turns), "")

    @property
    def last_user_message(self) -> str:
        return next(_user_texts(reversed(self.turns)), "")


def _user_texts(turns: Iterable[Turn]) -> Iterator[str]:
    """The text of each user (or embeddings input) turn that has some, in the order given."""
    for turn in turns:
        if turn.role in ("user", "input"):
            text = " ".join(p.text for p in turn.parts if p.kind == "text" and p.text)
            if text:
                yield text


# -- request shapes -----------------------------------------------------------------------------------------------


_MODEL_IN_URL = re.compile(r"/(?:models|deployments)/([^/:?]+)")
"""Gemini names the model in the path (`/models/gemini-2.0-flash:generateContent`), Azure the deployment."""


def shape_of(url: str, body: Any) -> str:
    """Which API a request speaks, by its path; an unknown path with a chat-like body is read as OpenAI chat,
    the shape most compatible providers copy."""
    if isinstance(body, dict) and body.get("jsonrpc") == "2.0" and "method" in body:
        return MCP
    path = url.split("://", 1)[-1].split("?", 1)[0]
    path = path[path.find("/") :] if "/" in path else ""
    if path.endswith("/chat/completions"):
        return OPENAI_CHAT
    if path.endswith("/responses"):
        return OPENAI_RESPONSES
    if path.endswith("/embeddings"):
        return OPENAI_EMBEDDINGS
    if path.endswith("/completions"):
        return OPENAI_COMPLETIONS
    if path.endswith("/messages") and isinstance(body, dict) and "messages" in body:
        return ANTHROPIC
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return GEMINI
    if path in ("/api/chat", "/api/generate"):
        return OLLAMA
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        return OPENAI_CHAT
    return UNKNOWN


def request_model(request: dict[str, Any]) -> str:
    """The model a request asks for: its body's `model`, else the one its URL names (Gemini, Azure)."""
    body = request.get("body") if request.get("body_format") == "json" else None
    model = body.get("model") if isinstance(body, dict) else None
    in_url = _MODEL_IN_URL.search(str(request.get("url", "")))
    return str(model or (in_url.group(1) if in_url else ""))


def size_text(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def _base64_size(data: Any) -> int:
    """Decoded size of base64 text, without decoding it."""
    if not isinstance(data, str):
        return 0
    text = data.strip()
    return max(0, len(text) * 3 // 4 - text[-2:].count("="))


_DATA_URL = re.compile(r"^data:([^;,]*)(;base64)?,", re.IGNORECASE)


def _media(kind: str, media_type: Any, data: Any = None, url: Any = None, label: str = "") -> Part:
    """An image or file as a placeholder: its type and size (inline data) or where it lives (a URL)."""
    media_type = str(media_type or "")
    if isinstance(url, str) and (match := _DATA_URL.match(url)):
        media_type = media_type or match.group(1)
        payload = url[match.end() :]
        described = size_text(_base64_size(payload) if match.group(2) else len(payload.encode()))
    elif isinstance(url, str) and url:
        described = url
    else:
        described = size_text(_base64_size(data))
    named = f"{label} " if label else ""
    return Part(kind, f"[{kind} {named}{media_type or 'unknown type'}, {described}]", media_type)


def _embedding(vector: Any) -> str:
    """A vector is not readable; its size and a digest show whether it changed."""
    digest = hashlib.sha256(json.dumps(vector).encode()).hexdigest()[:12]
    size = f"{len(vector)} values" if isinstance(vector, list) else f"{len(str(vector))} base64 chars"
    return f"[embedding {size}, sha256 {digest}]"


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _openai_content(content: Any) -> list[Part]:
    """OpenAI chat and Responses content: a string, or typed parts."""
    if isinstance(content, str):
        return [Part("text", content)]
    parts = []
    for item in content if isinstance(content, list) else ([content] if content else []):
        if isinstance(item, str):
            parts.append(Part("text", item))
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "")
        if "text" in item and isinstance(item["text"], str):
            parts.append(Part("text", item["text"]))
        elif kind in ("image_url", "input_image"):
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            parts.append(_media("image", "", url=url or item.get("file_id")))
        elif kind in ("file", "input_file"):
            file = nested if isinstance(nested := item.get("file"), dict) else item
            data = file.get("file_data") or ""
            name = str(file.get("filename") or file.get("file_id") or "")
            parts.append(_media("file", "", url=data if str(data).startswith("data:") else None, data=data, label=name))
        elif kind == "input_audio":
            audio = item.get("input_audio") or {}
            parts.append(_media("file", f"audio/{audio.get('format', '')}", data=audio.get("data")))
        elif kind == "refusal":
            parts.append(Part("text", str(item.get("refusal", ""))))
        else:
            parts.append(Part("json", _json_text(item)))
    return parts


def _openai_chat_turns(body: dict[str, Any]) -> list[Turn]:
    turns = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        parts = _openai_content(message.get("content"))
        if role == "tool":
            parts = [Part("tool_result", _text_of(parts), str(message.get("tool_call_id", "")))]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, dict) else {}
            parts.append(Part("tool_call", _json_text(function.get("arguments", "")), str(function.get("name", ""))))
        turns.append(Turn(role, parts))
    return turns


def _text_of(parts: list[Part]) -> str:
    return "\n".join(part.text for part in parts)


def _responses_turns(body: dict[str, Any]) -> list[Turn]:
    turns = [Turn("system", [Part("text", _json_text(body["instructions"]))])] if body.get("instructions") else []
    items = body.get("input")
    if isinstance(items, str):
        return [*turns, Turn("user", [Part("text", items)])]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            turns.append(
                Turn("assistant", [Part("tool_call", _json_text(item.get("arguments", "")), item.get("name", ""))])
            )
        elif kind == "function_call_output":
            turns.append(
                Turn("tool", [Part("tool_result", _json_text(item.get("output", "")), item.get("call_id", ""))])
            )
        elif "role" in item:
            turns.append(Turn(str(item["role"]), _openai_content(item.get("content"))))
        else:
            turns.append(Turn(str(kind), [Part("json", _json_text(item))]))
    return turns


def _anthropic_blocks(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)]
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        source = nested if isinstance(nested := block.get("source"), dict) else {}
        if kind == "text":
            parts.append(Part("text", str(block.get("text", ""))))
        elif kind in ("image", "document"):
            media = "image" if kind == "image" else "file"
            parts.append(_media(media, source.get("media_type"), data=source.get("data"), url=source.get("url")))
        elif kind == "tool_use":
            parts.append(Part("tool_call", _json_text(block.get("input", {})), str(block.get("name", ""))))
        elif kind == "tool_result":
            inner = block.get("content")
            text = _text_of(_anthropic_blocks(inner)) if isinstance(inner, list) else _json_text(inner or "")
            parts.append(Part("tool_result", text, str(block.get("tool_use_id", ""))))
        elif kind == "thinking":
            parts.append(Part("text", str(block.get("thinking", "")), THINKING))
        else:
            parts.append(Part("json", _json_text(block)))
    return parts


def _anthropic_turns(body: dict[str, Any]) -> list[Turn]:
    turns = [Turn("system", _anthropic_blocks(body["system"]))] if body.get("system") else []
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            turns.append(Turn(str(message.get("role", "")), _anthropic_blocks(message.get("content"))))
    return turns


def _gemini_parts(parts: Any) -> list[Part]:
    out = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(Part("text", part["text"], THINKING if part.get("thought") else ""))
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            kind = "image" if str(data.get("mimeType", "")).startswith("image/") else "file"
            out.append(_media(kind, data.get("mimeType"), data=data.get("data")))
        elif isinstance(part.get("fileData"), dict):
            data = part["fileData"]
            out.append(_media("file", data.get("mimeType"), url=data.get("fileUri")))
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            out.append(Part("tool_call", _json_text(call.get("args", {})), str(call.get("name", ""))))
        elif isinstance(part.get("functionResponse"), dict):
            result = part["functionResponse"]
            out.append(Part("tool_result", _json_text(result.get("response", {})), str(result.get("name", ""))))
        else:
            out.append(Part("json", _json_text(part)))
    return out


def _gemini_turns(body: dict[str, Any]) -> list[Turn]:
    system = body.get("systemInstruction") or body.get("system_instruction")
    turns = [Turn("system", _gemini_parts(system.get("parts")))] if isinstance(system, dict) else []
    for content in body.get("contents") or []:
        if isinstance(content, dict):
            turns.append(Turn(str(content.get("role", "user")), _gemini_parts(content.get("parts"))))
    return turns


def _ollama_turns(body: dict[str, Any]) -> list[Turn]:
    turns = [Turn("system", [Part("text", str(body["system"]))])] if body.get("system") else []
    messages = body.get("messages") or []
    if isinstance(body.get("prompt"), str):
        messages = [*messages, {"role": "user", "content": body["prompt"], "images": body.get("images")}]
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        parts = [Part("text", str(message["content"]))] if message.get("content") else []
        parts += [_media("image", "", data=image) for image in message.get("images") or []]
        for call in message.get("tool_calls") or []:
            function = (call.get("function") or {}) if isinstance(call, dict) else {}
            parts.append(Part("tool_call", _json_text(function.get("arguments", {})), str(function.get("name", ""))))
        if role == "tool":
            parts = [Part("tool_result", _text_of(parts), str(message.get("tool_name", "")))]
        turns.append(Turn(role, parts))
    return turns


def _inputs(value: Any, role: str) -> list[Turn]:
    """Each text of an embeddings input or a legacy completion prompt is a turn; token arrays stay JSON."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    if items and all(isinstance(item, int) for item in items):
        items = [items]  # one input given as tokens
    return [Turn(role, [Part("text", item) if isinstance(item, str) else Part("json", _json_text(item))])
            for item in items]  # fmt: skip


def _mcp_turns(body: dict[str, Any]) -> list[Turn]:
    """An MCP request as one user turn: its method (and tool) as text, a tool call's arguments as the call."""
    method, params = str(body.get("method", "")), body.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "tools/call" and params.get("name"):
        name = str(params["name"])
        return [
            Turn(
                "user", [Part("text", f"{method} {name}"), Part("tool_call", _json_text(params.get("arguments")), name)]
            )
        ]
    shown = {k: v for k, v in params.items() if k != "_meta"}
    return [Turn("user", [Part("text", method), *([Part("json", _json_text(shown))] if shown else [])])]


_TURNS = {
    MCP: _mcp_turns,
    OPENAI_CHAT: _openai_chat_turns,
    OPENAI_EMBEDDINGS: lambda body: _inputs(body.get("input"), "input"),
    OPENAI_COMPLETIONS: lambda body: _inputs(body.get("prompt"), "user"),
    OPENAI_RESPONSES: _responses_turns,
    ANTHROPIC: _anthropic_turns,
    GEMINI: _gemini_turns,
    OLLAMA: _ollama_turns,
}


def parameters(body: Any) -> dict[str, Any]:
    """The sampling and length settings of a request, from the top level or Gemini's/Ollama's nested objects."""
    if not isinstance(body, dict):
        return {}
    found = {}
    for source in (body, body.get("generationConfig"), body.get("generation_config"), body.get("options")):
        if isinstance(source, dict):
            found.update({name: source[name] for name in PARAMETERS if name in source})
    return found


def tool_names(body: Any) -> list[str]:
    """The tools a request offers, by name, for every API's way of declaring them."""
    names = []
    for tool in (body.get("tools") if isinstance(body, dict) else None) or []:
        if not isinstance(tool, dict):
            continue
        function = nested if isinstance(nested := tool.get("function"), dict) else tool
        if function.get("name"):
            names.append(str(function["name"]))
        for declaration in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            names.append(str(declaration.get("name", "")))
        if not function.get("name") and not tool.get("functionDeclarations") and tool.get("type"):
            names.append(str(tool["type"]))
    return names


def request_turns(shape: str, request: dict[str, Any]) -> list[Turn]:
    """The turns a request sends; a body this does not know is one turn of readable JSON (or its text)."""
    body = request.get("body")
    if request.get("body_format") == "json" and isinstance(body, dict) and shape in _TURNS:
        turns = _TURNS[shape](body)
        if turns:
            return turns
    if body in (None, "", {}):
        return []
    if request.get("body_format") == "base64":
        return [Turn("request", [_media("file", "binary", data=body)])]
    return [Turn("request", [Part("json" if request.get("body_format") == "json" else "text", _json_text(body))])]


# -- responses, whole or streamed ---------------------------------------------------------------------------------


@dataclass
class _Accumulator:
    """Builds an Answer from a whole response or from stream events, whichever API sent them."""

    answer: Answer
    calls: dict[Any, Part] = field(default_factory=dict)
    """Tool calls being streamed, by (API, index): [name, arguments so far]."""
    texts: dict[Any, Part] = field(default_factory=dict)
    """Text parts by position, so interleaved blocks (Anthropic's thinking and text) stay apart."""

    def text(self, where: Any, piece: Any, label: str = "") -> str:
        if not isinstance(piece, str) or not piece:
            return ""
        if where not in self.texts:
            self.texts[where] = Part("text", "", label)
            self.answer.parts.append(self.texts[where])
        self.texts[where].text += piece
        return piece

    def call(self, where: Any, name: Any = None, arguments: Any = None) -> str:
        if where not in self.calls:
            self.calls[where] = Part("tool_call", "", "")
            self.answer.parts.append(self.calls[where])
        part = self.calls[where]
        if name:
            part.name = str(name)
        if isinstance(arguments, str):
            part.text += arguments
            return arguments
        if arguments not in (None, {}):
            part.text = _json_text(arguments)
        return ""

    def usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.answer.usage.update({k: v for k, v in usage.items() if v is not None})

    def finish(self, reason: Any) -> None:
        if reason:
            self.answer.finish_reason = str(reason)

    def model(self, model: Any) -> None:
        if model and not self.answer.model:
            self.answer.model = str(model)

    def absorb(self, event: dict[str, Any], name: str = "") -> str:
        """Take in one whole response or stream event; returns the text or arguments it added."""
        if event.get("jsonrpc") == "2.0":
            return self._mcp(event)
        kind = str(event.get("type") or name)
        self.model(event.get("model") or event.get("modelVersion"))
        if kind.startswith("response.") or event.get("object") == "response":
            return self._responses(event, kind)
        if kind in ("message_start", "content_block_start", "content_block_delta", "message_delta"):
            return self._anthropic_stream(event, kind)
        added = ""
        if event.get("type") == "message" and isinstance(event.get("content"), list):  # Anthropic, whole
            for index, block in enumerate(event["content"]):
                added += self._anthropic_block(index, block)
            self.finish(event.get("stop_reason"))
            self.usage(event.get("usage"))
        added += self._openai_choices(event.get("choices"))
        added += self._gemini_candidates(event)
        added += self._ollama(event, kind)
        self._bedrock_converse(event)
        if event.get("object") == "list":  # OpenAI embeddings
            for item in event.get("data") or []:
                if isinstance(item, dict) and "embedding" in item:
                    self.answer.parts.append(Part("embedding", _embedding(item["embedding"])))
        if kind != "message":
            self.usage(event.get("usage"))
        if isinstance(event.get("error"), dict | str):
            self.answer.parts.append(Part("json", _json_text(event["error"]), "error"))
        return added

    def _mcp(self, message: dict[str, Any]) -> str:
        """An MCP JSON-RPC message: a tool's content, the tools a server lists, an error; notifications add nothing."""
        result, error = message.get("result"), message.get("error")
        if isinstance(error, dict):
            self.finish("error")
            self.answer.parts.append(Part("text", f"error {error.get('code')}: {error.get('message', '')}", "error"))
            return ""
        if not isinstance(result, dict):
            return ""
        added = ""
        content, tools = result.get("content"), result.get("tools")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                self.answer.parts.append(Part("tool_result", block["text"]))
                added += block["text"]
            else:
                self.answer.parts.append(Part("json", _json_text(block)))
        listed = tools if isinstance(tools, list) else []
        names = [str(tool.get("name")) for tool in listed if isinstance(tool, dict) and tool.get("name")]
        if names:
            self.answer.parts.append(Part("text", "tools: " + ", ".join(names), "tools"))
        if result.get("isError") is True:
            self.finish("tool error")
        if not added and not names and result:
            self.answer.parts.append(Part("json", _json_text(result)))
        return added

    def _openai_choices(self, choices: Any) -> str:
        """OpenAI chat, whole (`message`) or streamed (`delta`); every compatible provider too."""
        added = ""
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message") or choice.get("delta") or {}
            index = choice.get("index", 0)
            self._choice(index)
            added += self.text(("choice", index), message.get("content") or choice.get("text"))
            added += self.text(("refusal", index), message.get("refusal"), REFUSAL)
            added += self.text(("reasoning", index), message.get("reasoning_content"), THINKING)
            for position, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") or {}
                where = ("openai", index, call.get("index", position))
                added += self.call(where, function.get("name"), function.get("arguments"))
            self.finish(choice.get("finish_reason"))
        return added

    def _choice(self, index: Any) -> None:
        self.answer.choices = max(self.answer.choices, (index if isinstance(index, int) else 0) + 1)

    def _gemini_candidates(self, event: dict[str, Any]) -> str:
        """Gemini, whole or one chunk of a stream; a blocked prompt has no candidates, only its reason."""
        added = ""
        candidates = event.get("candidates")
        for candidate in candidates if isinstance(candidates, list) else []:
            if not isinstance(candidate, dict):
                continue
            self._choice(candidate.get("index"))
            for part in _gemini_parts((candidate.get("content") or {}).get("parts")):
                if part.kind == "text":
                    added += self.text(("gemini", part.name), part.text, part.name)
                else:
                    self.answer.parts.append(part)
            self.finish(candidate.get("finishReason"))
        feedback = event.get("promptFeedback")
        if isinstance(feedback, dict):
            self.finish(feedback.get("blockReason"))
        self.usage(event.get("usageMetadata"))
        return added

    def _ollama(self, event: dict[str, Any], kind: str) -> str:
        added = ""
        message = event.get("message")
        if isinstance(message, dict) and not kind:  # Ollama chat
            added += self.text("ollama", message.get("content"))
            added += self.text("ollama-thinking", message.get("thinking"), THINKING)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                self.call(("ollama", len(self.calls)), function.get("name"), function.get("arguments"))
        if isinstance(event.get("response"), str):  # Ollama generate
            added += self.text("ollama", event["response"])
        self.finish(event.get("done_reason"))
        if "done" in event:  # Ollama's last line carries the counts
            self.usage({k: event[k] for k in ("prompt_eval_count", "eval_count") if k in event})
        return added

    def _bedrock_converse(self, event: dict[str, Any]) -> None:
        """Bedrock's Converse API, whole: `output.message.content` blocks and a `stopReason`."""
        output = event.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        if not isinstance(message, dict):
            return
        for index, block in enumerate(message.get("content") or []):
            if not isinstance(block, dict):
                continue
            if "text" in block:
                self.text(("bedrock", index), block.get("text"))
            elif isinstance(block.get("reasoningContent"), dict):
                reasoning = block["reasoningContent"].get("reasoningText") or {}
                self.text(("bedrock", index), reasoning.get("text"), THINKING)
            elif isinstance(block.get("toolUse"), dict):
                self.call(("bedrock", index), block["toolUse"].get("name"), block["toolUse"].get("input"))
            else:
                self.answer.parts.append(Part("json", _json_text(block)))
        self.finish(event.get("stopReason"))

    def _anthropic_block(self, index: Any, block: Any) -> str:
        if not isinstance(block, dict):
            return ""
        kind = block.get("type")
        if kind == "text":
            return self.text(("anthropic", index), block.get("text"))
        if kind == "thinking":
            return self.text(("anthropic", index), block.get("thinking"), THINKING)
        if kind in ("tool_use", "server_tool_use"):
            return self.call(("anthropic", index), block.get("name"), block.get("input"))
        self.answer.parts.append(Part("json", _json_text(block)))
        return ""

    def _anthropic_stream(self, event: dict[str, Any], kind: str) -> str:
        index = event.get("index")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model(message.get("model"))
            self.usage(message.get("usage"))
            return ""
        if kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            if block.get("type") in ("tool_use", "server_tool_use"):
                block["input"] = None  # streamed as partial JSON next
            return self._anthropic_block(index, block)
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if "partial_json" in delta:
                return self.call(("anthropic", index), arguments=delta["partial_json"])
            if "thinking" in delta:
                return self.text(("anthropic", index), delta["thinking"], THINKING)
            return self.text(("anthropic", index), delta.get("text"))
        self.finish((event.get("delta") or {}).get("stop_reason"))
        self.usage(event.get("usage"))
        return ""

    def _responses(self, event: dict[str, Any], kind: str) -> str:
        """The Responses API: a whole `response` object, or its stream's events."""
        where = ("responses", event.get("output_index"), event.get("content_index"))
        if kind.endswith(".output_text.delta"):
            return self.text(where, event.get("delta"))
        if kind.endswith(".refusal.delta"):
            return self.text(where, event.get("delta"), REFUSAL)
        if kind.endswith(".reasoning_summary_text.delta"):
            return self.text(("reasoning", event.get("output_index")), event.get("delta"), THINKING)
        if kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
            return self.call(("responses", event.get("output_index")), event["item"].get("name"))
        if kind == "response.function_call_arguments.delta":
            return self.call(("responses", event.get("output_index")), arguments=event.get("delta"))
        whole = event if event.get("object") == "response" else event.get("response")
        if not isinstance(whole, dict):
            return ""
        self.model(whole.get("model"))
        self.usage(whole.get("usage"))
        details = whole.get("incomplete_details") or {}
        self.finish(details.get("reason") or (whole.get("status") if whole.get("status") != "in_progress" else ""))
        if kind in ("response", "") or (not self.texts and not self.calls):  # whole, or a stream without deltas
            for position, item in enumerate(whole.get("output") or []):
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "function_call":
                    self.call(("responses", position), item.get("name"), item.get("arguments"))
                elif item.get("type") == "message":
                    for number, content in enumerate(item.get("content") or []):
                        if isinstance(content, dict):
                            refused = content.get("type") == "refusal"
                            text = content.get("refusal") if refused else content.get("text")
                            self.text(("responses", position, number), text, REFUSAL if refused else "")
                elif item.get("type") != "reasoning":
                    self.answer.parts.append(Part("json", _json_text(item)))
        return ""


def stream_payloads(response: dict[str, Any]) -> list[tuple[int | None, str, Any]] | None:
    """(offset ms, event name, parsed payload or raw text) of each event of a streamed response, else None.

    Stored events (`body_format: events`) are one SSE event or NDJSON line
    each; a stream stored whole as text (by its content type, or because
    every event of it is stream framing) is cut with the recorder's splitter.
    """
    kind = stream_kind(str((response.get("headers") or {}).get("content-type", "")))
    kind = kind if kind in (SSE, NDJSON) else None
    body = response.get("body")
    if response.get("body_format") == "events" and isinstance(body, list):
        timed = [(e.get("ms"), e["text"]) for e in body if isinstance(e, dict) and isinstance(e.get("text"), str)]
        kind = kind or guess_kind("".join(text for _, text in timed))
    elif response.get("body_format") == "text" and isinstance(body, str) and (kind or payload_lines(body)):
        kind = kind or guess_kind(body)
        timed = [(None, event) for event in split_text(body, kind)]
    else:
        return None
    payloads = []
    for ms, text in timed:
        if not text.strip():
            continue
        name, data = sse_fields(text) if kind == SSE else (None, text.strip())
        if not data and name is None:
            continue  # an SSE comment or keep-alive
        try:
            payload = json_depth.loads(data) if data.strip() != "[DONE]" else "[DONE]"
        except ValueError:  # TooDeep too
            payload = data
        payloads.append((ms if isinstance(ms, int) else None, name or "", payload))
    return payloads


def _event_name(name: str, payload: Any) -> str:
    if isinstance(payload, dict) and payload.get("jsonrpc") == "2.0":  # MCP: what the message is, not `message`
        return str(payload.get("method") or ("error" if "error" in payload else "response"))
    if name:
        return name
    if isinstance(payload, dict):
        if payload.get("done") is True:
            return "done"
        return str(payload.get("object") or payload.get("type") or ("error" if "error" in payload else "chunk"))
    return str(payload) if payload == "[DONE]" else "text"


def answer_of(response: dict[str, Any]) -> Answer:
    answer = Answer(status=response.get("status") if isinstance(response.get("status"), int) else None)
    accumulator = _Accumulator(answer)
    payloads = stream_payloads(response)
    if payloads is not None:
        answer.streamed = True
        for ms, name, payload in payloads:
            added = accumulator.absorb(payload, name) if isinstance(payload, dict) else ""
            answer.timeline.append(TimelineEvent(ms, _event_name(name, payload), added))
        offsets = [event.ms for event in answer.timeline if event.ms is not None]
        if offsets:
            answer.first_event_ms = offsets[0]
            answer.longest_gap_ms = max((b - a for a, b in itertools.pairwise(offsets)), default=0)
        return answer
    body = response.get("body")
    if response.get("body_format") == "json" and isinstance(body, dict):
        accumulator.absorb(body)
        if answer.parts or answer.model or answer.usage:
            return answer
    if body not in (None, ""):
        answer.raw = True
        answer.parts.append(_fallback_part(response.get("body_format"), body))
    return answer


def _fallback_part(body_format: Any, body: Any) -> Part:
    if body_format == "base64":
        return _media("file", "binary", data=body)
    return Part("json" if body_format == "json" else "text", _json_text(body))


def conversation_of(cassette: dict[str, Any]) -> Conversation:
    """The conversation a cassette holds; never raises on an odd shape (it shows up as JSON instead)."""
    request = stored if isinstance(stored := cassette.get("request"), dict) else {}
    response = answered if isinstance(answered := cassette.get("response"), dict) else {}
    return conversation_from(request, answer_of(response))


def conversation_from(request: dict[str, Any], answer: Answer | None = None) -> Conversation:
    """The conversation a request starts, with the answer it got (an empty one when only the request is read)."""
    body = request.get("body") if request.get("body_format") == "json" else None
    url = str(request.get("url", ""))
    shape = shape_of(url, body)
    answer = answer or Answer()
    return Conversation(
        shape=shape,
        method=str(request.get("method", "")),
        url=url,
        model=request_model(request) or answer.model,
        parameters=parameters(body),
        tools=_mcp_tools(body, answer) if shape == MCP else tool_names(body),
        turns=request_turns(shape, request),
        answer=answer,
    )


def _mcp_tools(body: Any, answer: Answer) -> list[str]:
    """An MCP conversation's tools: the one a `tools/call` calls, or those a `tools/list` answer lists."""
    params = body.get("params") if isinstance(body, dict) else None
    if isinstance(params, dict) and body.get("method") == "tools/call" and params.get("name"):
        return [str(params["name"])]
    listed = next((part.text for part in answer.parts if part.name == "tools"), "")
    return listed.removeprefix("tools: ").split(", ") if listed else []


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def turn_number(cassette: dict[str, Any]) -> int | None:
    """A Responses WebSocket turn's place in the connection it was recorded in (its `turn` field), else None."""
    turn = cassette.get("turn")
    number = turn.get("number") if isinstance(turn, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def mcp_call(request: dict[str, Any]) -> str:
    """What an MCP request asks, in a few words: `tools/call add (id 3)`, `initialize (id 1)`, a batch's methods."""
    body = request.get("body") if request.get("body_format") == "json" else None
    messages = body if isinstance(body, list) else [body]
    said = []
    for message in messages:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) and message.get("method") == "tools/call" else None
        what = " ".join(str(part) for part in (message.get("method", "response"), name) if part)
        said.append(what + (f" (id {json.dumps(message['id'])})" if message.get("id") is not None else ""))
    return ", ".join(said)


def kind_tag(cassette: dict[str, Any], conversation: Conversation) -> str:
    """A short tag for what a cassette is when its model does not say it: `mcp`, `turn 2` (a Responses WebSocket
    turn), else empty."""
    if conversation.shape == MCP:
        return "mcp"
    number = turn_number(cassette)
    return f"turn {number}" if number is not None else ""
