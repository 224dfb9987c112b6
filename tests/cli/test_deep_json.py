"""JSON nested a thousand levels deep (2 KB) is one file's clear error in every command, never a RecursionError
traceback (core/files/json_depth.py): a file that deep, a cassette nested past the limit that still parses, and a stream
event that deep inside an otherwise good cassette, which is read with that event shown as text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.files.json_depth import MAX_DEPTH
from cassette_proxy.core.keys.recipe import make_recipe, stored_key
from samples import cassette_path, chat, write

DEEP, PAST_LIMIT = (f"{n:032x}" for n in (5, 6))
REASON = f"JSON nested deeper than {MAX_DEPTH} levels: not a recording"
THOUSAND = "[" * 1000 + "]" * 1000


def deep_event_cassette() -> dict:
    cassette = chat("a streamed prompt", "")
    cassette["response"] = {
        "status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": "events",
        "body": [{"ms": 1, "text": 'data: {"choices": [{"delta": {"content": "streamed fine"}}]}\n\n'},
                 {"ms": 2, "text": f"data: {THOUSAND}\n\n"},
                 {"ms": 3, "text": "data: [DONE]\n\n"}],
    }  # fmt: skip
    return cassette


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cassettes"
    good = write(root, chat("a fine prompt", "a fine answer"))
    (good.parent / f"{DEEP}.json").write_text(THOUSAND)
    past = chat("nested", "x")
    past["request"]["body"]["messages"][0]["content"] = json.loads("[" * 150 + "]" * 150)
    past["key"] = stored_key(past["request"], make_recipe())
    write(root, past, str(Path(cassette_path(past)).with_name(f"{PAST_LIMIT}.json")))
    write(root, deep_event_cassette())
    monkeypatch.chdir(tmp_path)
    return root


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "Traceback" not in out and "RecursionError" not in out, out
    return code, out


def assert_each_refused(out: str) -> None:
    for key in (DEEP, PAST_LIMIT):
        assert any(key[-8:] in line and REASON in line for line in out.splitlines()), (key, out)


def test_ls_scan_and_rekey_name_each_deep_file_and_go_on(folder, capsys):
    code, out = run(capsys, "ls", "cassettes")
    assert code == 1 and "a fine prompt" in out and "a streamed prompt" in out
    assert_each_refused(out)
    code, out = run(capsys, "scan", "cassettes")
    assert code == 1 and "in 2 of 4 file(s)" in out
    assert_each_refused(out)
    code, out = run(capsys, "rekey", "--dir", "cassettes")
    assert code == 1 and "nothing changed (2 problems)" in out
    assert_each_refused(out)


def test_show_refuses_a_deep_file_and_shows_a_deep_event_as_text(folder, capsys):
    for key in (DEEP, PAST_LIMIT):
        code, out = run(capsys, "show", key)
        assert code == 1 and REASON in out
    streamed = cassette_path(deep_event_cassette())
    code, out = run(capsys, "show", f"cassettes/{streamed}")
    assert code == 0 and "streamed fine" in out


def test_view_lists_deep_files_with_their_reason(folder, capsys):
    code, out = run(capsys, "view", "cassettes", "--html", "page.html", "--no-cache")
    assert code == 0 and "(4 of 4 cassettes)" in out
    page = Path("page.html").read_text(encoding="utf-8")
    data = json.loads(page.split('<script type="application/json" id="cassette-data">', 1)[1].split("</script>", 1)[0])
    errors = {entry["id"].rsplit("/", 1)[-1][:32]: entry.get("error", "") for entry in data["cassettes"]}
    assert REASON in errors[DEEP] and REASON in errors[PAST_LIMIT]


def test_diff_names_a_deep_file_added_or_at_head(folder, capsys):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "dev@example.invalid")
    git("config", "user.name", "dev")
    git("add", "-A")
    git("commit", "-qm", "cassettes")
    deep = next(folder.rglob(f"{DEEP}.json"))
    deep.write_text(json.dumps(chat("now fine", "fine")))  # deep at HEAD, readable now
    (deep.parent / f"{7:032x}.json").write_text(THOUSAND)  # a new one, deep
    code, out = run(capsys, "diff")
    assert code == 1
    assert f"{DEEP}.json at HEAD: {REASON}" in out and f"{7:032x}.json: {REASON}" in out
