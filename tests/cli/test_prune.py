"""`cassette prune`: deletes exactly what no run used, and nothing when a run cannot vouch for itself."""

from __future__ import annotations

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.files.location import cassette_files
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Miss, Report
from samples import cassette_path, chat, write


def report(tmp_path, name: str, used: list[str], **fields) -> str:
    """A run report as the proxy writes it (core/report.py), naming the cassettes the run used: what prune reads.
    The proxy's own filling of `cassettes_used` is pinned where a real run makes it
    (tests/addon/test_hit_miss_record.py, tests/integration/test_record_replay.py)."""
    path = tmp_path / name
    Report(cassettes_used=set(used), **fields).write(path)
    return str(path)


def recorded(root, *prompts: str) -> list[str]:
    """One cassette per prompt under `root`; their ids, as a report names them."""
    return [write(root, chat(prompt, f"echo: {prompt}")).relative_to(root).as_posix() for prompt in prompts]


def test_prune_deletes_exactly_the_cassettes_two_runs_did_not_use(tmp_path, capsys):
    root = tmp_path / "cassettes"
    one, two, three, four, five = recorded(root, "one", "two", "three", "four", "five")
    first = report(tmp_path, "first.json", [one, two])
    second = report(tmp_path, "second.json", [two, three])

    assert main(["prune", first, second, "--dir", str(root)]) == 1  # listed, not deleted
    assert capsys.readouterr().out.splitlines()[:-1] == sorted([four, five])
    assert len(cassette_files(root)) == 5

    assert main(["prune", first, second, "--dir", str(root), "--delete"]) == 0
    assert {path.relative_to(root).as_posix() for path in cassette_files(root)} == {one, two, three}

    third = report(tmp_path, "third.json", [one])
    assert main(["prune", third, "--dir", str(root)]) == 1  # only "one" used now: two listed
    assert capsys.readouterr().out.splitlines()[-3:-1] == sorted([two, three])


def test_prune_refuses_when_a_run_had_a_miss(tmp_path, capsys):
    root = tmp_path / "cassettes"
    one, two = recorded(root, "one", "two")
    clean = report(tmp_path, "clean.json", [one, two])
    url = "https://api.openai.com/v1/chat/completions"
    miss = Miss(key="f" * 32, method="POST", url=url, cassette="x.json", closest=[], test=None)
    missed = report(tmp_path, "missed.json", [one], misses=[miss])

    assert main(["prune", clean, missed, "--dir", str(root), "--delete"]) == 2
    out = capsys.readouterr().out
    assert "refusing, nothing deleted" in out and "1 miss(es) and 0 error(s)" in out
    assert len(cassette_files(root)) == 2


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
