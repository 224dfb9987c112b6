"""`cassette import` end to end: VCR.py cassettes written by VCR.py itself and HAR files (mitmproxy's own export,
a Polly.js-shaped one) become cassettes the real proxy answers from, with the real openai SDK, and an imported
request gets the very key and path the proxy gives the same request when it records it."""

from __future__ import annotations

import base64
import gzip
import json
import sys
from pathlib import Path

import anthropic
import cassette_command
import httpx
import openai
import pytest
import vcr
from cassette_proxy import cli
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.files.location import cassette_files
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY
from inner_pytest import RECORDING, only_plugins

pytest_plugins = ["pytester"]

GOOGLE_KEY = "AIzaFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0123"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch) -> None:
    """The command names sources relative to the working folder, as a user runs it from the project root."""
    monkeypatch.chdir(tmp_path)


def chat(prompt: str, **headers: str) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, default_headers=headers)
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    return completion.choices[0].message.content


def streamed_chat(prompt: str, **headers: str) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, default_headers=headers)
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], stream=True
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def anthropic_message(prompt: str) -> str:
    client = anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY, max_retries=0)
    message = client.messages.create(
        model="claude-3-5-haiku-latest", max_tokens=64, messages=[{"role": "user", "content": prompt}]
    )
    return message.content[0].text


def gemini(prompt: str) -> dict:
    """A Gemini-style call with its API key in the query (`?key=`), through httpx as a user's code would."""
    with httpx.Client(trust_env=True) as client:
        answer = client.post(
            GEMINI_URL, params={"key": GOOGLE_KEY, "alt": "json"}, json={"contents": [{"parts": [{"text": prompt}]}]}
        )
    answer.raise_for_status()
    return answer.json()


def the_calls() -> list:
    """One of each shape: JSON, an SSE stream, a key header (anthropic-version), a query with a secret in it."""
    return [chat("hello"), streamed_chat("stream me"), anthropic_message("bonjour"), gemini("hallo")]


def import_into(capsys, folder: Path, *paths: Path, args: tuple[str, ...] = ()) -> tuple[int, str]:
    code = cli.main(["import", *map(str, paths), "--dir", str(folder), *args])
    return code, capsys.readouterr().out


def cassettes(folder: Path) -> dict[str, dict]:
    return {path.relative_to(folder).as_posix(): load(path) for path in cassette_files(folder)}


def assert_no_secrets(folder: Path) -> None:
    for path in cassette_files(folder):
        text = path.read_text()
        for secret in (FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY, GOOGLE_KEY, "fake-cookie-value"):
            assert secret not in text, f"{secret} in {path}"
        assert "authorization" not in text.lower() and "x-api-key" not in text.lower()


def stream_texts(response: dict) -> list[str]:
    return [event["text"] for event in response["body"]] if response["body_format"] == "events" else response["body"]


def test_vcr_and_mitmproxy_har_imports_get_the_proxys_own_keys_and_replay(
    https_upstream, start_proxy, client_env, cassette_dir, tmp_path, capsys
):
    # One run: the proxy records the calls while VCR.py records the same calls on the client side.
    recorder = start_proxy(https_upstream, cassette_mode="record")
    client_env(recorder)
    vcr_file = tmp_path / "recorded.yaml"
    with vcr.use_cassette(str(vcr_file), record_mode="all"):
        answers = the_calls()
    recorder.stop()
    recorded = cassettes(cassette_dir)
    assert len(recorded) == 4
    assert "!!binary" not in vcr_file.read_text()  # the proxy asked for identity: VCR saw plain bodies
    cassette_dir.rename(tmp_path / "recorded-by-the-proxy")

    from_vcr = cassette_dir  # where the replaying proxy below looks
    code, out = import_into(capsys, from_vcr, vcr_file)
    assert code == 0, out
    assert "4 imported" in out
    imported = cassettes(from_vcr)
    assert imported.keys() == recorded.keys()  # same key, same path, for every request
    for name, cassette in imported.items():
        proxy_made = recorded[name]
        assert cassette["key"] == proxy_made["key"]
        assert cassette["request"] == proxy_made["request"]
        assert cassette["response"]["status"] == proxy_made["response"]["status"]
        assert cassette["response"]["body_format"] == proxy_made["response"]["body_format"]
        assert stream_texts(cassette["response"]) == stream_texts(proxy_made["response"])
        assert cassette["recorded_with"]["imported_from"].startswith("vcr: ")
    assert_no_secrets(from_vcr)

    # The imported cassettes answer the same calls through the proxy, offline; mitmproxy exports them as HAR.
    har_file = tmp_path / "exported.har"
    served = https_upstream.count
    player = start_proxy(cassette_mode="replay", hardump=har_file)
    client_env(player)
    assert the_calls() == answers
    report = player.stop()
    assert (report["counts"]["hits"], report["counts"]["misses"], https_upstream.count) == (4, 0, served)
    assert len(json.loads(har_file.read_text())["log"]["entries"]) == 4

    from_har = tmp_path / "from-har"
    code, out = import_into(capsys, from_har, har_file)
    assert code == 0, out
    assert cassettes(from_har).keys() == recorded.keys()
    for name, cassette in cassettes(from_har).items():
        assert cassette["request"] == recorded[name]["request"]
        assert cassette["recorded_with"]["imported_from"].startswith("har: ")
    assert_no_secrets(from_har)


@pytest.mark.parametrize("decode_compressed_response", [False, True], ids=["gzip-kept", "decoded-by-vcr"])
def test_vcr_gzip_bodies_sse_and_repeated_requests_replay_in_order(
    decode_compressed_response, http_upstream, start_proxy, client_env, cassette_dir, tmp_path, capsys
):
    # Recorded by VCR.py alone (the proxy only passes traffic to the fake API): bodies as the API sent them.
    client_env(start_proxy(http_upstream, cassette_mode="off"))
    vcr_file = tmp_path / "cassettes" / "test_agent.yaml"
    with vcr.use_cassette(str(vcr_file), record_mode="all", decode_compressed_response=decode_compressed_response):
        answers = [
            chat("zipped", **{"x-fake-gzip": "1"}),
            streamed_chat("zipped stream"),  # the fake API gzips a stream for a client that accepts gzip
            *[chat("again?", **{"x-fake-numbered": "1"}) for _ in range(3)],
        ]
    assert answers[2:] != [answers[2]] * 3  # the same request, three different answers
    text = vcr_file.read_text()
    assert ("!!binary" in text) is not decode_compressed_response
    assert ("data: [DONE]" in text) is decode_compressed_response

    code, out = import_into(capsys, cassette_dir, vcr_file)
    assert code == 0, out
    assert "5 imported" in out and "cassette_repeats=sequence" in out
    names = sorted(cassettes(cassette_dir))
    assert sum(name.endswith((".2.json", ".3.json")) for name in names) == 2
    streamed = next(c for c in cassettes(cassette_dir).values() if c["request"]["body"].get("stream"))
    assert streamed["response"]["body_format"] == "events"
    assert streamed["response"]["body"][-1] == {"ms": 0, "text": "data: [DONE]\n\n"}
    assert_no_secrets(cassette_dir)

    served = http_upstream.count
    player = start_proxy(cassette_mode="replay", cassette_repeats="sequence")
    client_env(player)
    replayed = [
        chat("zipped", **{"x-fake-gzip": "1"}),
        streamed_chat("zipped stream"),
        *[chat("again?", **{"x-fake-numbered": "1"}) for _ in range(3)],
    ]
    assert replayed == answers
    assert player.stop()["counts"]["misses"] == 0 and http_upstream.count == served


def har_entry(method: str, url: str, body: dict | None, status: int, content: dict, **extra) -> dict:
    """An entry shaped as Polly.js writes one (headers as name/value lists, base64 content, timings)."""
    headers = [{"name": "authorization", "value": f"Bearer {FAKE_OPENAI_KEY}"}]
    if body is not None:
        headers.append({"name": "content-type", "value": "application/json"})
    request = {"method": method, "url": url, "httpVersion": "HTTP/1.1", "headers": headers, "queryString": [],
               "cookies": [], "headersSize": -1, "bodySize": 0}  # fmt: skip
    if body is not None:
        request["postData"] = {"mimeType": "application/json", "text": json.dumps(body)}
    return {
        "_id": "3c6f0f9a5e5d4c8b", "_order": 0, "startedDateTime": "2025-03-04T05:06:07.123Z", "time": 420,
        "request": request,
        "response": {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
                     "headers": [{"name": "content-type", "value": content["mimeType"]},
                                 {"name": "set-cookie", "value": "session=fake-cookie-value"}],
                     "content": content, "redirectURL": "", "headersSize": -1, "bodySize": -1},
        "cache": {}, "timings": {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 300, "receive": 120,
                                 "ssl": -1},
        **extra,
    }  # fmt: skip


def chat_body(prompt: str, stream: bool = False) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "model": "gpt-4o-mini"}
    return {**body, "stream": True} if stream else body


def test_polly_shaped_har_imports_and_answers_the_sdk_with_skips_reported(
    start_proxy, client_env, cassette_dir, tmp_path, capsys
):
    completion = {"id": "chatcmpl-har", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": f"from the HAR (not {FAKE_OPENAI_KEY})"}}]}  # fmt: skip
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]} for word in ("one ", "two")]  # fmt: skip
    sse = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    api = "https://api.openai.com/v1/chat/completions"
    har = {"log": {"version": "1.2", "creator": {"name": "Polly.JS", "version": "6.0.6"}, "entries": [
        har_entry("POST", api, chat_body("hello"), 200,
                  {"mimeType": "application/json", "size": 1,
                   "text": base64.b64encode(json.dumps(completion).encode()).decode(), "encoding": "base64"}),
        har_entry("POST", api, chat_body("stream me", stream=True), 200,
                  {"mimeType": "text/event-stream", "size": len(sse), "text": sse}),
        har_entry("POST", api, chat_body("refused"), 429, {"mimeType": "application/json", "size": 2, "text": "{}"}),
        har_entry("GET", "https://cdn.example.com/cat.png", None, 200, {"mimeType": "image/png", "size": 0}),
        {"request": {"method": "POST"}, "response": {"status": 200}},
    ]}}  # fmt: skip
    har_file = tmp_path / "recording.har"
    har_file.write_text(json.dumps(har))

    code, out = import_into(capsys, cassette_dir, har_file)
    assert code == 1, out  # the broken last entry needs a person
    assert "2 imported" in out and "2 skipped" in out and "1 invalid" in out
    assert (
        "status 429 is not among the statuses the proxy records (cassette_record_statuses; pass --record-status" in out
    )
    assert "host cdn.example.com is not under cassette control" in out
    assert "recording.har#5" in out and "not a HAR entry" in out
    stream = next(c for c in cassettes(cassette_dir).values() if c["request"]["body"].get("stream"))
    assert [event["ms"] for event in stream["response"]["body"]] == [0, 60, 120]  # timings.receive spread out
    assert stream["recorded_at"] == "2025-03-04T05:06:07+00:00"
    assert_no_secrets(cassette_dir)
    assert "[REDACTED:openai-key]" in json.dumps(cassettes(cassette_dir))  # the key the answer echoed

    client_env(start_proxy(cassette_mode="replay"))
    assert chat("hello") == "from the HAR (not [REDACTED:openai-key])"
    assert streamed_chat("stream me") == "one two"


def test_import_twice_changes_no_byte_and_says_unchanged(https_upstream, start_proxy, client_env, tmp_path, capsys):
    client_env(start_proxy(https_upstream, cassette_mode="off"))
    vcr_file = tmp_path / "tests" / "cassettes" / "test_module" / "test_chat.yaml"  # pytest-recording's layout
    with vcr.use_cassette(str(vcr_file), record_mode="all"):
        chat("hello")
        streamed_chat("stream me")
    folder = tmp_path / "imported"
    assert import_into(capsys, folder, tmp_path / "tests" / "cassettes")[0] == 0
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in cassette_files(folder)}
    code, out = import_into(capsys, folder, tmp_path / "tests" / "cassettes")
    assert code == 0 and "2 unchanged" in out
    assert not [line for line in out.splitlines() if line.startswith(("imported", "replaced"))]
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in cassette_files(folder)} == before


def test_the_same_request_with_different_answers_in_two_files_is_a_reported_collision(
    http_upstream, start_proxy, client_env, tmp_path, capsys
):
    client_env(start_proxy(http_upstream, cassette_mode="off"))
    first, second, third = (tmp_path / "vcr" / f"test_{n}.yaml" for n in ("a", "b", "c"))
    for path in (first, second):
        with vcr.use_cassette(str(path), record_mode="all"):
            chat("which call is this?", **{"x-fake-numbered": "1"})
    with vcr.use_cassette(str(third), record_mode="all"):
        chat("plain")
    folder = tmp_path / "imported"
    code, out = import_into(capsys, folder, tmp_path / "vcr")
    assert code == 1
    assert "COLLIDED" in out and "vcr/test_a.yaml#1 holds a different answer to the same request" in out
    assert "1 collided" in out and "2 imported" in out
    kept = [c for c in cassettes(folder).values() if c["request"]["body"]["messages"][0]["content"] != "plain"]
    assert kept[0]["response"]["body"]["choices"][0]["message"]["content"].startswith("#")
    assert kept[0]["recorded_with"]["imported_from"].endswith("vcr/test_a.yaml")


BEFORE = """
import openai
import pytest


@pytest.fixture(scope="module")
def vcr_config():
    return {{"filter_headers": ["authorization"], "decode_compressed_response": True}}


def ask(prompt, stream=False):
    client = openai.OpenAI(api_key="{key}", max_retries=0)
    messages = [{{"role": "user", "content": prompt}}]
    if not stream:
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    chunks = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


@pytest.mark.vcr
def test_summary():
    assert ask("summarise the cat") == "echo: summarise the cat"


@pytest.mark.vcr
def test_streamed_summary():
    assert ask("stream the cat", stream=True) == "echo: stream the cat"
"""


def test_a_pytest_recording_suite_switches_to_the_proxy_with_its_recordings(
    pytester, https_upstream, start_proxy, client_env, monkeypatch, capsys
):
    """The before and after of docs/import.md, really run: pytest-recording records, `cassette import` converts, the
    same tests without the decorator replay through the plugin's proxy, nothing reaching the API."""
    client_env(start_proxy(https_upstream, cassette_mode="off"))  # stands in for the internet
    only_plugins(monkeypatch, RECORDING)
    pytester.makepyfile(test_summary=BEFORE.format(key=FAKE_OPENAI_KEY))
    pytester.runpytest_subprocess("--record-mode=once").assert_outcomes(passed=2)
    recordings = sorted(p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*.yaml"))
    assert recordings == [
        "cassettes/test_summary/test_streamed_summary.yaml",
        "cassettes/test_summary/test_summary.yaml",
    ]

    assert cli.main(["import", "cassettes", "--dir", "imported"]) == 0
    assert "2 imported" in capsys.readouterr().out

    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name)
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\ncassette_dir = imported\n")
    pytester.makepyfile(test_summary=BEFORE.format(key=FAKE_OPENAI_KEY).replace("@pytest.mark.vcr\n", ""))
    served = https_upstream.count
    after = pytester.runpytest_subprocess("-p", "no:recording")
    after.assert_outcomes(passed=2)
    after.stdout.fnmatch_lines(["cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])
    assert https_upstream.count == served


# LangChain's recordings -----------------------------------------------------------------------------------------

SDK_CALLS = """
import json, anthropic, openai

def calls(openai_key, anthropic_key, anthropic_version=None):
    client = openai.OpenAI(api_key=openai_key, max_retries=0)
    chat = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}])
    stream = client.responses.create(model="gpt-5-nano", input="stream me", stream=True)
    streamed = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
    vectors = client.embeddings.create(model="text-embedding-3-small", input=["a cat"])
    claude = anthropic.Anthropic(api_key=anthropic_key, max_retries=0)
    message = claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "bonjour"}]
    )
    return [chat.choices[0].message.content, streamed, len(vectors.data[0].embedding), message.content[0].text]
"""


def partner_redaction(request):
    """langchain-openai's and langchain-anthropic's `remove_request_headers` (tests/conftest.py): every header value
    and the URI replaced, so that a cassette replays whether the suite talks to the API or to a gateway."""
    for name in request.headers:
        request.headers[name] = "**REDACTED**"
    request.uri = "**REDACTED**"
    return request


def partner_response_redaction(response: dict) -> dict:
    for name in response["headers"]:
        response["headers"][name] = "**REDACTED**"
    return response


def langchain_cassette(folder: Path, name: str):
    """VCR configured as a LangChain partner package configures it: langchain_tests' base config, serializer and
    persister (gzip'd YAML), matching on method and body, everything redacted."""
    from langchain_tests.conftest import CustomPersister, CustomSerializer, base_vcr_config

    config = base_vcr_config()
    config["match_on"] = [m for m in config["match_on"] if m != "uri"]
    config |= {
        "before_record_request": partner_redaction,
        "before_record_response": partner_response_redaction,
        "serializer": "yaml.gz",
        "path_transformer": vcr.VCR.ensure_suffix(".yaml.gz"),
        "cassette_library_dir": str(folder),
        "record_mode": "all",
    }
    recorder = vcr.VCR()
    recorder.register_persister(CustomPersister())
    recorder.register_serializer("yaml.gz", CustomSerializer())
    return recorder.use_cassette(name, **config)


def test_langchain_tests_cassettes_import_and_replay_with_the_real_sdks_under_cassette_run_strict(
    https_upstream, start_proxy, client_env, cassette_dir, tmp_path, capsys
):
    namespace: dict = {}
    exec(SDK_CALLS, namespace)
    client_env(start_proxy(https_upstream, cassette_mode="off"))  # stands in for the internet
    folder = tmp_path / "libs" / "partners" / "openai" / "tests" / "cassettes"  # as in the langchain repository
    with langchain_cassette(folder, "test_agent"):
        answers = namespace["calls"](FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY)
    [recorded] = folder.iterdir()
    assert recorded.name == "test_agent.yaml.gz" and recorded.read_bytes()[:2] == b"\x1f\x8b"
    assert b"**REDACTED**" in gzip.decompress(recorded.read_bytes())

    version = anthropic._constants.ANTHROPIC_API_VERSION  # what this SDK sends, the value the recording lost
    code, out = import_into(capsys, cassette_dir, folder, args=("--redacted-header", f"anthropic-version={version}"))
    assert code == 0, out
    assert "4 imported" in out
    urls = sorted(c["request"]["url"] for c in cassettes(cassette_dir).values())
    assert urls == [
        "https://api.anthropic.com/v1/messages",
        "https://api.openai.com/v1/chat/completions",
        "https://api.openai.com/v1/embeddings",
        "https://api.openai.com/v1/responses",
    ]
    assert not [p for p in cassette_files(cassette_dir) if "REDACTED**" in p.read_text()]
    assert_no_secrets(cassette_dir)

    script = tmp_path / "agent.py"
    script.write_text(SDK_CALLS + f"\nprint(json.dumps(calls({FAKE_OPENAI_KEY!r}, {FAKE_ANTHROPIC_KEY!r})))\n")
    served = https_upstream.count
    replay = cassette_command.cassette(
        "run", "--strict", "--dir", str(cassette_dir), "--", sys.executable, str(script), cwd=tmp_path
    )
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout.splitlines()[-1]) == answers
    assert "4 hits, 0 misses" in replay.stderr and https_upstream.count == served


PARTNER_CONFTEST = """
import pytest
from langchain_tests.conftest import CustomPersister, CustomSerializer, base_vcr_config
from vcr import VCR


def remove_request_headers(request):
    for name in request.headers:
        request.headers[name] = "**REDACTED**"
    request.uri = "**REDACTED**"
    return request


@pytest.fixture(scope="session")
def vcr_config():
    config = base_vcr_config()
    config["match_on"] = [m for m in config["match_on"] if m != "uri"]
    config["before_record_request"] = remove_request_headers
    config["serializer"] = "yaml.gz"
    config["path_transformer"] = VCR.ensure_suffix(".yaml.gz")
    return config


def pytest_recording_configure(config, vcr):
    vcr.register_persister(CustomPersister())
    vcr.register_serializer("yaml.gz", CustomSerializer())
"""

PARTNER_TESTS = """
import json, os
import openai
import pytest


def ask(request):
    client = openai.OpenAI(api_key="{key}", max_retries=0, default_headers={{"x-fake-numbered": "1"}})
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "same"}}])
    with open(os.environ["ANSWERS"], "a") as answers:
        answers.write(json.dumps([request.node.nodeid, reply.choices[0].message.content]) + "\\n")


@pytest.mark.vcr
def test_first(request):
    ask(request)


class TestChat:
    @pytest.mark.vcr
    def test_second(self, request):
        ask(request)
"""


def test_a_langchain_suite_imported_per_test_replays_each_tests_own_answer_under_the_plugin(
    pytester, https_upstream, start_proxy, client_env, monkeypatch, capsys
):
    """Two tests send the identical request and got different answers: a shared import would keep one (a
    collision); `--scope test` gives each test its own, and the plugin's test scope replays them."""
    client_env(start_proxy(https_upstream, cassette_mode="off"))  # stands in for the internet
    only_plugins(monkeypatch, RECORDING)
    monkeypatch.setenv("ANSWERS", str(pytester.path / "recorded.jsonl"))
    pytester.makeconftest(PARTNER_CONFTEST)
    (pytester.path / "tests" / "integration_tests").mkdir(parents=True)
    module = pytester.path / "tests" / "integration_tests" / "test_chat.py"
    module.write_text(PARTNER_TESTS.format(key=FAKE_OPENAI_KEY))
    pytester.makeini("[pytest]\nmarkers = vcr\n")
    pytester.runpytest_subprocess("--record-mode=once", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    recordings = sorted(p.name for p in (pytester.path / "tests" / "cassettes").iterdir())  # one flat folder
    assert recordings == ["TestChat.test_second.yaml.gz", "test_first.yaml.gz"]
    recorded = [json.loads(line) for line in (pytester.path / "recorded.jsonl").read_text().splitlines()]
    assert recorded[0][1] != recorded[1][1]  # the same request, two answers

    assert cli.main(["import", "tests/cassettes", "--dir", "cassettes", "--scope", "test"]) == 0
    out = capsys.readouterr().out
    assert "2 imported" in out and "COLLIDED" not in out

    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("ANSWERS", str(pytester.path / "replayed.jsonl"))
    only_plugins(monkeypatch)
    (pytester.path / "conftest.py").write_text("")  # the suite drops VCR
    module.write_text(PARTNER_TESTS.format(key=FAKE_OPENAI_KEY).replace("    @pytest.mark.vcr\n", "").replace(
        "@pytest.mark.vcr\n", ""))  # fmt: skip
    pytester.makeini("[pytest]\ncassette = true\ncassette_dir = cassettes\ncassette_scope = test\n")
    served = https_upstream.count
    after = pytester.runpytest_subprocess("-p", "no:recording", "-p", "no:cacheprovider")
    after.assert_outcomes(passed=2)
    after.stdout.fnmatch_lines(["cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])
    assert https_upstream.count == served
    replayed = [json.loads(line) for line in (pytester.path / "replayed.jsonl").read_text().splitlines()]
    assert sorted(replayed) == sorted(recorded)
