"""LangChain's recordings (core/migration/redacted_request.py, core/migration/vcr_test_ids.py): cassettes written by langchain_tests' own
serializer after the partner packages' redaction, their URLs, content types and key headers rebuilt from what the
request shows, and each file's test found for the per-test scope."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cassette_proxy.core.defaults import DEFAULT_KEY_HEADERS
from cassette_proxy.core.keys.key import RequestFacts, identity, key_of
from cassette_proxy.core.migration import importer
from cassette_proxy.core.migration.recording_formats import read_recording
from cassette_proxy.core.migration.vcr_test_ids import TestModules, test_parts
from vcr.request import Request

SSE = b'event: response.created\ndata: {"type":"response.created"}\n\nevent: response.completed\ndata: {}\n\n'


def redacted(request: Request) -> Request:
    """What langchain-openai's and langchain-anthropic's `remove_request_headers` do before VCR records."""
    for name in request.headers:
        request.headers[name] = "**REDACTED**"
    request.uri = "**REDACTED**"
    return request


def interaction(body: dict | bytes | None, answer: bytes, method: str = "POST", **headers: str) -> tuple[Request, dict]:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    sdk_headers = {"content-type": "application/json", "authorization": "Bearer sk-live", "x-stainless-os": "Linux"}
    request = redacted(Request(method, "https://somewhere/v1/x", raw, {**sdk_headers, **headers}))
    response = {"status": {"code": 200, "message": "OK"}, "body": {"string": answer},
                "headers": {"Content-Type": ["**REDACTED**"], "x-request-id": ["**REDACTED**"]}}  # fmt: skip
    return request, response


def langchain_file(*interactions: tuple[Request, dict]) -> bytes:
    from langchain_tests.conftest import CustomSerializer

    return CustomSerializer.serialize(
        {"requests": [r for r, _ in interactions], "responses": [r for _, r in interactions]}
    )


def imported(
    *interactions: tuple[Request, dict], folders: tuple[str, ...] = ("langchain_openai",), **settings
) -> list[importer.Outcome]:
    kind, entries = read_recording(langchain_file(*interactions), "tests/cassettes/test_x.yaml.gz")
    files = [importer.RecordingFile("tests/cassettes/test_x.yaml.gz", kind, entries, folders)]
    return importer.plan(files, importer.import_settings(**settings), Path("/nonexistent"))


def live_key(url: str, body: bytes, content_type: str = "application/json", **headers: str) -> str:
    """The key the proxy gives the request the SDK really sent."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    facts = RequestFacts("POST", scheme, host, 443, f"/{path}", [], headers, body, content_type)
    return key_of(identity(facts, DEFAULT_KEY_HEADERS))


CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-5-nano", "input": [{"role": "user", "content": "hi"}], "stream": True}
EMBEDDINGS = {"model": "text-embedding-3-small", "input": [[1, 2, 3]], "encoding_format": "base64"}


def test_openai_urls_are_rebuilt_from_the_folder_and_the_bodys_shape_with_the_proxys_keys():
    outcomes = imported(
        interaction(CHAT, b'{"id": "chatcmpl-1", "object": "chat.completion"}'),
        interaction(RESPONSES, SSE),
        interaction(EMBEDDINGS, b'{"object": "list", "data": []}'),
    )
    assert [o.action for o in outcomes] == ["imported"] * 3
    cassettes = [json.loads(o.data) for o in outcomes]
    urls = [c["request"]["url"] for c in cassettes]
    base = "https://api.openai.com/v1"
    assert urls == [f"{base}/chat/completions", f"{base}/responses", f"{base}/embeddings"]
    for cassette, body in zip(cassettes, (CHAT, RESPONSES, EMBEDDINGS), strict=True):
        assert cassette["key"] == live_key(cassette["request"]["url"], json.dumps(body).encode())
    assert "URL rebuilt: openai from the folder langchain_openai, the endpoint from the body" in outcomes[0].detail
    chat, stream, _ = cassettes
    assert chat["response"]["headers"] == {"content-type": "application/json"}  # rebuilt; the redacted id dropped
    assert chat["response"]["body_format"] == "json"
    assert stream["response"]["body_format"] == "events" and len(stream["response"]["body"]) == 2
    assert all(b"REDACTED" not in o.data and b"sk-live" not in o.data for o in outcomes)


def test_the_sdks_header_names_tell_anthropic_and_chatgpts_codex_backend():
    message = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    count = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    outcomes = imported(
        interaction(message, b"{}", **{"x-api-key": "k"}),
        interaction(count, b"{}", **{"x-api-key": "k"}),
        interaction(RESPONSES, SSE, **{"chatgpt-account-id": "acct", "originator": "codex"}),
        folders=("langchain_anthropic",),
        hosts=["*"],
        redacted_headers=[],
    )
    details = [o.detail for o in outcomes]
    assert [o.action for o in outcomes] == ["imported"] * 3, details
    urls = [json.loads(o.data)["request"]["url"] for o in outcomes]
    assert urls == [
        "https://api.anthropic.com/v1/messages",
        "https://api.anthropic.com/v1/messages/count_tokens",
        "https://chatgpt.com/backend-api/codex/responses",  # its headers, not the folder's name
    ]


def test_a_redacted_key_header_is_not_guessed_and_can_be_given():
    message = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    recorded = interaction(message, b'{"type": "message"}', **{"anthropic-version": "2023-06-01"})
    [skipped] = imported(recorded, folders=())
    assert skipped.action == "skipped"
    assert "its key header anthropic-version was redacted" in skipped.detail
    assert "--redacted-header anthropic-version=VALUE" in skipped.detail
    [outcome] = imported(recorded, folders=(), redacted_headers=["Anthropic-Version=2023-06-01"])
    cassette = json.loads(outcome.data)
    assert cassette["request"]["headers"] == {"anthropic-version": "2023-06-01"}
    url = "https://api.anthropic.com/v1/messages"
    assert cassette["key"] == live_key(url, json.dumps(message).encode(), **{"anthropic-version": "2023-06-01"})


BETA_RULES = [
    "anthropic-version=2023-06-01",
    r'anthropic-beta=/"type": ?"code_execution_(\d{4})(\d\d)(\d\d)"/code-execution-\1-\2-\3/',
    'anthropic-beta=/"(context_management)"/context-management-2025-06-27/',
    "anthropic-beta@TestOther.*=files-api-2025-04-14",  # another file's: not this one's
]


def test_several_anthropic_beta_values_come_back_from_the_body_and_per_file():
    """langchain-anthropic redacts every header and sends an anthropic-beta per feature a test uses: rules that read
    the recorded body (or name the files) give each request its own value, the key the SDK's request has."""
    message = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    code = {**message, "tools": [{"type": "code_execution_20250522", "name": "code_execution"}]}
    context = {**message, "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}
    both = {**code, "context_management": context["context_management"]}
    bodies = {"code-execution-2025-05-22": code, "context-management-2025-06-27": context,
              "code-execution-2025-05-22,context-management-2025-06-27": both, "files-api-2025-04-14": message}  # fmt: skip
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "secret-looking"}
    recorded = [interaction(body, b'{"type": "message"}', **headers) for body in bodies.values()]
    outcomes = imported(*recorded, folders=(), redacted_headers=BETA_RULES)
    assert [o.action for o in outcomes] == ["imported", "imported", "imported", "skipped"]
    assert "no --redacted-header rule gives its value for this request" in outcomes[3].detail
    outcomes = imported(
        *recorded, folders=(), redacted_headers=[*BETA_RULES, "anthropic-beta@test_x.*=files-api-2025-04-14"]
    )
    url = "https://api.anthropic.com/v1/messages?beta=true"  # the SDK's beta client, which sends anthropic-beta
    for outcome, (beta, body) in zip(outcomes, bodies.items(), strict=True):
        if beta != "files-api-2025-04-14":
            beta += ",files-api-2025-04-14"  # every rule that applies adds its value, in the order given
        cassette = json.loads(outcome.data)
        assert cassette["request"]["headers"] == {"anthropic-beta": beta, "anthropic-version": "2023-06-01"}
        live = live_key(url, json.dumps(body).encode(), **{"anthropic-version": "2023-06-01", "anthropic-beta": beta})
        assert cassette["key"] == live


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("anthropic-beta@=x", "is not NAME=VALUE, NAME@FILE_GLOB=VALUE"),
        ("anthropic-beta=/(/x/", "invalid regular expression"),
        ("anthropic-beta=/(a)/\\2/", "does not fit"),
    ],
)
def test_a_bad_redacted_header_rule_is_refused_before_anything_is_read(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        importer.import_settings(redacted_headers=[spec])


def test_the_model_names_the_provider_when_the_folder_does_not():
    mistral = {"model": "mistral-small-latest", "messages": [{"role": "user", "content": "hi"}]}
    [outcome] = imported(interaction(mistral, b"{}"), folders=("tests", "project"))
    assert json.loads(outcome.data)["request"]["url"] == "https://api.mistral.ai/v1/chat/completions"


def test_what_cannot_be_rebuilt_is_skipped_with_the_reason_and_redacted_url_says_it():
    unknown = {"model": "llama-3.3-70b", "messages": [{"role": "user", "content": "hi"}]}
    image = interaction(None, b"GIF89a", method="GET")  # not one of langchain_tests' files
    outcomes = imported(interaction(unknown, b"{}"), image, folders=("tests",))
    assert [o.action for o in outcomes] == ["skipped", "skipped"]
    assert (
        "its URI was redacted and cannot be rebuilt: neither its headers, its folders nor its body"
        in outcomes[0].detail
    )
    assert "'llama-3.3-70b'" in outcomes[0].detail and "(pass --redacted-url)" in outcomes[0].detail
    assert "a GET request: only a POST body shows which endpoint it went to" in outcomes[1].detail
    url = "https://api.groq.com/openai/v1/chat/completions"
    given = imported(interaction(unknown, b"{}"), interaction(CHAT, b"{}"), folders=("tests",), redacted_url=url)
    assert [json.loads(o.data)["request"]["url"] for o in given] == [url, "https://api.openai.com/v1/chat/completions"]
    assert "URL from --redacted-url (neither its headers" in given[0].detail  # only where the request does not tell


def test_langchain_tests_downloads_get_their_urls_back_without_flags():
    """The standard tests download the same PNG, PDF and WAV in every package; their redacted GETs are recognised by
    their bytes and stored under each URL their langchain_tests versions used."""
    png, pdf, wav = b"\x89PNG\r\n\x1a\n...", b"%PDF-1.4 ...", b"RIFF\x00\x00\x00\x00WAVEfmt "
    gets = [interaction(None, body, method="GET") for body in (png, pdf, wav)]
    outcomes = imported(*gets, folders=("tests",), hosts=["*"])
    assert [o.action for o in outcomes] == ["imported"] * 4
    stored = [json.loads(o.data) for o in outcomes]
    assert [c["request"]["url"] for c in stored] == [
        "https://raw.githubusercontent.com/langchain-ai/docs/4d11d08b6b0e210bd456943f7a22febbd168b543/src/images/"
        "agentic-rag-output.png",
        "https://www.w3.org/WAI/ER/tests/xhtml/testfiles/resources/pdf/dummy.pdf",
        "https://upload.wikimedia.org/wikipedia/commons/6/6a/Northern_Flicker_202280456.wav",
        "https://upload.wikimedia.org/wikipedia/commons/3/3d/Alcal%C3%A1_de_Henares_%28RPS_13-04-2024%29_canto_de_"
        "ruise%C3%B1or_%28Luscinia_megarhynchos%29_en_el_Soto_del_Henares.wav",
    ]
    assert [c["response"]["headers"]["content-type"] for c in stored] == [
        "image/png", "application/pdf", "audio/wav", "audio/wav"
    ]  # fmt: skip
    assert "**REDACTED**" not in json.dumps(stored)
    out_of_scope = imported(gets[0], folders=("tests",))  # a CDN is outside the default hosts, as any other
    assert out_of_scope[0].action == "skipped" and "host raw.githubusercontent.com" in out_of_scope[0].detail


def test_a_multipart_upload_gets_its_content_type_back_from_its_boundary():
    boundary = "cea075973b0048b5b1356cd1c0fb5952"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
            f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n").encode()  # fmt: skip
    url = "https://api.openai.com/v1/files"
    [outcome] = imported(interaction(body, b'{"id": "file-1"}'), redacted_url=url)
    cassette = json.loads(outcome.data)
    content_type = f"multipart/form-data; boundary={boundary}"
    assert cassette["request"]["content_type"] == content_type
    assert cassette["key"] == live_key(url, body, content_type)  # keyed by its parts, as the proxy keys it


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("test_web_search.yaml.gz", ("", "test_web_search")),
        ("TestChatOpenAIStandard.test_stream.yaml", ("TestChatOpenAIStandard", "test_stream")),
        ("TestX.test_astream[gpt-4.1].yaml.gz", ("TestX", "test_astream[gpt-4.1]")),
        ("test_y[a.b-c].json", ("", "test_y[a.b-c]")),
    ],
)
def test_a_files_name_gives_its_class_and_test(name, parts):
    assert test_parts(name) == parts


def test_each_layout_finds_its_test_module(tmp_path):
    tests = tmp_path / "tests"
    (tests / "integration").mkdir(parents=True)
    (tests / "test_chat.py").write_text("def test_a():\n    pass\n")
    (tests / "integration" / "test_std.py").write_text(
        "import pytest\n\n@pytest.mark.vcr\nclass TestX(Base):\n    pass\n"
    )
    (tests / "unit_std_test.py").write_text("class TestX(Base):\n    pass\n")  # no vcr: not the one that recorded
    (tests / "integration" / "test_other.py").write_text("async def test_shared():\n    pass\n")
    (tests / "test_more.py").write_text("def test_shared():\n    pass\n")
    modules = TestModules(tmp_path)
    recording_layout = tests / "cassettes" / "test_chat" / "test_a.yaml"
    assert modules.test_ids(recording_layout) == ["tests/test_chat.py::test_a"]
    flat = tests / "cassettes" / "TestX.test_b[p1].yaml.gz"
    assert modules.test_ids(flat) == ["tests/integration/test_std.py::TestX::test_b[p1]"]
    assert modules.test_ids(tests / "cassettes" / "test_shared.yaml.gz") == [
        "tests/integration/test_other.py::test_shared",  # both define it: VCR gave both that one file
        "tests/test_more.py::test_shared",
    ]
    with pytest.raises(ValueError, match="no test module in tests/ defines test_gone"):
        modules.test_ids(tests / "cassettes" / "test_gone.yaml")
    with pytest.raises(ValueError, match="outside the working folder"):
        modules.test_ids(tmp_path.parent / "elsewhere.yaml")


PARAMETRIZED = """
import pytest


@pytest.mark.default_cassette("test_web_search.yaml.gz")
@pytest.mark.vcr
@pytest.mark.parametrize("output_version", ["v0", "responses/v1"])
def test_web_search(output_version):
    pass


class TestStandard(ChatModelIntegrationTests):
    pass
"""


def test_collected_node_ids_give_every_parametrization_and_inherited_tests(tmp_path):
    """langchain-openai's parametrized tests share the file their `default_cassette` names, and its standard
    suites inherit their tests: only pytest's collection knows their node ids."""
    (tmp_path / "tests" / "integration").mkdir(parents=True)
    (tmp_path / "tests" / "integration" / "test_api.py").write_text(PARAMETRIZED)
    collected = [
        "tests/integration/test_api.py::test_web_search[v0]",
        "tests/integration/test_api.py::test_web_search[responses/v1]",
        "tests/integration/test_api.py::TestStandard::test_stream[model1]",
        "tests/integration/test_api.py::TestStandard::test_stream[responses/v1]",
        "",
        "4 tests collected in 0.12s",
    ]
    shared = tmp_path / "tests" / "cassettes" / "test_web_search.yaml.gz"
    assert TestModules(tmp_path).test_ids(shared) == ["tests/integration/test_api.py::test_web_search"]
    modules = TestModules(tmp_path, collected)
    assert modules.test_ids(shared) == [
        "tests/integration/test_api.py::test_web_search[responses/v1]",
        "tests/integration/test_api.py::test_web_search[v0]",
    ]
    one = tmp_path / "tests" / "cassettes" / "TestStandard.test_stream[responses-v1].yaml.gz"  # `/` spelled `-`
    assert modules.test_ids(one) == ["tests/integration/test_api.py::TestStandard::test_stream[responses/v1]"]
    gone = tmp_path / "tests" / "cassettes" / "TestStandard.test_removed.yaml.gz"
    with pytest.raises(
        ValueError, match=re.escape("no collected test is tests/integration/test_api.py::TestStandard::test_removed")
    ):
        modules.test_ids(gone)


def test_a_class_imported_into_another_test_module_is_served_there_too(tmp_path):
    """langchain-openai's `test_responses_standard.py` imports `TestOpenAIStandard` from `test_base_standard.py`:
    pytest collects its `test_stream_time` in both modules, and under VCR both replayed the class's file."""
    folder = tmp_path / "tests" / "integration"
    folder.mkdir(parents=True)
    (folder / "test_base_standard.py").write_text("class TestOpenAIStandard:\n    enable_vcr_tests = True\n")
    (folder / "test_responses_standard.py").write_text(
        "import pytest\nfrom tests.integration.test_base_standard import (\n    TestOpenAIStandard,\n)\n\n\n"
        "class TestOpenAIResponses(TestOpenAIStandard):\n    pass\n"
    )
    collected = [
        "tests/integration/test_base_standard.py::TestOpenAIStandard::test_stream_time",
        "tests/integration/test_responses_standard.py::TestOpenAIStandard::test_stream_time",
        "tests/integration/test_responses_standard.py::TestOpenAIResponses::test_stream_time",
        "tests/integration/test_unrelated.py::TestOpenAIStandard::test_stream_time",
    ]
    (folder / "test_unrelated.py").write_text("class Other:\n    pass\n")  # imports no such class: not served
    cassette = tmp_path / "tests" / "cassettes" / "TestOpenAIStandard.test_stream_time.yaml.gz"
    assert TestModules(tmp_path, collected).test_ids(cassette) == [
        "tests/integration/test_base_standard.py::TestOpenAIStandard::test_stream_time",
        "tests/integration/test_responses_standard.py::TestOpenAIStandard::test_stream_time",
    ]
