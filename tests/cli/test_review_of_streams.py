"""`cassette show` and `cassette diff` on streamed answers, written by the proxy's own recorder: the review commands
read streams through the one event parser, so a streamed answer shows (and diffs) like a whole one."""

from __future__ import annotations

import subprocess

import fake_upstream
from cassette_proxy.cli import main
from cassette_proxy.core.files.cassette_file import events_fields
from cassette_proxy.proxy.stream_recorder import StreamRecorder
from samples import cassette_path, chat, write

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What is 2+2?"}], "stream": True}


def streamed(answer: str, *, finish: str = "stop") -> dict:
    """A chat cassette whose response went through StreamRecorder, chunk by chunk, as mitmproxy hands it over."""
    clock = iter(range(0, 10_000, 7))
    recorder = StreamRecorder("sse", 0.0, clock=lambda: next(clock) / 1000)
    wire = "".join(fake_upstream.openai_chat_stream(BODY, answer, error=False)).encode()
    wire = wire.replace(b'"finish_reason": "stop"', f'"finish_reason": "{finish}"'.encode())
    for i in range(0, len(wire), 40):
        recorder(wire[i : i + 40])
    recorder(b"")
    cassette = chat("What is 2+2?", "unused")
    cassette["response"] = {
        "status": 200,
        "headers": {"content-type": "text/event-stream"},
        **events_fields(recorder.events()),
    }
    return cassette


def git(repo, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_show_prints_a_streamed_answer_as_the_client_assembled_it(tmp_path, capsys):
    path = write(tmp_path, streamed("The answer is 4"))
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "finish stop" in out and "model gpt-4o-mini" in out
    assert "The answer is 4" in out and "(no text)" not in out


def test_diff_fails_when_a_streamed_answer_changes_its_text_and_finish_reason(tmp_path, capsys, monkeypatch):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "dev@example.invalid")
    git(tmp_path, "config", "user.name", "dev")
    root = tmp_path / "cassettes"
    before = streamed("The answer is 4")
    write(root, before)
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "recorded")
    write(root, streamed("I cannot say", finish="length"))
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "HEAD", "--dir", "cassettes"]) == 1  # a CI gate on it stops the change for a look
    out = capsys.readouterr().out
    assert f"re-recorded cassettes/{cassette_path(before)}" in out.replace("  ", " ")
    assert "finish_reason" in out and "length" in out and "I cannot say" in out
