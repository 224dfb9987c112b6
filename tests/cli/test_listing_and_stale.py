"""`cassette ls`, `cassette show` and `cassette stale` on a folder of cassettes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cassette_proxy.cli import main
from samples import chat, write


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def days_ago(days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")


def test_ls_shows_key_date_size_model_endpoint_and_prompt(tmp_path, capsys):
    path = write(tmp_path, chat("What is the capital of France?", "Paris", recorded_at="2026-03-04T05:06:07+00:00"))
    code, out = run(capsys, "ls", str(tmp_path))
    assert code == 0
    [line] = out.splitlines()
    assert line.split()[:5] == [path.stem[:8], "2026-03-04", f"{path.stat().st_size / 1024:.1f}", "KB", "gpt-4o-mini"]
    assert line.endswith("api.openai.com/v1/chat/completions                What is the capital of France?")


def test_ls_reports_an_unreadable_cassette_and_exits_non_zero(tmp_path, capsys):
    write(tmp_path, chat("fine", "ok"))
    (tmp_path / "broken.json").write_text("{not json")
    code, out = run(capsys, "ls", str(tmp_path))
    assert code == 1 and "unreadable" in out and "fine" in out


def test_show_by_key_prefix_prints_the_conversation_and_the_answer(tmp_path, capsys):
    cassette = chat("What is the capital of France?", "Paris")
    write(tmp_path, cassette)
    code, out = run(capsys, "show", cassette["key"][:6], "--dir", str(tmp_path))
    assert code == 0
    assert f"key:       {cassette['key']}" in out
    assert "  user: What is the capital of France?" in out
    assert "response:  200, model gpt-4o-mini-2024-07-18, finish stop" in out
    assert out.rstrip().endswith("content:\n  Paris")


def test_show_by_file_and_an_unknown_key(tmp_path, capsys):
    path = write(tmp_path, chat("q", "a"))
    assert run(capsys, "show", str(path))[0] == 0
    code, out = run(capsys, "show", "ffffffff", "--dir", str(tmp_path))
    assert code == 2 and "is neither a file nor a key" in out


def test_show_by_full_key_picks_the_first_of_a_sequence(tmp_path, capsys):
    cassette = chat("again?", "first")
    first = write(tmp_path, cassette)
    write(tmp_path, chat("again?", "second"), first.with_name(f"{first.stem}.2.json").relative_to(tmp_path).as_posix())
    code, out = run(capsys, "show", cassette["key"], "--dir", str(tmp_path))
    assert code == 0 and out.rstrip().endswith("  first")
    code, out = run(capsys, "show", f"{cassette['key']}.2", "--dir", str(tmp_path))
    assert code == 0 and out.rstrip().endswith("  second")
    code, out = run(capsys, "show", cassette["key"][:8], "--dir", str(tmp_path))
    assert code == 2 and "matches several cassettes" in out


def test_stale_lists_cassettes_older_than_the_limit(tmp_path, capsys):
    write(tmp_path, chat("fresh", "a", recorded_at=days_ago(10)))
    old = write(tmp_path, chat("old", "a", recorded_at=days_ago(120)))
    code, out = run(capsys, "stale", str(tmp_path), "--max-age", "90d")
    assert code == 1
    assert f"{old.relative_to(tmp_path).as_posix()}: recorded 120 days ago" in out
    assert "1 of 2 cassette(s) older than 90 days" in out
    assert run(capsys, "stale", str(tmp_path), "--max-age", "20w") == (
        0,
        "all 2 cassette(s) recorded within 140 days\n",
    )


def test_stale_counts_an_undated_cassette_as_a_problem(tmp_path, capsys):
    write(tmp_path, chat("undated", "a", recorded_at="sometime"))
    code, out = run(capsys, "stale", str(tmp_path), "--max-age", "36h")
    assert code == 1 and "age unknown: no valid recorded_at ('sometime')" in out and "36 hours" in out


@pytest.mark.parametrize("age", ["90", "90 days", "3m", "1.5d"])
def test_stale_rejects_an_age_without_a_known_unit(tmp_path, capsys, age):
    with pytest.raises(SystemExit) as exit_:
        main(["stale", str(tmp_path), "--max-age", age])
    assert exit_.value.code == 2 and "use a number and a unit: 36h, 90d, 12w, 1y" in capsys.readouterr().err
