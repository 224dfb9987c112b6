"""`cassette prune`: deletes exactly what no run used, and nothing when a run cannot vouch for itself."""

from __future__ import annotations

import contextlib
import json

import openai
import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.location import cassette_files
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Report
from harness import FAKE_OPENAI_KEY
from samples import cassette_path, chat, write


def ask(prompt: str) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0)
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    return completion.choices[0].message.content


def run(start_proxy, client_env, upstream, mode: str, prompts: list[str]):
    """One test run through the proxy; returns its report's path."""
    proxy = start_proxy(upstream, cassette_mode=mode)
    client_env(proxy)
    for prompt in prompts:
        with contextlib.suppress(openai.ConflictError):  # a miss: the 409 the proxy answers in replay mode
            ask(prompt)
    proxy.stop()
    return proxy.report_path


def test_prune_deletes_exactly_the_cassettes_two_runs_did_not_use(
    https_upstream, start_proxy, client_env, cassette_dir, capsys
):
    run(start_proxy, client_env, https_upstream, "record", ["one", "two", "three", "four", "five"])
    recorded = {path.relative_to(cassette_dir).as_posix() for path in cassette_files(cassette_dir)}
    first = run(start_proxy, client_env, https_upstream, "replay", ["one", "two"])
    second = run(start_proxy, client_env, https_upstream, "replay", ["two", "three"])
    used = set(json.loads(first.read_text())["cassettes_used"]) | set(json.loads(second.read_text())["cassettes_used"])
    assert len(recorded) == 5 and len(used) == 3 and used < recorded

    assert main(["prune", str(first), str(second), "--dir", str(cassette_dir)]) == 1  # listed, not deleted
    assert capsys.readouterr().out.splitlines()[:-1] == sorted(recorded - used)
    assert len(cassette_files(cassette_dir)) == 5

    assert main(["prune", str(first), str(second), "--dir", str(cassette_dir), "--delete"]) == 0
    assert {path.relative_to(cassette_dir).as_posix() for path in cassette_files(cassette_dir)} == used

    third = run(start_proxy, client_env, https_upstream, "replay", ["one"])
    assert main(["prune", str(third), "--dir", str(cassette_dir)]) == 1  # only "one" used now: two listed


def test_prune_refuses_when_a_run_had_a_miss(https_upstream, start_proxy, client_env, cassette_dir, capsys):
    run(start_proxy, client_env, https_upstream, "record", ["one", "two"])
    clean = run(start_proxy, client_env, https_upstream, "replay", ["one", "two"])
    missed = run(start_proxy, client_env, https_upstream, "replay", ["one", "never recorded"])
    assert json.loads(missed.read_text())["counts"]["misses"] == 1

    assert main(["prune", str(clean), str(missed), "--dir", str(cassette_dir), "--delete"]) == 2
    out = capsys.readouterr().out
    assert "refusing, nothing deleted" in out and "1 miss(es) and 0 error(s)" in out
    assert len(cassette_files(cassette_dir)) == 2


def report(tmp_path, name: str, used: list[str], **fields) -> str:
    path = tmp_path / name
    Report(cassettes_used=set(used), **fields).write(path)
    return str(path)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"errors": [ErrorEntry(ErrorKind.INVALID, "unreadable")]}, "0 miss(es) and 1 error(s)"),
        ({"mode": "off"}, "an off-mode run reads no cassettes"),
    ],
)
def test_prune_refuses_reports_that_cannot_vouch_for_their_run(tmp_path, capsys, fields, reason):
    root = tmp_path / "cassettes"
    write(root, chat("a", "b"))
    assert main(["prune", report(tmp_path, "r.json", [], **fields), "--dir", str(root), "--delete"]) == 2
    assert reason in capsys.readouterr().out
    assert len(cassette_files(root)) == 1


def test_prune_refuses_when_the_reports_name_cassettes_not_in_the_folder(tmp_path, capsys):
    """The sign of a wrong --dir: everything would look unused."""
    root = tmp_path / "cassettes"
    write(root, chat("a", "b"))
    elsewhere = cassette_path(chat("c", "d"))
    assert main(["prune", report(tmp_path, "r.json", [elsewhere]), "--dir", str(root), "--delete"]) == 2
    assert "is --dir the folder those runs used?" in capsys.readouterr().out
    assert len(cassette_files(root)) == 1


def test_prune_refuses_a_file_that_is_not_a_report(tmp_path, capsys):
    root = tmp_path / "cassettes"
    write(root, chat("a", "b"))
    (tmp_path / "r.json").write_text("{}")
    assert main(["prune", str(tmp_path / "r.json"), "--dir", str(root)]) == 2
    assert "not a run report" in capsys.readouterr().out


def test_prune_removes_folders_it_empties_but_keeps_the_cassette_folder(tmp_path, capsys):
    root = tmp_path / "cassettes"
    write(root, chat("a", "b"), "other.host/v1/x.json")
    kept = write(root, chat("c", "d"))
    used = kept.relative_to(root).as_posix()
    assert main(["prune", report(tmp_path, "r.json", [used]), "--dir", str(root), "--delete"]) == 0
    assert not (root / "other.host").exists() and kept.exists()
    assert "deleted 1 unused cassette(s)" in capsys.readouterr().out
