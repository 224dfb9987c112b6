"""`cassette import` as a user runs it on a project tree: folders, files that are not recordings, bad options,
dry runs, and the exit status that gates CI."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from cassette_proxy import cli
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.files.location import cassette_files
from vcr.request import Request
from vcr.serialize import serialize
from vcr.serializers import yamlserializer

API = "https://api.openai.com/v1/chat/completions"


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)


def write_vcr(path: Path, prompt: str, answer: str) -> Path:
    request = Request(
        "POST", API, json.dumps({"messages": [{"content": prompt}]}).encode(), {"content-type": "application/json"}
    )
    response = {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
                "body": {"string": json.dumps({"answer": answer})}}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(serialize({"requests": [request], "responses": [response]}, yamlserializer))
    return path


def run(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["import", *args])
    return code, capsys.readouterr().out


def test_a_project_folder_imports_its_recordings_and_ignores_other_json_and_its_own_cassettes(tmp_path, capsys):
    write_vcr(tmp_path / "tests" / "cassettes" / "test_mod" / "test_one.yaml", "one", "1")
    (tmp_path / "tests" / "fixtures.json").write_text('{"users": []}')
    assert run(capsys, "tests", "--dir", "tests/imported")[0] == 0
    code, out = run(capsys, "tests", "--dir", "tests/imported")  # the cassettes written are not read back as input
    assert code == 0, out
    assert "ignored   tests/fixtures.json: not a VCR cassette" in out
    assert "1 unchanged" in out and "UNREADABLE" not in out
    assert len(cassette_files(tmp_path / "tests" / "imported")) == 1


def test_a_named_file_that_is_not_a_recording_fails_the_command(tmp_path, capsys):
    (tmp_path / "notes.json").write_text("[1, 2]")
    code, out = run(capsys, "notes.json", "--dir", "cassettes")
    assert code == 1
    assert "UNREADABLE notes.json: not a VCR cassette" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ignore", "metadata..id"], "invalid ignore path 'metadata..id'"),
        (["--redact", "/(/x"], "invalid regular expression"),
        (["--hosts", " "], "must list host globs"),
    ],
)
def test_bad_options_stop_before_anything_is_written(tmp_path, capsys, args, message):
    write_vcr(tmp_path / "a.yaml", "one", "1")
    code, out = run(capsys, "a.yaml", "--dir", "cassettes", *args)
    assert code == 2 and message in out
    assert not (tmp_path / "cassettes").exists()


def test_a_missing_path_is_named(capsys):
    code, out = run(capsys, "nowhere.yaml")
    assert code == 2 and "no such file or folder: nowhere.yaml" in out


def test_dry_run_reports_and_writes_nothing(tmp_path, capsys):
    write_vcr(tmp_path / "a.yaml", "one", "1")
    code, out = run(capsys, "a.yaml", "--dir", "cassettes", "--dry-run")
    assert code == 0 and "dry run, nothing written" in out and "1 imported" in out, out
    assert not (tmp_path / "cassettes").exists()


def test_imported_cassettes_are_read_by_stale_and_ls(tmp_path, capsys):
    """The files are ordinary cassettes: the review commands read them like recorded ones."""
    write_vcr(tmp_path / "a.yaml", "one", "1")
    run(capsys, "a.yaml", "--dir", "cassettes")
    code = cli.main(["stale", "cassettes", "--max-age", "1y"])
    out = capsys.readouterr().out
    days = re.search(r"recorded (\d+) days ago", out)
    assert code == 1 and days and int(days.group(1)) > 20000  # undated by VCR (1970): listed for a re-record
    assert cli.main(["ls", "cassettes"]) == 0


def test_files_outside_the_working_folder_are_named_from_the_folder_given(tmp_path, capsys, monkeypatch):
    """Two tests' files of the same name stay apart, and no absolute path reaches a cassette."""
    project = tmp_path / "project"
    write_vcr(project / "cassettes" / "test_a" / "test_chat.yaml", "a", "1")
    write_vcr(project / "cassettes" / "test_b" / "test_chat.yaml", "b", "2")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out = run(capsys, str(project / "cassettes"), "--dir", "imported")
    assert code == 0, out
    origins = sorted(load(p)["recorded_with"]["imported_from"] for p in cassette_files(Path("imported")))
    assert origins == ["vcr: cassettes/test_a/test_chat.yaml", "vcr: cassettes/test_b/test_chat.yaml"]
    assert str(tmp_path) not in "".join(p.read_text() for p in cassette_files(Path("imported")))


def test_hostile_files_are_refused_each_naming_its_limit_and_the_others_are_imported(tmp_path, capsys):
    folder = tmp_path / "tests" / "cassettes"
    write_vcr(folder / "test_good.yaml", "one", "1")
    anchors = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    anchors += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    (folder / "test_bomb.yaml").write_text("\n".join(anchors) + "\n")
    (folder / "test_deep.yaml").write_text("[" * 50_000 + "]" * 50_000)
    (folder / "test_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    code, out = run(capsys, "tests", "--dir", "imported")
    assert code == 1, out
    assert "UNREADABLE tests/cassettes/test_bomb.yaml: its YAML aliases expand to more than 100000 nodes" in out
    assert "UNREADABLE tests/cassettes/test_deep.yaml: nests deeper than 100 levels, the limit" in out
    assert "tests/cassettes/test_deep.json: nests deeper than 100 levels, the limit" in out
    assert "1 file(s), 2 unreadable into imported: 1 imported" in out  # the JSON one is `ignored`: a folder's .json
    assert len(cassette_files(tmp_path / "imported")) == 1


def test_gzipped_cassettes_in_a_folder_are_found_and_read(tmp_path, capsys):
    plain = write_vcr(tmp_path / "tests" / "cassettes" / "test_chat.yaml", "one", "1")
    zipped = plain.with_name("test_chat.yaml.gz")
    zipped.write_bytes(gzip.compress(plain.read_bytes().replace(b"one", b"two")))
    plain.unlink()
    code, out = run(capsys, "tests", "--dir", "imported")
    assert code == 0, out
    assert "<- tests/cassettes/test_chat.yaml.gz#1" in out and "1 imported" in out


def test_anything_left_out_fails_the_command_and_the_summary_says_so(tmp_path, capsys):
    write_vcr(tmp_path / "a.yaml", "one", "1")
    code, out = run(capsys, "a.yaml", "--dir", "cassettes", "--hosts", "api.anthropic.com")
    assert code == 1
    assert "SKIPPED   a.yaml#1: POST https://api.openai.com/v1/chat/completions: host api.openai.com is not" in out
    assert "1 interaction(s) and 0 file(s) not imported" in out
    assert run(capsys, "a.yaml", "--dir", "cassettes")[0] == 0


def test_key_header_adds_to_the_defaults_as_in_run(tmp_path, capsys):
    write_vcr(tmp_path / "a.yaml", "one", "1")
    assert (
        run(capsys, "a.yaml", "--dir", "cassettes", "--key-header", "X-Tenant", "--ignore-value", "pydantic-ai")[0] == 0
    )
    [path] = cassette_files(tmp_path / "cassettes")
    keyed_with = load(path)["keyed_with"]
    assert keyed_with["key_headers"] == ["anthropic-version", "anthropic-beta", "openai-beta", "x-tenant"]
    assert keyed_with["ignore_values"] == ["pyd_ai_[0-9a-f]{32}"]
    code, out = run(capsys, "a.yaml", "--dir", "cassettes", "--key-header", "authorization")
    assert code == 2 and "--key-header: 'authorization' carries a credential" in out


def test_the_test_scope_files_pytest_recordings_layout_under_each_test(tmp_path, capsys):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_chat.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    for test in ("test_one", "test_two"):
        write_vcr(tmp_path / "tests" / "cassettes" / "test_chat" / f"{test}.yaml", "same prompt", test)
    write_vcr(tmp_path / "tests" / "cassettes" / "test_chat" / "test_gone.yaml", "same prompt", "gone")
    code, out = run(capsys, "tests/cassettes", "--dir", "cassettes", "--scope", "test")
    assert code == 1  # test_gone's file names no test
    assert "test scope: no test module in tests/test_chat.py defines test_gone, which the file is named after" in out
    names = sorted(p.relative_to(tmp_path / "cassettes").as_posix().split("/api.openai.com")[0]
                   for p in cassette_files(tmp_path / "cassettes"))  # fmt: skip
    assert names == ["tests/tests/test_chat.py/test_one", "tests/tests/test_chat.py/test_two"]


SHARED_FILE = """
import pytest


@pytest.mark.default_cassette("test_web_search.yaml.gz")
@pytest.mark.vcr
@pytest.mark.parametrize("output_version", ["v0", "responses/v1"])
def test_web_search(output_version):
    pass


@pytest.mark.default_cassette("test_web_search.yaml.gz")
@pytest.mark.vcr
async def test_web_search_async():
    pass


@pytest.mark.vcr("test_web_search.yaml.gz")
def test_also_reads_the_search():
    pass


@pytest.mark.vcr
def test_code_interpreter():
    pass


@pytest.mark.default_cassette("test_code_interpreter.yaml.gz")
@pytest.mark.vcr
def test_code_interpreter_again():
    pass
"""


def test_the_test_scope_gives_a_file_several_tests_name_to_each_of_them(tmp_path, capsys):
    """langchain-openai: a parametrized test and its sibling name one file with default_cassette; another file is
    the one a test's own name spells and a sibling names: under VCR each replayed it, so each test's folder gets it."""
    (tmp_path / "tests" / "integration").mkdir(parents=True)
    (tmp_path / "tests" / "integration" / "test_api.py").write_text(SHARED_FILE)
    for name in ("test_web_search", "test_code_interpreter"):
        path = write_vcr(tmp_path / "tests" / "cassettes" / f"{name}.yaml", name, name)
        path.with_suffix(".yaml.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    node_ids = tmp_path / "node-ids.txt"
    module = "tests/integration/test_api.py"
    node_ids.write_text(
        f"{module}::test_web_search[v0]\n{module}::test_web_search[responses/v1]\n{module}::test_web_search_async\n"
        f"{module}::test_code_interpreter\n{module}::test_code_interpreter_again\n{module}::test_also_reads_the_search\n"
    )
    code, out = run(capsys, "tests/cassettes", "--dir", "cassettes", "--scope", "test", "--node-ids", str(node_ids))
    assert code == 0, out
    folders = sorted({p.relative_to(tmp_path / "cassettes").as_posix().split("/api.openai.com")[0]
                      for p in cassette_files(tmp_path / "cassettes")})  # fmt: skip
    assert folders == [
        "tests/tests/integration/test_api.py/test_also_reads_the_search",  # `vcr("…")` adds a file to its own
        "tests/tests/integration/test_api.py/test_code_interpreter",
        "tests/tests/integration/test_api.py/test_code_interpreter_again",
        "tests/tests/integration/test_api.py/test_web_search_async",
        "tests/tests/integration/test_api.py/test_web_search_responses_v1",
        "tests/tests/integration/test_api.py/test_web_search_v0",
    ]
