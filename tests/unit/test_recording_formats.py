"""Reading foreign recordings (core/migration/recording_formats.py): gzip'd files, langchain_tests' layout as its own serializer
writes it, and the bounds that keep a hostile file from exhausting memory, time or the C stack."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time

import pytest
import yaml
from cassette_proxy.core.migration import recording_formats
from cassette_proxy.core.migration.recording_formats import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    Recorded,
    UnreadableRecording,
    Unusable,
    read_recording,
)
from vcr.request import Request
from vcr.serialize import serialize
from vcr.serializers import jsonserializer, yamlserializer

API = "https://api.openai.com/v1/chat/completions"


def vcr_interaction(prompt: str) -> tuple[Request, dict]:
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}).encode()
    request = Request("POST", API, body, {"content-type": "application/json"})
    return request, {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
                     "body": {"string": b'{"id": "x"}'}}  # fmt: skip


def langchain_cassette(*interactions: tuple[Request, dict]) -> bytes:
    """A cassette as langchain_tests' CustomSerializer writes it (gzip'd YAML of VCR's request and response lists)."""
    from langchain_tests.conftest import CustomSerializer

    return CustomSerializer.serialize(
        {"requests": [r for r, _ in interactions], "responses": [r for _, r in interactions]}
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a.yaml.gz", serialize({"requests": [vcr_interaction("hi")[0]], "responses": [vcr_interaction("hi")[1]]},
                                yamlserializer).encode()),
        ("a.json.gz", serialize({"requests": [vcr_interaction("hi")[0]], "responses": [vcr_interaction("hi")[1]]},
                                jsonserializer).encode()),
        ("a.har.gz", json.dumps({"log": {"entries": [{
            "request": {"method": "POST", "url": API, "headers": [], "postData": {"text": "{}"}},
            "response": {"status": 200, "headers": [], "content": {"text": "{}"}}}]}}).encode()),
    ],
    ids=["yaml", "json", "har"],
)  # fmt: skip
def test_gzipped_recordings_read_as_the_plain_ones(name, text):
    kind, entries = read_recording(gzip.compress(text), name)
    assert (kind, entries) == read_recording(text, name)
    assert isinstance(entries[0], Recorded) and entries[0].url == API


def test_several_gzip_members_read_as_one_file():
    text = serialize({"requests": [vcr_interaction("hi")[0]], "responses": [vcr_interaction("hi")[1]]}, yamlserializer)
    half = len(text) // 2
    joined = gzip.compress(text[:half].encode()) + gzip.compress(text[half:].encode())
    assert read_recording(joined, "a.yaml.gz")[0] == "vcr"


def test_langchain_tests_layout_is_read_with_its_redacted_values_as_written():
    request, response = vcr_interaction("hi")
    request.uri = "**REDACTED**"  # as every partner package's conftest does
    for name in list(request.headers):
        request.headers[name] = "**REDACTED**"
    kind, [entry] = read_recording(langchain_cassette((request, response)), "test_x.yaml.gz")
    assert kind == "langchain"
    assert entry.url == "**REDACTED**" and entry.request_headers == (("content-type", "**REDACTED**"),)
    assert json.loads(entry.request_body)["messages"][0]["content"] == "hi"
    assert entry.status == 200 and entry.response_body == b'{"id": "x"}'


def test_langchain_lists_of_different_lengths_report_the_unpaired_entries():
    request, response = vcr_interaction("hi")
    text = yaml.safe_dump({"requests": [request._to_dict(), request._to_dict()], "responses": [response]}).encode()
    _, [first, second] = read_recording(text, "t.yaml")
    assert isinstance(first, Recorded)
    assert isinstance(second, Unusable) and second.invalid and "no response is recorded" in second.reason


def test_an_alias_bomb_is_refused_at_once_naming_the_limit():
    """873 bytes, ten anchors each ten times the last: 10^10 nodes expanded."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    bomb = ("\n".join(lines) + "\n").encode()
    assert len(bomb) < 1000
    started = time.perf_counter()
    with pytest.raises(UnreadableRecording, match=f"aliases expand to more than {MAX_ALIAS_NODES} nodes"):
        read_recording(bomb, "bomb.yaml")
    assert time.perf_counter() - started < 5  # not a timing claim: a bomb that expanded would not end at all


def test_a_few_aliases_as_pyyaml_writes_them_are_read():
    """PyYAML anchors an object it dumps twice (a headers dict shared by two interactions)."""
    request, response = vcr_interaction("hi")
    headers = {"content-type": ["application/json"]}
    text = yaml.dump({"interactions": [{"request": request._to_dict(), "response": {**response, "headers": headers}},
                                       {"request": request._to_dict(), "response": {**response, "headers": headers}}]})  # fmt: skip
    assert "&id001" in text
    _, entries = read_recording(text.encode(), "t.yaml")
    assert [e.response_headers for e in entries] == [(("content-type", "application/json"),)] * 2


@pytest.mark.parametrize(
    "text",
    ["[" * 50_000 + "]" * 50_000, "- " * 50_000 + "x", "{a: " * 50_000 + "1" + "}" * 50_000],
    ids=["flow-sequence", "block-sequence", "flow-mapping"],
)
def test_deep_yaml_is_refused_naming_the_limit(text):
    with pytest.raises(UnreadableRecording, match=f"nests deeper than {MAX_DEPTH} levels"):
        read_recording(text.encode(), "deep.yaml")


def test_deep_yaml_is_refused_even_by_a_libyaml_that_would_crash_on_it(monkeypatch):
    """Older libyaml wheels recurse without a limit: the bound must hold without libyaml's own."""
    monkeypatch.setattr(recording_formats, "LIBYAML_LIMITS_NESTING", False)
    with pytest.raises(UnreadableRecording, match="nests deeper than"):
        read_recording(("[" * 50_000 + "]" * 50_000).encode(), "deep.yaml")


def test_deep_json_is_refused_naming_the_limit():
    for depth in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(UnreadableRecording, match=f"nests deeper than {MAX_DEPTH} levels"):
            read_recording(("[" * depth + "]" * depth).encode(), "deep.json")


def test_nesting_up_to_the_limit_is_read():
    body = {"interactions": []}
    value: dict = body
    for _ in range(MAX_DEPTH - 2):
        value["x"] = {}
        value = value["x"]
    assert read_recording(json.dumps(body).encode(), "ok.json")[0] == "vcr"


def test_a_gzip_bomb_is_refused_naming_the_limit(monkeypatch):
    monkeypatch.setattr(recording_formats, "MAX_RECORDING_BYTES", 1_000_000)
    bomb = gzip.compress(b" " * 10_000_000)  # 10 MB from 10 kB
    with pytest.raises(UnreadableRecording, match="decompresses to more than 1000000 bytes"):
        read_recording(bomb, "bomb.yaml.gz")
    cut = gzip.compress(b"interactions: []\n" * 100)
    with pytest.raises(UnreadableRecording, match="not a readable gzip file"):
        read_recording(cut[: len(cut) // 2], "cut.yaml.gz")


@pytest.mark.parametrize("loader", ["C", "pure"])
def test_code_running_yaml_tags_are_refused(loader, monkeypatch):
    if loader == "pure":
        monkeypatch.setattr(recording_formats, "LIBYAML_LIMITS_NESTING", False)
    text = b"interactions:\n- !!python/object/apply:os.system ['echo owned']\nversion: 1\n"
    with pytest.raises(UnreadableRecording, match="neither JSON nor YAML a recording can hold"):
        read_recording(text, "evil.yaml")


def test_the_c_loader_is_used_where_pyyaml_ships_it():
    assert recording_formats.LIBYAML == yaml.__with_libyaml__ is True


def test_without_libyaml_the_pure_loader_reads_the_same():
    """A subprocess with libyaml hidden: the fallback still reads (and bounds) recordings."""
    script = (
        "import sys; sys.modules['yaml._yaml'] = None\n"
        "from cassette_proxy.core.migration import recording_formats as r\n"
        "assert not r.LIBYAML and not r.LIBYAML_LIMITS_NESTING\n"
        "print(r.read_recording(sys.stdin.buffer.read(), 'a.yaml')[0])\n"
    )
    text = serialize({"requests": [vcr_interaction("hi")[0]], "responses": [vcr_interaction("hi")[1]]}, yamlserializer)
    out = subprocess.run([sys.executable, "-c", script], input=text.encode(), capture_output=True, check=True)
    assert out.stdout.decode().strip() == "vcr"


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (b'{"hello": 1}', "auto", 'not a VCR cassette \\("interactions": \\[...\\]\\) or a langchain_tests cassette'),
        (b'{"log": {"entries": []}}', "vcr", r"not a VCR cassette .* \(it looks like har\)"),
        (b"\xff\xfe", "auto", "not UTF-8 text"),
    ],
)
def test_files_that_are_not_recordings_say_what_was_expected(text, kind, message):
    with pytest.raises(UnreadableRecording, match=message):
        read_recording(text, "f.json", kind)
