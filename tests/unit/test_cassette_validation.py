"""Cassettes are untrusted input: they arrive in pull requests, so every field is checked before it reaches the wire.

A stored `\\r\\n` would inject headers, a status of `0`, `true` or `10**30` would
send an illegal status line, a symlink could serve a file from outside the
cassette folder or read `/dev/zero` until memory runs out. Each refusal is a
500 `cassette_invalid` naming the file and the problem, and nothing is forwarded. Here, the reader itself; such
files through a real mitmdump: test_bad_input.py::test_hostile_cassettes_answer_500_cassette_invalid_and_nothing_is_forwarded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.workers.replay_cache import ReplayCache
from samples import SAMPLE_KEY, minimal

KEY = SAMPLE_KEY
cassette = minimal


def written(tmp_path: Path, content: dict) -> Path:
    path = tmp_path / "cassettes" / f"{KEY}.json"
    write_atomic(path, json.dumps(content).encode())
    return path


# --- the file's fields ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"status": 0}, "response.status 0 is not an HTTP status"),
        ({"status": 99}, "response.status 99 is not an HTTP status"),
        ({"status": 600}, "response.status 600 is not an HTTP status"),
        ({"status": 999}, "response.status 999 is not an HTTP status"),
        ({"status": 10**30}, "is not an HTTP status"),
        ({"status": True}, "response.status must be an integer from 100 to 599, not True"),
        ({"status": 200.0}, "must be an integer"),
        ({"status": "200"}, "must be an integer"),
        ({"headers": {"x-a": "ok\r\nx-injected: 1"}}, "response.headers.x-a holds a CR, LF or NUL"),
        ({"headers": {"x-a": "line\nbreak"}}, "holds a CR, LF or NUL"),
        ({"headers": {"x-a": "nul\x00"}}, "holds a CR, LF or NUL"),
        ({"headers": {"x-a\r\nx-injected": "1"}}, "is not an HTTP header name"),
        ({"headers": {"bad name": "1"}}, "is not an HTTP header name"),
        ({"headers": {"": "1"}}, "is not an HTTP header name"),
        ({"headers": {"x-a": 1}}, "response.headers.x-a must be a string"),
        ({"headers": ["x-a", "1"]}, "response.headers must be an object"),
        ({"body_format": "text", "body": 5}, "response.body does not match its body_format text"),
        ({"body_format": "base64", "body": ["x"]}, "does not match its body_format base64"),
        ({"body_format": "base64", "body": "not base64!"}, "does not match its body_format base64"),
        ({"body_format": "events", "body": "data: x\n\n"}, "response.body must be a list of"),
        ({"body_format": "events", "body": [{"ms": True, "text": "x"}]}, "response.body must be a list of"),
        ({"body_format": "events", "body": [{"ms": 1, "text": 2}]}, "response.body must be a list of"),
        ({"body_format": "mp3", "body": ""}, "unknown response.body_format"),
    ],
)
def test_a_field_of_the_wrong_type_or_shape_is_refused_naming_the_file_and_field(tmp_path, response, problem):
    path = written(tmp_path, cassette(**response))
    with pytest.raises(CassetteError) as error:
        load(path)
    assert problem in str(error.value)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    ("request_fields", "problem"),
    [
        ({"headers": {"anthropic-version": "1\r\nx: y"}}, "request.headers.anthropic-version holds a CR"),
        ({"body_format": "text", "body": {"a": 1}}, "request.body does not match its body_format text"),
    ],
)
def test_the_stored_request_is_checked_too(tmp_path, request_fields, problem):
    content = cassette()
    content["request"].update(request_fields)
    with pytest.raises(CassetteError, match=problem):
        load(written(tmp_path, content))


@pytest.mark.parametrize(
    "response",
    [
        {"status": 100},
        {"status": 599},
        {"headers": {"x-odd!#$%&'*+.^_`|~": "tab\tand é and \udcff"}},  # a value not UTF-8, as recorded
        {"body_format": "text", "body": ""},
        {"body_format": "base64", "body": "AAEC"},
        {"body_format": "events", "body": []},
        {"body_format": "json", "body": None},
    ],
)
def test_valid_edge_values_still_load(tmp_path, response):
    assert load(written(tmp_path, cassette(**response)))["response"]["status"] in (100, 200, 599)


# --- the file itself -----------------------------------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = written(tmp_path, cassette(body={"text": "x" * 5000}))
    with pytest.raises(CassetteError, match="over the cassette_max_size limit of 4096 bytes"):
        load(path, max_size=4096)
    assert load(path, max_size=path.stat().st_size)["key"] == KEY


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: path.symlink_to("/dev/zero"), "is not a regular file (a character device)"),
        (lambda path: os.mkfifo(path), "is not a regular file (a fifo)"),
        (lambda path: path.mkdir(), "is not a regular file (a folder)"),
    ],
    ids=["dev-zero", "fifo", "folder"],
)
def test_a_file_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, make, problem):
    path = tmp_path / f"{KEY}.json"
    make(path)
    with pytest.raises(CassetteError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load(path)  # a read of /dev/zero or of a fifo would never return


def test_a_symlink_inside_the_folder_is_followed_and_one_leading_outside_is_refused(tmp_path):
    root = tmp_path / "cassettes"
    target = written(tmp_path, cassette())
    inside = root / "alias" / "x.json"
    inside.parent.mkdir()
    inside.symlink_to(target)
    assert load(inside, root)["key"] == KEY
    outside_file = tmp_path / "elsewhere.json"
    outside_file.write_bytes(target.read_bytes())
    (root / "out.json").symlink_to(outside_file)
    with pytest.raises(CassetteError, match="outside the cassette folder"):
        load(root / "out.json", root)
    (root / "dir").symlink_to(tmp_path, target_is_directory=True)  # a folder symlink leading out
    with pytest.raises(CassetteError, match="outside the cassette folder"):
        load(root / "dir" / "elsewhere.json", root)


def test_the_replay_cache_checks_the_folder_and_the_size_and_rechecks_a_repointed_symlink(tmp_path):
    root = tmp_path / "cassettes"
    target = written(tmp_path, cassette())
    link = root / "link.json"
    link.symlink_to(target)
    cache = ReplayCache(root=root, max_size=10_000)
    assert cache.load(str(link)).cassette["response"]["status"] == 200
    outside = tmp_path / "outside.json"
    outside.write_bytes(target.read_bytes() + b" ")
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(CassetteError, match="outside the cassette folder"):
        cache.load(str(link))
    with pytest.raises(CassetteError, match="over the cassette_max_size limit"):
        ReplayCache(root=root, max_size=10).load(str(target))
