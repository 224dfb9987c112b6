"""`cassette import` as a user runs it on a project tree: folders, files that are not recordings, bad options,
dry runs, and the exit status that gates CI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cassette_proxy import cli
from cassette_proxy.core.cassette_file import load
from cassette_proxy.core.location import cassette_files
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
    assert code == 0 and "dry run, nothing written" in out and "1 imported" in out
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
