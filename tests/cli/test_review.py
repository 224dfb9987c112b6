"""`cassette diff`: a re-record reviewed in a real git repository, as a reviewer reads it."""

from __future__ import annotations

import subprocess

import pytest
from cassette_proxy.cli import main
from cassette_proxy.viewer.index import Index
from samples import cassette_path, chat, write


def git(repo, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with three committed cassettes; the test runs inside it, as a developer would."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "dev@example.invalid")
    git(tmp_path, "config", "user.name", "dev")
    root = tmp_path / "cassettes"
    write(root, chat("What is 2+2?", "4"))
    write(root, chat("Say hi", "hi"))
    write(root, chat("Old question", "old answer"))
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "cassettes")
    monkeypatch.chdir(tmp_path)
    return root


def rerecord(root, prompt: str, answer: str, **changes) -> str:
    """Overwrite a cassette as `update` mode would; returns its path as git shows it."""
    cassette = chat(prompt, answer, **changes)
    cassette["response"]["body"]["id"] = "chatcmpl-new"
    write(root, cassette)
    return f"cassettes/{cassette_path(cassette)}"


def diff(capsys, *args: str) -> tuple[int, str]:
    code = main(["diff", *args])
    return code, capsys.readouterr().out


def test_diff_shows_new_removed_and_rerecorded_with_the_content_change(repo, capsys):
    changed = rerecord(repo, "What is 2+2?", "The answer is 4.", finish="length")
    same = rerecord(repo, "Say hi", "hi")
    removed = f"cassettes/{cassette_path(chat('Old question', ''))}"
    (repo.parent / removed).unlink()
    new = write(repo, chat("Brand new question", "brand new answer"))
    code, out = diff(capsys)
    assert code == 1  # a behaviour change asks for a review
    assert out.splitlines()[0] == "1 new, 1 removed, 2 re-recorded (1 with a behaviour change) against HEAD"
    assert f"re-recorded {changed}" in out
    assert 'content: "4" → "The answer is 4."' in out
    assert 'finish_reason: "stop" → "length"' in out
    assert f"re-recorded {same}" in out
    assert "same behaviour; other response fields changed: id:" in out
    assert f"removed     {removed}" in out and '"Old question"' in out
    assert f"new         {new.relative_to(repo.parent).as_posix()}" in out
    assert 'answer: 200 stop "brand new answer"' in out
    assert 'POST api.openai.com/v1/chat/completions · gpt-4o-mini · "What is 2+2?"' in out


def test_diff_without_behaviour_change_passes(repo, capsys):
    rerecord(repo, "Say hi", "hi")
    code, out = diff(capsys)
    assert code == 0 and "(0 with a behaviour change)" in out


def test_diff_against_an_older_revision_sees_committed_changes(repo, capsys):
    rerecord(repo, "Say hi", "hello there")
    git(repo.parent, "commit", "-qam", "re-record")
    assert diff(capsys)[1].startswith("0 new, 0 removed, 0 re-recorded")
    code, out = diff(capsys, "HEAD~1")
    assert code == 1 and 'content: "hi" → "hello there"' in out


def test_long_content_change_is_shown_as_a_line_diff(repo, capsys):
    before, after = "\n".join(f"line {i}" for i in range(10)), "\n".join(f"line {i}" for i in range(10) if i != 5)
    write(repo, chat("Long", before))
    git(repo.parent, "add", "-A")
    git(repo.parent, "commit", "-qm", "long")
    rerecord(repo, "Long", after)
    out = diff(capsys)[1]
    assert "content:" in out and "-line 5" in out and "+line 5" not in out


def test_markdown_format_for_a_pr_comment(repo, capsys):
    changed = rerecord(repo, "What is 2+2?", "5")
    code, out = diff(capsys, "--format", "markdown")
    assert code == 1
    assert out.startswith("### Cassette review: 0 new, 0 removed, 1 re-recorded")
    assert "#### Re-recorded (1)" in out
    assert f"- `{changed}` ⚠️ behaviour changed" in out
    assert '  content: "4" → "5"' in out and "  ```diff" in out


def test_markdown_fence_outlasts_backticks_in_recorded_content(repo, capsys):
    rerecord(repo, "What is 2+2?", "```python\nprint(4)\n```")
    out = diff(capsys, "--format", "markdown")[1]
    assert "  ````diff" in out and out.rstrip().endswith("````")


def test_diff_outside_a_git_repository_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out = diff(capsys)
    assert code == 2 and "not a git repository" in out.lower()


def test_diff_against_an_unknown_revision_says_so(repo, capsys):
    code, out = diff(capsys, "no-such-branch")
    assert code == 2 and "'no-such-branch' is not a commit of this repository" in out


def test_diff_names_a_cassette_that_is_not_json_and_reviews_the_rest(repo, capsys):
    (repo / "broken.json").write_text("{oops")
    rerecord(repo, "Say hi", "hi")
    code, out = diff(capsys)
    assert code == 1  # a reviewer must look at it
    assert (
        out.splitlines()[0] == "0 new, 0 removed, 1 re-recorded (0 with a behaviour change), 1 unreadable against HEAD"
    )
    assert "unreadable  cassettes/broken.json\n    not read: cassettes/broken.json: invalid JSON" in out


def refused(prompt: str, refusal: str) -> dict:
    cassette = chat(prompt, "")
    cassette["response"]["body"]["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": refusal}
    return cassette


def test_a_refusal_reads_the_same_in_show_view_and_diff(repo, capsys):
    path = write(repo, refused("Say hi", "I can't help with that."))
    git(repo.parent, "commit", "-qam", "a refusal")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("content:\n  [refusal] I can't help with that.") and "(no text)" not in out
    [entry] = [e for e in Index(repo).summaries() if e["last_user"] == "Say hi"]
    assert entry["answer"] == "I can't help with that."
    write(repo, refused("Say hi", "I won't do that."))
    code, out = diff(capsys)
    assert code == 1  # a different refusal is a behaviour change, not "other fields"
    assert 'content: "[refusal] I can\'t help with that." → "[refusal] I won\'t do that."' in out
