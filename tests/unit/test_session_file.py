"""The session cassette: frames stored readably and restored exactly, a sidecar for long payloads, hostile files refused."""

import base64
import copy
import json
import os

import pytest
from cassette_proxy.core.files.atomic_write import write_new
from cassette_proxy.core.files.cassette_file import dumps, load, parse
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.files.session_file import (
    Close,
    Frame,
    read_session,
    redact_frames,
    restored_payload,
    session_files,
    stored_frames,
)
from cassette_proxy.core.workers.replay_cache import replay_of
from session_samples import client, realtime_frames, server, session_cassette, write_session

AUDIO = base64.b64encode(bytes(range(256)) * 24).decode()


def checked(cassette: dict) -> dict:
    return parse("x.json", dumps(cassette))


def test_frames_round_trip_with_json_kept_parsed(tmp_path):
    frames = [
        *realtime_frames(),
        Frame(False, 500, True, b"not json at all"),
        Frame(False, 510, False, b"\x00\xff\x10binary"),
        Frame(False, 520, False, b'{"setupComplete":{}}'),  # Gemini: a binary frame holding JSON
    ]
    path = write_session(tmp_path, frames)
    cassette = load(path, tmp_path)
    stored = cassette["session"]["frames"]
    assert stored[1] == {"from": "client", "ms": 10, "frame": "text", "json": json.loads(frames[1].payload)}
    assert stored[-3]["text"] == "not json at all"
    assert stored[-2] == {"from": "server", "ms": 510, "frame": "binary", "base64": "AP8QYmluYXJ5"}
    assert stored[-1] == {"from": "server", "ms": 520, "frame": "binary", "json": {"setupComplete": {}}}
    assert read_session(path, cassette, tmp_path).frames == tuple(frames)


def test_json_that_would_not_come_back_the_same_is_kept_as_text():
    stored, _ = stored_frames([Frame(False, 0, True, b'{"a": NaN}'), Frame(False, 1, True, b'{"a": 1, "a": 2}')])
    assert [entry.get("text") for entry in stored] == ['{"a": NaN}', '{"a": 1, "a": 2}']


@pytest.mark.parametrize(
    ("sent", "json_format"),
    [
        (b'{"type":"x","n":1.5,"t":"\xc3\xa9"}', None),  # compact, OpenAI's
        (b'{"setupComplete": {}, "n": [1, 2]}', "spaced"),  # Python's json.dumps
        (b'{\n  "serverContent": {\n    "turnComplete": true\n  }\n}', "indented"),  # Google's printers
        (b'{"t": "\\u00e9"}', "spaced-ascii"),
    ],
)
def test_a_server_json_frame_is_stored_readable_and_goes_back_byte_for_byte(sent, json_format):
    for is_text in (True, False):  # Gemini sends its JSON in binary frames
        stored, _ = stored_frames([Frame(False, 0, is_text, sent)])
        assert "json" in stored[0] and stored[0].get("json_format") == json_format
        assert restored_payload(stored[0], b"") == sent


def test_server_json_no_known_encoding_gives_back_is_kept_exactly_and_a_clients_by_value():
    odd = b'{ "type" : "x", "n" : 1.5 }'
    stored, _ = stored_frames(
        [Frame(False, 0, True, odd), Frame(False, 1, False, odd + b"\n"), Frame(True, 2, True, odd)]
    )
    assert stored[0] == {"from": "server", "ms": 0, "frame": "text", "text": odd.decode()}
    assert restored_payload(stored[1], b"") == odd + b"\n" and "base64" in stored[1]
    assert stored[2]["json"] == {"type": "x", "n": 1.5}  # matched by value, never sent: kept readable


def test_a_json_format_is_named_only_on_json_frames_and_from_the_known_ones():
    cassette, _, _ = session_cassette([server(0, {"a": 1})])
    for bad in ({"json_format": "pretty"}, {"json_format": "spaced", "json": None, "text": "x"}):
        broken = copy.deepcopy(cassette)
        frame = broken["session"]["frames"][0]
        frame.update(bad)
        if "text" in bad:
            del frame["json"]
        with pytest.raises(CassetteError, match="json_format must be one of"):
            parse("s.json", dumps(broken))


def test_long_base64_strings_and_binary_frames_live_in_the_sidecar(tmp_path):
    audio = server(40, {"type": "response.output_audio.delta", "delta": AUDIO, "item_id": "item_1"})
    raw = Frame(False, 50, False, os.urandom(6000))
    path = write_session(tmp_path, [client(0, {"type": "response.create"}), audio, raw])
    cassette = load(path, tmp_path)
    session = cassette["session"]
    frames = session["frames"]
    assert frames[1]["json"]["delta"] == "[sidecar: 6144 bytes]"
    assert frames[1]["in_sidecar"] == [{"path": ["delta"], "offset": 0, "length": 6144}]
    assert frames[2]["sidecar"] == {"offset": 6144, "length": 6000}
    sidecar = path.parent / session["sidecar"]["file"]
    assert sidecar.name.startswith(path.stem + ".") and sidecar.stat().st_size == 12144
    assert AUDIO not in path.read_text()
    restored = read_session(path, cassette, tmp_path)
    assert restored.frames[1].payload == audio.payload
    assert restored.frames[2].payload == raw.payload


def test_a_missing_or_altered_sidecar_makes_the_session_unusable(tmp_path):
    path = write_session(tmp_path, [server(0, {"delta": AUDIO})])
    cassette = load(path, tmp_path)
    sidecar = path.parent / cassette["session"]["sidecar"]["file"]
    sidecar.write_bytes(sidecar.read_bytes()[:-1] + b"x")
    with pytest.raises(CassetteError, match="not the file it was recorded with"):
        read_session(path, cassette, tmp_path)
    sidecar.unlink()
    with pytest.raises(CassetteError, match=r"sidecar .* is missing"):
        read_session(path, cassette, tmp_path)


def test_a_sidecar_symlinked_outside_the_folder_is_refused(tmp_path):
    root = tmp_path / "cassettes"
    path = write_session(root, [server(0, {"delta": AUDIO})])
    cassette = load(path, root)
    sidecar = path.parent / cassette["session"]["sidecar"]["file"]
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(sidecar.read_bytes())
    sidecar.unlink()
    sidecar.symlink_to(outside)
    with pytest.raises(CassetteError, match="outside the cassette folder"):
        read_session(path, cassette, root)


def _session():
    cassette, _, _ = session_cassette(realtime_frames())
    return cassette


def _with(change):
    cassette = copy.deepcopy(_session())
    change(cassette)
    return cassette


def _frame(**fields):
    return lambda c: c["session"]["frames"][0].update(fields)


def _set_sidecar(value):
    return lambda c: c["session"].__setitem__("sidecar", value)


GOOD_SIDECAR = {"file": "k.0123456789abcdef.bin", "bytes": 10, "sha256": "0" * 64}

HOSTILE = [
    (lambda c: c["session"].__setitem__("frames", {}), "session.frames must be a list"),
    (lambda c: c.__setitem__("session", []), "session must be an object"),
    (lambda c: c.__setitem__("cassette_format", 2), "a session is cassette_format 3"),
    (lambda c: c["response"].__setitem__("status", 200), "response.status must be 101"),
    (_frame(**{"from": "proxy"}), r"frames\[0\].from must be client or server"),
    (_frame(frame="ping"), r"frames\[0\].frame must be text or binary"),
    (_frame(ms=-1), r"frames\[0\].ms must be a whole number"),
    (_frame(ms=True), r"frames\[0\].ms must be a whole number"),
    (_frame(ms=10**12), r"frames\[0\].ms must be a whole number"),
    (_frame(text="also"), "exactly one of json, text, base64, sidecar"),
    (lambda c: c["session"]["frames"][0].pop("json"), "exactly one of json, text, base64, sidecar"),
    (_frame(frame="text", base64="AAAA", json=None), "exactly one of"),
    (lambda c: c["session"]["frames"][0].update({"frame": "binary", "base64": "not base64!"}) or c["session"]["frames"][0].pop("json"), "is not base64"),
    (lambda c: c["session"]["frames"][0].update({"base64": "AAAA"}) or c["session"]["frames"][0].pop("json"), "a text frame holds UTF-8 text"),
    (lambda c: c["session"]["frames"][0].update({"frame": "binary", "sidecar": {"offset": 0, "length": 4}}) or c["session"]["frames"][0].pop("json"), "session.sidecar names none"),
    (lambda c: (_set_sidecar(GOOD_SIDECAR)(c), c["session"]["frames"][0].update({"frame": "binary", "sidecar": {"offset": 8, "length": 4}}), c["session"]["frames"][0].pop("json")), "ends past the sidecar's 10 bytes"),
    (_set_sidecar({**GOOD_SIDECAR, "file": "../../etc/passwd.bin"}), "plain .bin file name"),
    (_set_sidecar({**GOOD_SIDECAR, "file": "sub/k.bin"}), "plain .bin file name"),
    (_set_sidecar({**GOOD_SIDECAR, "file": ".hidden.bin"}), "plain .bin file name"),
    (_set_sidecar({**GOOD_SIDECAR, "file": "k.json"}), "plain .bin file name"),
    (_set_sidecar({**GOOD_SIDECAR, "bytes": -1}), "session.sidecar.bytes"),
    (_set_sidecar({**GOOD_SIDECAR, "sha256": "XYZ"}), "session.sidecar.sha256"),
    (lambda c: (_set_sidecar(GOOD_SIDECAR)(c), c["session"]["frames"][0].update({"in_sidecar": [{"path": ["nope"], "offset": 0, "length": 2}]})), "must name a string"),
    (_frame(match_digest="0" * 32), "on a client frame"),
    (lambda c: c["session"].__setitem__("close", {"by": "client", "code": 999}), "a WebSocket close code"),
    (lambda c: c["session"].__setitem__("close", {"by": "client", "code": 5000}), "a WebSocket close code"),
    (lambda c: c["session"].__setitem__("close", {"by": "nobody", "code": 1000}), "`by` is client or server"),
    (lambda c: c["session"].__setitem__("close", {"by": "server", "code": 1000, "reason": "x" * 124}), "at most 123 bytes"),
    (lambda c: c["session"].__setitem__("ignore", "event_id"), "session.ignore must be a list"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "problem"), HOSTILE)
def test_hostile_sessions_are_refused_naming_the_problem(change, problem):
    with pytest.raises(CassetteError, match=problem):
        checked(_with(change))


def test_too_many_frames_are_refused(monkeypatch):
    from cassette_proxy.core.files import session_file

    frames = len(_session()["session"]["frames"])
    monkeypatch.setattr(session_file, "MAX_FRAMES", frames - 1)  # the exact count (parse_json stops at twice)
    with pytest.raises(CassetteError, match=f"over the limit of {frames - 1}"):
        checked(_session())


def test_a_101_without_a_session_is_never_a_cassette():
    """What `cassette_record_statuses=101` used to save: a hit that served nothing."""
    hollow = {k: v for k, v in _session().items() if k != "session"}
    with pytest.raises(CassetteError, match="without a recorded session: nothing to replay"):
        checked({**hollow, "cassette_format": 2})
    with pytest.raises(CassetteError, match="without a recorded session"):
        checked(hollow)


def test_the_http_replay_refuses_a_session():
    with pytest.raises(CassetteError, match="not a WebSocket upgrade"):
        replay_of("x.json", checked(_session()))


def test_redaction_marks_a_changed_client_message_with_its_digest():
    secret = "sk-" + "a1b2c3d4" * 4
    frames = [
        client(0, {"type": "session.update", "session": {"instructions": f"key {secret}"}}),
        server(1, {"echo": secret}),
    ]
    stored, _ = stored_frames(frames)
    digested = redact_frames(
        stored,
        [f.payload for f in frames],
        lambda value, where: json.loads(json.dumps(value).replace(secret, "[REDACTED]")),
        lambda p: "d" * 32,
    )
    assert digested
    assert secret not in json.dumps(stored)
    assert stored[0]["match_digest"] == "d" * 32
    assert "match_digest" not in stored[1]


def test_the_recorded_close_is_kept(tmp_path):
    path = write_session(tmp_path, realtime_frames(), Close("server", 1000, "done"))
    cassette = load(path, tmp_path)
    assert read_session(path, cassette, tmp_path).close == Close("server", 1000, "done")


def test_the_sessions_of_one_url_are_its_key_and_the_numbered_files_beside_it_in_number_order(tmp_path):
    key = "0123456789abcdef" * 2
    names = [f"{key}.json", f"{key}.10.json", f"{key}.2.json", f"{key}.2.abc.bin", f".{key}.3.json.x.tmp",
             f"{key}.02.json", f"{key}.x.json", "f" * 32 + ".2.json"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in session_files(tmp_path / f"{key}.json")] == [
        f"{key}.json",
        f"{key}.2.json",
        f"{key}.10.json",
    ]
    (tmp_path / f"{key}.json").unlink()
    assert [p.name for p in session_files(tmp_path / f"{key}.json")] == [f"{key}.2.json", f"{key}.10.json"]
    assert session_files(tmp_path / "missing" / f"{key}.json") == []


def test_a_new_file_is_written_only_where_none_is(tmp_path):
    path = tmp_path / "a" / "s.json"
    assert write_new(path, b"first")
    assert not write_new(path, b"second")  # another writer got there first: nothing changed
    assert path.read_bytes() == b"first" and [p.name for p in path.parent.iterdir()] == ["s.json"]
