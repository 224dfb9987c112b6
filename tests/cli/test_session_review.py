"""The review commands on session cassettes: `show` prints the turns, `diff` reviews a re-recorded session,
`view` shows the conversation and its timeline, `scan` reads every frame, `prune` and `rekey` keep a session
and its sidecar together."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.files.atomic_write import remove_stale_temp_files
from cassette_proxy.core.files.cassette_file import load, new_cassette
from cassette_proxy.core.files.session_file import Close, read_session
from cassette_proxy.viewer.index import detail, summary_of
from samples import write
from session_samples import client, realtime_frames, server, session_cassette, write_session

AUDIO = "QUJD" * 2048  # 6 KB of base64: kept in the sidecar
GEMINI_URL = ("wss", "generativelanguage.googleapis.com", 443, "/ws/x.v1beta.GenerativeService.BidiGenerateContent", [])


def tool_session() -> list:
    """OpenAI Realtime with a function call, its result, audio both ways and the spoken answer's transcript."""
    return [
        server(1, {"type": "session.created", "event_id": "event_Ab12Cd34Ef56Gh78Ij90", "session": {"id": "sess_Zx81Qw72Er63Ty54", "model": "gpt-realtime"}}),
        client(5, {"type": "session.update", "session": {"instructions": "You are a weather bot.", "tools": [{"type": "function", "name": "get_weather"}]}}),
        client(9, {"type": "input_audio_buffer.append", "audio": AUDIO}),
        client(10, {"type": "response.create"}),
        server(40, {"type": "response.function_call_arguments.done", "name": "get_weather", "call_id": "call_Kd82Jd91Ls02", "arguments": '{"city": "Paris"}'}),
        server(41, {"type": "response.done", "response": {"status": "completed", "usage": {"total_tokens": 9}}}),
        client(60, {"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "call_Kd82Jd91Ls02", "output": '{"sky": "sunny"}'}}),
        client(61, {"type": "response.create"}),
        server(90, {"type": "response.output_audio.delta", "item_id": "item_Pq83Rs94", "delta": AUDIO}),
        server(95, {"type": "response.output_audio_transcript.delta", "delta": "It is sunny "}),
        server(99, {"type": "response.output_audio_transcript.delta", "delta": "in Paris."}),
        server(120, {"type": "response.done", "response": {"status": "completed"}}),
    ]  # fmt: skip


def gemini_session() -> list:
    return [
        client(0, {"setup": {"model": "models/gemini-live", "systemInstruction": {"parts": [{"text": "Be kind."}]}}}),
        server(20, {"setupComplete": {}}, binary=True),
        client(21, {"client_content": {"turns": [{"role": "user", "parts": [{"text": "Hello there"}]}], "turn_complete": True}}),
        server(60, {"serverContent": {"modelTurn": {"parts": [{"text": "Hi! "}]}}}, binary=True),
        server(70, {"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm", "data": AUDIO}}]}}}, binary=True),
        server(80, {"serverContent": {"turnComplete": True}}, binary=True),
    ]  # fmt: skip


RESPONSES_URL = ("wss", "api.openai.com", 443, "/v1/responses", [])


def responses_session() -> list:
    """The Responses API's WebSocket mode (openai-agents' websocket transport): a tool call, then its answer."""
    call = {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Paris"}', "call_id": "call_1"}
    return [
        client(0, {"type": "response.create", "model": "gpt-4.1", "instructions": "Be brief.", "tools": [{"type": "function", "name": "get_weather"}], "input": [{"role": "user", "content": "Weather in Paris?"}]}),
        server(5, {"type": "response.created", "response": {"id": "resp_1a2b3c", "model": "gpt-4.1"}}),
        server(8, {"type": "response.function_call_arguments.done", "arguments": call["arguments"]}),
        server(9, {"type": "response.output_item.done", "output_index": 0, "item": call}),
        server(10, {"type": "response.completed", "response": {"id": "resp_1a2b3c", "status": "completed"}}),
        client(20, {"type": "response.create", "model": "gpt-4.1", "previous_response_id": "resp_1a2b3c", "input": [{"type": "function_call_output", "call_id": "call_1", "output": '{"sky": "sunny"}'}]}),
        server(30, {"type": "response.output_text.delta", "delta": "It is sunny."}),
        server(40, {"type": "response.completed", "response": {"id": "resp_4d5e6f", "status": "completed", "usage": {"total_tokens": 9}}}),
    ]  # fmt: skip


def test_show_ls_and_view_read_a_responses_websocket_session_as_its_calls(tmp_path, capsys):
    path = write_session(tmp_path, responses_session(), url=RESPONSES_URL)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "model:     gpt-4.1" in out and "tools:     get_weather" in out
    assert any(line.startswith("session:   openai-responses, 2 calls (response.create), 8 messages") for line in out)
    turns = out[out.index("turns:") + 1 :]
    assert turns == [
        "  system: Be brief.",
        "  user: Weather in Paris?",
        '  assistant: get_weather({"city": "Paris"})',  # once, named, though two events carry its arguments
        '  tool: call_1({"sky": "sunny"})',
        "  assistant: It is sunny.",
    ]
    assert main(["ls", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "gpt-4.1" in line and line.endswith("Weather in Paris?")
    cassette_id = path.relative_to(tmp_path).as_posix()
    summary = summary_of(cassette_id, load(path, tmp_path), path.stat().st_size)
    assert summary["shape"] == "openai-responses" and summary["answer"] == "It is sunny."


def test_show_prints_a_sessions_turns_tool_calls_and_close(tmp_path, capsys):
    path = write_session(tmp_path, tool_session(), Close("client", 1000, ""))
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "request:   GET https://api.openai.com/v1/realtime?model=gpt-realtime" in out
    assert "model:     gpt-realtime" in out
    assert "12 messages (5 from the client, 7 from the server) over 120 ms, closed by the client, code 1000" in out
    for line in [
        "  system: You are a weather bot.",
        "  user: [audio, 6.0 KB]",
        '  assistant: get_weather({"city": "Paris"})',
        '  tool: call_Kd82Jd91Ls02({"sky": "sunny"})',
        "  assistant: It is sunny in Paris.",
        "  assistant: [audio, 6.0 KB]",
    ]:
        assert line in out.splitlines()


def test_ls_shows_a_sessions_model_and_first_user_text_from_its_messages(tmp_path, capsys):
    """Gemini's model is in its `setup` message, not in the URL."""
    write_session(tmp_path, gemini_session(), url=GEMINI_URL)
    assert main(["ls", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "models/gemini-live" in line and line.endswith("Hello there") and "  -  " not in line


def test_view_shows_a_gemini_session_as_a_conversation_with_its_timeline(tmp_path):
    path = write_session(tmp_path, gemini_session(), url=GEMINI_URL)
    cassette_id = path.relative_to(tmp_path).as_posix()
    summary = summary_of(cassette_id, load(path, tmp_path), path.stat().st_size)
    assert summary["shape"] == "gemini-live" and summary["status"] == 101 and summary["streamed"]
    assert summary["last_user"] == "Hello there" and summary["answer"] == "Hi!"
    conversation = detail(tmp_path, cassette_id)["conversation"]
    assert [(t["role"], t["parts"][0]["text"]) for t in conversation["turns"]] == [
        ("system", "Be kind."),
        ("user", "Hello there"),
    ]
    assert [p["text"] for p in conversation["answer"]["parts"]] == ["Hi! ", "[audio, 6.0 KB]"]
    timeline = conversation["answer"]["timeline"]
    assert [e["name"] for e in timeline] == [
        "→ setup", "← setupComplete", "→ clientContent", "← serverContent.modelTurn", "← serverContent.modelTurn",
        "← serverContent.turnComplete",
    ]  # fmt: skip
    assert [e["ms"] for e in timeline] == [0, 20, 21, 60, 70, 80]
    assert conversation["answer"]["first_event_ms"] == 0 and conversation["answer"]["longest_gap_ms"] == 39


def git(repo, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_diff_reports_what_a_re_recorded_session_says_and_sends_differently(tmp_path, monkeypatch, capsys):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "dev@example.invalid")
    git(tmp_path, "config", "user.name", "dev")
    root = tmp_path / "cassettes"
    write_session(root, realtime_frames("Say hello", "Hello there"))
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "sessions")
    monkeypatch.chdir(tmp_path)
    frames = realtime_frames("Say hello", "Hi friend")
    frames[1] = client(10, {"type": "session.update", "event_id": "evt_new", "session": {"instructions": "Be warm."}})
    write_session(root, frames)
    assert main(["diff", "--dir", "cassettes"]) == 1  # the answer changed: a human should look
    out = capsys.readouterr().out
    assert "1 re-recorded (1 with a behaviour change)" in out
    assert 'content: "Hello there" → "Hi friend"' in out


def test_diff_lists_changed_client_messages_when_the_answer_held(tmp_path, monkeypatch, capsys):
    from cassette_proxy.cli.diff import compare
    from session_samples import session_cassette

    old, _, _ = session_cassette(realtime_frames("Say hello"))
    frames = realtime_frames("Say hello")
    frames[1] = client(10, {"type": "session.update", "event_id": "evt_other", "session": {"instructions": "Be warm."}})
    new, _, _ = session_cassette(frames)
    changes, other = compare(old, new)
    assert changes == []
    assert other == ['client message 1: session.instructions: "Be brief." → "Be warm."']  # event_id: ignored


def test_scan_reads_every_frame_and_finds_nothing_in_a_clean_session(tmp_path, capsys):
    write_session(tmp_path / "clean", tool_session())
    assert main(["scan", str(tmp_path / "clean")]) == 0, capsys.readouterr().out
    capsys.readouterr()
    leaked = tool_session()
    leaked[9] = server(
        95, {"type": "response.output_audio_transcript.delta", "delta": "your key is sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2"}
    )
    write_session(tmp_path / "leaked", leaked)
    assert main(["scan", str(tmp_path / "leaked")]) == 1
    out = capsys.readouterr().out
    assert "session.frames[9].json.delta: openai-key" in out


def test_prune_deletes_an_unused_session_with_its_sidecar(tmp_path, capsys):
    root = tmp_path / "cassettes"
    path = write_session(root, tool_session())
    [sidecar] = root.rglob("*.bin")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"counts": {"hits": 0}, "cassettes_used": []}))
    assert main(["prune", "--dir", str(root), "--delete", str(report)]) == 0
    assert not path.exists() and not sidecar.exists() and not any(root.iterdir())


def test_rekey_keeps_a_session_a_session_with_its_sidecar(tmp_path, capsys):
    root = tmp_path / "cassettes"
    write_session(root, tool_session())
    assert main(["rekey", "--dir", str(root), "--ignore", "metadata"]) == 0, capsys.readouterr().out
    [moved] = root.rglob("*.json")
    cassette = load(moved, root)
    assert cassette["cassette_format"] == 3 and cassette["keyed_with"]["ignore"] == ["metadata"]
    assert read_session(moved, cassette, root).frames[8].payload.count(AUDIO.encode()) == 1


def test_a_sidecar_a_killed_writer_left_half_written_is_removed(tmp_path):
    stale = tmp_path / "api.openai.com" / ".k.0123456789abcdef.bin.x1y2.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half")
    assert remove_stale_temp_files(tmp_path, now=time.time() + 120) == [stale]


@pytest.mark.parametrize("target", ["show", "view"])
def test_review_of_an_unreadable_session_says_why(tmp_path, capsys, target):
    path = write_session(tmp_path, tool_session())
    broken = json.loads(path.read_text())
    broken["session"]["frames"][0]["ms"] = -5
    path.write_text(json.dumps(broken))
    if target == "show":
        assert main(["show", str(path)]) == 1
        assert "frames[0].ms must be a whole number" in capsys.readouterr().out
    else:
        assert "frames[0].ms must be a whole number" in detail(tmp_path, path.relative_to(tmp_path).as_posix())["error"]


def test_drift_skips_a_session_and_says_why_instead_of_re_sending_its_upgrade():
    from cassette_proxy.core.drift.drift_report import Outcome, Result
    from cassette_proxy.core.keys.hosts import HostScope
    from cassette_proxy.core.keys.recipe import make_recipe
    from cassette_proxy.launch.drift_plan import plan
    from session_samples import session_cassette

    cassette, _, relative = session_cassette(realtime_frames())
    result = plan((Path(relative), relative, cassette), make_recipe(), HostScope(["*"]), {"OPENAI_API_KEY": "k"}, [])
    assert isinstance(result, Result) and result.outcome is Outcome.SKIPPED
    assert "WebSocket session" in result.message


def test_show_ls_and_view_name_a_responses_websocket_turn_and_what_it_adds(tmp_path, capsys):
    """A turn cassette (one `response.create` of a connection, as record mode saves it): its place in the
    connection, no close of its own, the new user text in `ls`, a `turn N` tag in `view`."""
    frames = [
        client(0, {"type": "response.create", "model": "gpt-4.1", "input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Echo: Hi"}, {"role": "user", "content": "More"}]}),
        server(3, {"type": "response.created", "response": {"id": "resp_9", "model": "gpt-4.1"}}),
        server(4, {"type": "response.output_text.delta", "delta": "Echo: More"}),
        server(5, {"type": "response.completed", "response": {"id": "resp_9", "status": "completed"}}),
    ]  # fmt: skip
    cassette, _, relative = session_cassette(frames, url=RESPONSES_URL)
    del cassette["session"]["close"]
    cassette["turn"] = {"over": "websocket", "url": "wss://api.openai.com/v1/responses", "number": 2}
    path = write(tmp_path, cassette, relative)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "turn:      2 of a Responses WebSocket connection to wss://api.openai.com/v1/responses" in out
    [session] = [line for line in out if line.startswith("session:")]
    assert (
        session.startswith("session:   openai-responses, 1 call (response.create), 4 messages")
        and "closed" not in session
    )
    assert main(["ls", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "gpt-4.1" in line and line.endswith("turn 2: More")
    cassette_id = path.relative_to(tmp_path).as_posix()
    assert summary_of(cassette_id, load(path, tmp_path), path.stat().st_size)["tag"] == "turn 2"
    assert detail(tmp_path, cassette_id)["tag"] == "turn 2"


def mcp_cassette(body: dict, result: dict) -> dict:
    return new_cassette(
        "0b9ccf062b7c24e82deda578610646be",
        {"method": "POST", "url": "http://127.0.0.1/mcp", "headers": {}, "body_format": "json", "body": body},
        {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json",
         "body": {"jsonrpc": "2.0", "id": body["id"], "result": result}},
        {"cassette_proxy": "test"},
    )  # fmt: skip


def test_show_ls_and_view_present_an_mcp_call_by_its_method_and_tool_not_as_a_model_call(tmp_path, capsys):
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    tools = [{"name": "add", "inputSchema": {}}, {"name": "echo", "inputSchema": {}}]
    called = write(tmp_path, mcp_cassette(call, {"content": [{"type": "text", "text": "5"}]}), "127.0.0.1/mcp/a.json")
    write(tmp_path, mcp_cassette(listed, {"tools": tools}), "127.0.0.1/mcp/b.json")
    assert main(["show", str(called), "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "mcp:       tools/call add (id 3)" in out and "tools:     add" in out
    assert not any(line.startswith("model:") for line in out)
    assert main(["ls", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[4] for line in lines] == ["mcp", "mcp"]  # key, date, size (2 words), model
    assert lines[0].endswith("tools/call add") and lines[1].endswith("tools/list")
    summary = summary_of("127.0.0.1/mcp/b.json", load(tmp_path / "127.0.0.1/mcp/b.json", tmp_path), 1)
    assert summary["tag"] == "mcp" and summary["shape"] == "mcp"
