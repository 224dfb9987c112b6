"""Rebuilding what a recording redacted: the URL, the content types and key headers of LangChain's recordings.

Every LangChain partner package records its tests with `langchain_tests` and a conftest that replaces the
URI and every header value by `**REDACTED**` (VCR then matches on method and body alone). A key needs the
URL, a replay needs the content type (an SDK reads a JSON answer sent without `application/json` as text),
so both are rebuilt from what the request still shows: the provider from the header names the SDK sent
(values are gone, names stay), the package folder the file lives in (`langchain_anthropic-1.7.10/tests/…`)
or the model the body names; the endpoint from the body's shape (`messages`, `input`, `prompt`). Where that
cannot be done, the entry is skipped with the reason, and `--redacted-url` says the URL for those entries.

A redacted key header (`anthropic-version`, `anthropic-beta`) cannot be rebuilt by us: its value is the SDK's
and the test's choice (langchain-anthropic sends at least 7 `anthropic-beta` values, one per feature a test
uses). `--redacted-header` rules say it: a fixed value, for every file or for the files a glob names
(`anthropic-beta@TestX.test_files*=files-api-2025-04-14`), or a pattern found in the recorded request body
with the value it stands for (`anthropic-beta=/"(context_management)"/context-management-2025-06-27/`).
Every rule that applies to a request adds its values, in the order the rules were given, joined with `,` as
SDKs send a list header.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..keys.body import parse_json_body
from .recording_formats import Recorded, Unusable

REDACTED = "**REDACTED**"


def is_redacted(value: str) -> bool:
    return value.strip() == REDACTED


@dataclass(frozen=True)
class Provider:
    names: tuple[str, ...]
    """How its LangChain package and folder spell it (`langchain_mistralai`, `partners/mistralai`)."""
    base: str
    """The base URL its SDK sends to (the SDK's default `base_url`)."""
    style: str
    """Which endpoints the body shapes map to: `openai` (and OpenAI-compatible), `anthropic`, `ollama`."""
    models: tuple[str, ...] = ()
    """Model-name prefixes no other provider's own API serves (hosting providers serve open models by their
    own names too, so `llama-` names none)."""


ANTHROPIC = Provider(("anthropic",), "https://api.anthropic.com/v1", "anthropic", ("claude-",))
PROVIDERS = (
    Provider(("openai",), "https://api.openai.com/v1", "openai",
             ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "omni-moderation", "text-moderation")),
    ANTHROPIC,
    Provider(("mistralai", "mistral"), "https://api.mistral.ai/v1", "openai",
             ("mistral-", "open-mistral", "codestral", "pixtral", "ministral", "magistral")),
    Provider(("groq",), "https://api.groq.com/openai/v1", "openai"),
    Provider(("xai",), "https://api.x.ai/v1", "openai", ("grok-",)),
    Provider(("deepseek",), "https://api.deepseek.com/v1", "openai"),
    Provider(("fireworks",), "https://api.fireworks.ai/inference/v1", "openai"),
    Provider(("together",), "https://api.together.xyz/v1", "openai"),
    Provider(("perplexity",), "https://api.perplexity.ai", "openai", ("sonar",)),
    Provider(("openrouter",), "https://openrouter.ai/api/v1", "openai"),
    Provider(("cerebras",), "https://api.cerebras.ai/v1", "openai"),
    Provider(("ollama",), "http://localhost:11434/api", "ollama"),
)  # fmt: skip
"""The providers whose LangChain packages record with langchain_tests, at their SDKs' default base URLs."""

CHATGPT_CODEX = Provider(("chatgpt",), "https://chatgpt.com/backend-api/codex", "openai")
"""langchain-openai's `ChatOpenAICodex` (ChatGPT subscription auth): it sends `chatgpt-account-id` and `originator`."""

_BY_HEADER = {
    "chatgpt-account-id": CHATGPT_CODEX,
    "originator": CHATGPT_CODEX,
    "anthropic-version": ANTHROPIC,
    "anthropic-beta": ANTHROPIC,
}
_UNBUILDABLE_BY_HEADER = {
    "api-key": "Azure OpenAI (an api-key header): its resource and deployment were in the redacted URL",
    "x-goog-api-key": "Gemini (an x-goog-api-key header): its model was in the redacted URL",
}
_TOKEN = re.compile(r"[a-z0-9]+")


def provider_of(header_names: Iterable[str], folders: Sequence[str], model: str) -> tuple[Provider, str]:
    """The provider a redacted request went to, and what told: raises ValueError saying why none can be told."""
    names = {name.lower() for name in header_names}
    for name, provider in _BY_HEADER.items():
        if name in names:
            return provider, f"its {name} header"
    for name, problem in _UNBUILDABLE_BY_HEADER.items():
        if name in names:
            raise ValueError(problem)
    for folder in folders:
        tokens = set(_TOKEN.findall(folder.lower()))
        for provider in PROVIDERS:
            if tokens.intersection(provider.names):
                return provider, f"the folder {folder}"
    for provider in PROVIDERS:
        if provider.models and model.lower().startswith(provider.models):
            return provider, f"the model {model}"
    shown = f" (model {model!r})" if model else ""
    raise ValueError(f"neither its headers, its folders nor its body{shown} name a provider")


def endpoint_of(style: str, body: Mapping[str, Any]) -> str:
    """The endpoint path (under the base URL) a POST body of this shape is sent to; ValueError else."""
    model = str(body.get("model") or "").lower()
    if style == "anthropic" and "messages" in body:
        return "/messages" if "max_tokens" in body else "/messages/count_tokens"
    if style == "ollama":
        for field, path in (("messages", "/chat"), ("prompt", "/generate"), ("input", "/embed")):
            if field in body:
                return path
    if style == "openai":
        if "messages" in body:
            return "/chat/completions"
        if "input" in body:
            if "encoding_format" in body or "dimensions" in body or "embed" in model:
                return "/embeddings"
            return "/moderations" if "moderation" in model else "/responses"
        if "prompt" in body:
            return "/completions"
    raise ValueError(f"its body has none of the fields that name a {style}-style endpoint (messages, input, prompt)")


@dataclass(frozen=True)
class Media:
    """A file langchain_tests' standard tests download (`httpx.get(url).content`) before they send it to a model."""

    content_type: str
    urls: tuple[str, ...]
    """Every version's URL for this kind of file: the bytes say the kind, not the version."""
    magic: Callable[[bytes], bool]


LANGCHAIN_TESTS_MEDIA = (
    Media(
        "image/png",
        ("https://raw.githubusercontent.com/langchain-ai/docs/4d11d08b6b0e210bd456943f7a22febbd168b543/src/images/"
         "agentic-rag-output.png",),  # test_image_inputs, langchain_tests 1.1
        lambda body: body.startswith(b"\x89PNG\r\n\x1a\n"),
    ),
    Media(
        "image/jpeg",
        ("https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/Gfp-wisconsin-madison-the-nature-boardwalk.jpg/"
         "2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg",),  # test_image_inputs, 0.3 and 1.0
        lambda body: body.startswith(b"\xff\xd8\xff"),
    ),
    Media(
        "application/pdf",
        ("https://www.w3.org/WAI/ER/tests/xhtml/testfiles/resources/pdf/dummy.pdf",),  # test_pdf_inputs, every version
        lambda body: body.startswith(b"%PDF-"),
    ),
    Media(
        "audio/wav",
        ("https://upload.wikimedia.org/wikipedia/commons/6/6a/Northern_Flicker_202280456.wav",  # 1.1
         "https://upload.wikimedia.org/wikipedia/commons/3/3d/Alcal%C3%A1_de_Henares_%28RPS_13-04-2024%29_canto_de_"
         "ruise%C3%B1or_%28Luscinia_megarhynchos%29_en_el_Soto_del_Henares.wav"),  # test_audio_inputs, 0.3 and 1.0
        lambda body: body[:4] == b"RIFF" and body[8:12] == b"WAVE",
    ),
)  # fmt: skip
"""The constants of `langchain_tests/integration_tests/chat_models.py` (0.3.20, 1.0.0, 1.1.9): the same PNG, JPEG,
PDF and WAV in every LangChain package's recordings, each a GET whose URI the conftest redacted."""


def well_known_media(recorded: Recorded) -> list[Recorded] | None:
    """A redacted GET that downloaded one of langchain_tests' files, once for each URL that file had (a suite replays
    the one its version asks for); None for any other request."""
    if recorded.method.upper() != "GET" or not is_redacted(recorded.url):
        return None
    media = next((m for m in LANGCHAIN_TESTS_MEDIA if m.magic(recorded.response_body)), None)
    if media is None:
        return None
    headers = tuple((name, value) for name, value in recorded.response_headers if not is_redacted(value))
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers = (*headers, ("content-type", media.content_type))
    request_headers = tuple((name, value) for name, value in recorded.request_headers if not is_redacted(value))
    return [
        dataclasses.replace(recorded, url=url, request_headers=request_headers, response_headers=headers)
        for url in media.urls
    ]


@dataclass(frozen=True)
class HeaderRule:
    """One `--redacted-header` rule: `NAME[@FILE_GLOB]=VALUE`, or `NAME[@FILE_GLOB]=/REGEX/TEMPLATE/`."""

    name: str
    """Lower case."""
    files: str | None = None
    """A glob the recording file's name must match (`TestX.test_y*`); None: every file."""
    value: str | None = None
    pattern: re.Pattern[str] | None = None
    """Searched in the recorded request body; each match, expanded with `template`, is one value."""
    template: str = ""

    def values(self, recorded: Recorded) -> list[str]:
        """The values this rule gives the request's header (none when it does not apply)."""
        if self.files is not None:
            file_name = recorded.source.rpartition("#")[0].replace("\\", "/").rpartition("/")[2]
            if not fnmatch.fnmatchcase(file_name, self.files):
                return []
        if self.pattern is None:
            return [self.value or ""]
        text = recorded.request_body.decode("utf-8", "replace")
        return [m.expand(self.template) for m in self.pattern.finditer(text)]


def parse_header_rule(spec: str) -> HeaderRule:
    """A `--redacted-header` spec; ValueError saying what is wrong."""
    head, sep, value = spec.partition("=")
    name, at, files = head.partition("@")
    if not sep or not name.strip() or (at and not files.strip()) or any(c in value for c in "\r\n\0"):
        raise ValueError(
            f"--redacted-header: {spec!r} is not NAME=VALUE, NAME@FILE_GLOB=VALUE or NAME=/REGEX/TEMPLATE/ "
            "(anthropic-version=2023-06-01)"
        )
    rule = HeaderRule(name.strip().lower(), files.strip() if at else None)
    value = value.strip()
    if len(value) > 2 and value.startswith("/") and value.endswith("/") and value.count("/") >= 3:
        pattern, _, template = value[1:-1].rpartition("/")
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"--redacted-header: {spec!r}: invalid regular expression {pattern!r}: {e}") from None
        names = {number: name for name, number in compiled.groupindex.items()}
        empty = "".join(f"(?P<{names[n]}>)" if n in names else "()" for n in range(1, compiled.groups + 1))
        try:
            re.fullmatch(empty, "").expand(template)  # type: ignore[union-attr]  # a bad group fails here
        except (re.error, IndexError) as e:
            raise ValueError(f"--redacted-header: {spec!r}: the template {template!r} does not fit: {e}") from None
        return dataclasses.replace(rule, pattern=compiled, template=template)
    return dataclasses.replace(rule, value=value)


@dataclass(frozen=True)
class Rebuild:
    """What the user said about redacted recordings."""

    url: str | None = None
    """`--redacted-url`: where a request with a redacted URI went when the request does not tell (a GET of an
    image, a multipart upload, a provider no header, folder or model names)."""
    header_rules: tuple[HeaderRule, ...] = ()
    """`--redacted-header`: how to recover the value a redacted key header had."""

    def header_value(self, name: str, recorded: Recorded) -> str | None:
        """The value the rules give the redacted header `name` (lower case) of this request; None: no rule does."""
        rules = [rule for rule in self.header_rules if rule.name == name]
        if not rules:
            return None
        values = [value for rule in rules for value in rule.values(recorded)]
        return ",".join(dict.fromkeys(values)) if values else None


def unredacted(
    recorded: Recorded, key_headers: Iterable[str], rebuild: Rebuild, folders: Sequence[str]
) -> tuple[Recorded, str] | Unusable:
    """The recorded interaction with its redacted URL, content types and key headers rebuilt, and a note saying
    how (empty when nothing was redacted); Unusable with the reason when a part the key needs cannot be rebuilt."""
    url_redacted = is_redacted(recorded.url)
    if not url_redacted and not any(is_redacted(v) for _, v in (*recorded.request_headers, *recorded.response_headers)):
        return recorded, ""
    note, url = "", recorded.url
    request_json = parse_json_body(recorded.request_body)  # once: the URL and the content type both read it
    if url_redacted:
        try:
            url, note = _rebuilt_url(recorded, request_json, folders)
        except ValueError as e:
            if not rebuild.url:
                return Unusable(
                    recorded.source, f"its URI was redacted and cannot be rebuilt: {e} (pass --redacted-url)"
                )
            url, note = rebuild.url, f"URL from --redacted-url ({e})"
    request_headers = []
    wanted = set(key_headers)
    for name, value in recorded.request_headers:
        lower = name.lower()
        if not is_redacted(value):
            request_headers.append((name, value))
        elif (given := rebuild.header_value(lower, recorded)) is not None:
            request_headers.append((name, given))
        elif lower in wanted:
            ruled = any(rule.name == lower for rule in rebuild.header_rules)
            return Unusable(
                recorded.source,
                f"its key header {lower} was redacted, and no --redacted-header rule gives its value for this "
                "request (a rule for other files, or a pattern its body lacks)"
                if ruled
                else f"its key header {lower} was redacted, and the key needs its value: pass --redacted-header "
                f"{lower}=VALUE when every such request sent the same value, NAME@FILE_GLOB=VALUE per file, or "
                f"{lower}=/REGEX/TEMPLATE/ for a value its body shows; else record it again through the proxy",
            )
    request_headers = _with_content_type(
        request_headers, lambda: _request_content_type(recorded.request_body, request_json[0]), url_redacted
    )
    response_headers = [(name, value) for name, value in recorded.response_headers if not is_redacted(value)]
    response_headers = _with_content_type(
        response_headers,
        lambda: _response_content_type(recorded.response_body),
        url_redacted or _redacted_type(recorded),
    )
    rebuilt = dataclasses.replace(
        recorded, url=url, request_headers=tuple(request_headers), response_headers=tuple(response_headers)
    )
    return rebuilt, note


def _rebuilt_url(recorded: Recorded, request_json: tuple[bool, Any], folders: Sequence[str]) -> tuple[str, str]:
    """The URL a redacted request went to, and how it was told; ValueError saying why it cannot be."""
    if recorded.method.upper() != "POST":
        raise ValueError(f"a {recorded.method.upper()} request: only a POST body shows which endpoint it went to")
    is_json, body = request_json
    if not is_json or not isinstance(body, dict):
        raise ValueError("its body is not a JSON object, so its shape names no endpoint")
    provider, told = provider_of((name for name, _ in recorded.request_headers), folders, str(body.get("model") or ""))
    url = provider.base + endpoint_of(provider.style, body)
    if provider is ANTHROPIC and any(name.lower() == "anthropic-beta" for name, _ in recorded.request_headers):
        # The SDKs' beta client (`client.beta.messages`, what langchain-anthropic calls when a test asks for a beta)
        # sends `anthropic-beta` and posts to `/v1/messages?beta=true`, as langchain-anthropic's unredacted
        # cassettes show.
        return f"{url}?beta=true", f"URL rebuilt: anthropic from {told}, the endpoint from the body, ?beta=true "
        "from its anthropic-beta header (the SDK's beta client)"
    return url, f"URL rebuilt: {provider.names[0]} from {told}, the endpoint from the body"


def _redacted_type(recorded: Recorded) -> bool:
    return any(name.lower() == "content-type" and is_redacted(v) for name, v in recorded.response_headers)


def _with_content_type(
    headers: list[tuple[str, str]], rebuilt: Callable[[], str | None], wanted: bool
) -> list[tuple[str, str]]:
    """The headers with a content type rebuilt from the body when theirs is gone (redacted, or left out by a
    recording that redacted the URI too: langchain-openai's Codex cassettes keep no content-type)."""
    if not wanted or any(name.lower() == "content-type" for name, _ in headers):
        return headers
    content_type = rebuilt()
    return headers if content_type is None else [*headers, ("content-type", content_type)]


_BOUNDARY = re.compile(rb"--([0-9A-Za-z'()+_,./:=?-]{1,70})\r\n")


def _request_content_type(body: bytes, is_json: bool) -> str | None:
    """JSON, or a multipart form whose boundary is its first line: what SDKs send."""
    if is_json:
        return "application/json"
    boundary = _BOUNDARY.match(body)
    return f"multipart/form-data; boundary={boundary.group(1).decode()}" if boundary else None


_SSE_FIELD = re.compile(rb"(?:event|data|id|retry)?:")


def _response_content_type(body: bytes) -> str | None:
    """An SSE stream (its first line a field), NDJSON (one JSON object a line, Ollama's stream) or JSON."""
    if _SSE_FIELD.match(body.lstrip()):
        return "text/event-stream; charset=utf-8"
    if parse_json_body(body)[0]:
        return "application/json"
    lines = body.strip().split(b"\n")
    if len(lines) > 1 and all(parse_json_body(line)[0] for line in lines):
        return "application/x-ndjson"
    return None
