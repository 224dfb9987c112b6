"""A hostile session cassette is refused before it costs what it asks for (core/files/session_file.py): its frames are
counted while it is parsed, and sidecar spans may neither overlap nor pass the sidecar's end, so no payload is
rebuilt from a file that could never be played. Each hostile file is made here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cassette_proxy.core.files import session_file
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.files.session_file import MAX_FRAMES, Frame, read_session
from session_samples import server, session_cassette, write_session

MIB = 1024 * 1024


def write_with_frames(folder: Path, frames_json: str, sidecar: bytes = b"", tail: str = "",
                      escaped: bool = False) -> Path:  # fmt: skip
    """A session cassette whose `session.frames` is the JSON text given (built as text: two million frames as
    objects would cost the test what the file costs the proxy), with `tail` after its end."""
    cassette, _, relative = session_cassette([server(0, {"type": "session.created"})])
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if sidecar:
        name = f"{path.stem}.0123456789abcdef.bin"
        (path.parent / name).write_bytes(sidecar)
        cassette["session"]["sidecar"] = {"file": name, "bytes": len(sidecar),
                                          "sha256": hashlib.sha256(sidecar).hexdigest()}  # fmt: skip
    cassette["session"]["frames"] = "FRAMES"
    text = json.dumps(cassette).replace('"FRAMES"', frames_json)
    if escaped:  # the same file as a hostile writer may spell it: JSON escapes in the key names
        text = text.replace('"session":', '"\\u0073ession":')
    path.write_text(text + tail)
    return path


@pytest.mark.parametrize("escaped", [False, True], ids=["plain", "escaped-keys"])
def test_a_session_of_two_million_frames_is_refused_without_being_parsed_whole(tmp_path, escaped):
    frame = '{"\\u0066rom":"server","ms":0,"frame":"text","text":"0123456789"}' if escaped else (
        '{"from":"server","ms":0,"frame":"text","text":"0123456789"}')  # fmt: skip
    path = write_with_frames(tmp_path, "[" + ",".join([frame] * 2_000_000) + "]", tail=" not JSON", escaped=escaped)
    assert path.stat().st_size > 114_000_000
    # The file ends in text that is not JSON: parsed whole, it would be refused as invalid JSON instead.
    with pytest.raises(CassetteError, match=rf"more than {2 * MAX_FRAMES} frames .*refused before reading the rest"):
        load(path, tmp_path)


def test_sidecar_spans_that_overlap_are_refused_before_any_payload_is_rebuilt(tmp_path, monkeypatch):
    """1 MB of cassette naming the same 1 MiB of sidecar 12,000 times: 12 GB once rebuilt."""
    frame = f'{{"from":"server","ms":0,"frame":"binary","sidecar":{{"offset":0,"length":{MIB}}}}}'
    path = write_with_frames(tmp_path, "[" + ",".join([frame] * 12_000) + "]", sidecar=bytes(MIB))
    assert 900_000 < path.stat().st_size < 1_100_000
    rebuilt = []
    monkeypatch.setattr(session_file, "restored_payload", lambda *a: rebuilt.append(a) or b"")
    with pytest.raises(CassetteError, match=r"session.frames\[1\].sidecar overlaps session.frames\[0\].sidecar"):
        load(path, tmp_path)
    assert rebuilt == []


@pytest.mark.parametrize(
    ("spans", "problem"),
    [
        ([(0, 10), (5, 10)], r"frames\[1\].sidecar overlaps session.frames\[0\].sidecar"),
        ([(10, 10), (0, 11)], r"frames\[0\].sidecar overlaps session.frames\[1\].sidecar"),  # in any order
        ([(0, 10), (10, 11)], "ends past the sidecar's 20 bytes"),
    ],
)
def test_spans_may_neither_overlap_nor_pass_the_sidecars_end(tmp_path, spans, problem):
    frames = [{"from": "server", "ms": 0, "frame": "binary", "sidecar": {"offset": o, "length": n}} for o, n in spans]
    path = write_with_frames(tmp_path, json.dumps(frames), sidecar=bytes(20))
    with pytest.raises(CassetteError, match=problem):
        load(path, tmp_path)


def test_spans_inside_one_json_frame_may_not_overlap_either(tmp_path):
    moved = [{"path": ["a"], "offset": 0, "length": 8}, {"path": ["b"], "offset": 4, "length": 8}]
    frames = [{"from": "server", "ms": 0, "frame": "text", "json": {"a": "x", "b": "y"}, "in_sidecar": moved}]
    path = write_with_frames(tmp_path, json.dumps(frames), sidecar=bytes(20))
    with pytest.raises(CassetteError, match=r"in_sidecar\[1\] overlaps session.frames\[0\].in_sidecar\[0\]"):
        load(path, tmp_path)


def test_spans_side_by_side_as_the_recorder_writes_them_still_play(tmp_path):
    payloads = [bytes([i]) * 5000 for i in range(3)]
    path = write_session(tmp_path, [Frame(False, i, False, payload) for i, payload in enumerate(payloads)])
    cassette = load(path, tmp_path)
    assert [f["sidecar"] for f in cassette["session"]["frames"]] == [
        {"offset": 0, "length": 5000}, {"offset": 5000, "length": 5000}, {"offset": 10000, "length": 5000}]  # fmt: skip
    assert [f.payload for f in read_session(path, cassette, tmp_path).frames] == payloads


def test_the_payloads_total_is_checked_while_they_are_rebuilt(tmp_path, monkeypatch):
    path = write_session(tmp_path, [server(i, {"text": "x" * 900}) for i in range(20)])
    cassette = load(path, tmp_path)
    rebuilt = []
    original = session_file.restored_payload
    monkeypatch.setattr(session_file, "restored_payload", lambda *a: rebuilt.append(1) or original(*a))
    with pytest.raises(CassetteError, match="its frames hold more than 4000 bytes"):
        read_session(path, cassette, tmp_path, max_size=1000)
    assert len(rebuilt) == 5  # stopped at the frame that passed the total, not after all 20
