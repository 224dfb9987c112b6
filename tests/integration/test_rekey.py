"""`cassette rekey` on folders of real recordings, made through mitmdump with the openai SDK, then replayed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import openai
from cassette_proxy import cli
from cassette_proxy.core.files.location import cassette_files
from cassette_proxy.core.keys.recipe import make_recipe, stored_key
from harness import FAKE_OPENAI_KEY

ROOT = Path(__file__).resolve().parent.parent.parent


def chat(ids: tuple[str, str], last: str = "Somewhere warm", numbered: bool = True) -> str:
    """The openai SDK passes extra message fields through, as agent frameworks' ids are."""
    headers = {"x-fake-numbered": "1"} if numbered else {}
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, default_headers=headers)
    messages = [
        {"role": "user", "content": "Plan a trip", "id": ids[0]},
        {"role": "user", "content": last, "id": ids[1]},
    ]
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content


def names(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in cassette_files(folder))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in cassette_files(folder)}


def rekey(capsys, folder: Path, *flags: str) -> tuple[int, str, str]:
    code = cli.main(["rekey", "--dir", str(folder), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_rekey_carries_a_sequence_over_to_a_new_ignore_set_and_replay_hits(
    https_upstream, start_proxy, client_env, cassette_dir, capsys
):
    client_env(start_proxy(https_upstream, cassette_mode="record", cassette_repeats="sequence"))
    recorded = [chat(("a1", "a2")), chat(("a1", "a2"))]
    assert recorded == ["#1 echo: Somewhere warm", "#2 echo: Somewhere warm"]
    old = names(cassette_dir)
    assert len(old) == 2

    before = snapshot(cassette_dir)
    code, out, _ = rekey(capsys, cassette_dir, "--ignore", "messages.*.id", "--dry-run")
    assert code == 0 and out.count("would move") == 2 and "dry run" in out
    assert snapshot(cassette_dir) == before

    code, out, _ = rekey(capsys, cassette_dir, "--ignore", "messages.*.id")
    assert code == 0
    new = names(cassette_dir)
    assert len(new) == 2 and not set(new) & set(old)
    first_key = Path(new[0]).name.split(".")[0]
    assert sorted(Path(n).name for n in new) == [f"{first_key}.2.json", f"{first_key}.json"]
    for old_name, new_name in zip(sorted(old), sorted(new), strict=True):
        assert f"moved {old_name} → {new_name}" in out
    cassette = json.loads((cassette_dir / new[0]).read_text())
    assert cassette["cassette_format"] == 2 and cassette["key"] == first_key
    assert cassette["keyed_with"]["ignore"] == ["messages.*.id"]
    https_upstream.stop()

    player = start_proxy(cassette_mode="replay", cassette_repeats="sequence", cassette_ignore=["messages.*.id"])
    client_env(player)
    assert [chat(("b1", "b2")), chat(("c1", "c2"))] == recorded  # fresh ids every run: still the recordings
    assert player.stop()["counts"]["misses"] == 0


def test_rekey_refuses_collisions_with_different_responses_and_merges_identical_ones(
    https_upstream, start_proxy, client_env, cassette_dir, capsys
):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    chat(("a1", "a2"))
    chat(("b1", "b2"))  # the same request but for its ids, answered differently (#2)
    before = snapshot(cassette_dir)
    code, out, err = rekey(capsys, cassette_dir, "--ignore", "messages.*.id")
    assert code == 1 and out == ""
    assert "answer differently" in err and "nothing changed" in err
    assert snapshot(cassette_dir) == before

    # Make the second answer the same as the first: they now merge into one cassette.
    first, second = (json.loads((cassette_dir / name).read_text()) for name in before)
    second["response"] = first["response"]
    (cassette_dir / list(before)[1]).write_text(json.dumps(second))
    code, out, _ = rekey(capsys, cassette_dir, "--ignore", "messages.*.id")
    assert code == 0 and "merged" in out and "1 moved, 1 merged" in out
    [kept] = cassette_files(cassette_dir)
    assert kept.stem == stored_key(first["request"], make_recipe(ignore=["messages.*.id"]))


def test_rekey_refuses_what_it_cannot_recompute(https_upstream, start_proxy, client_env, cassette_dir, capsys):
    client_env(start_proxy(https_upstream, cassette_mode="record", cassette_redact=["/request.body/Plan/[REDACTED]"]))
    chat(("a1", "a2"), numbered=False)
    before = snapshot(cassette_dir)
    [cassette] = [json.loads(data) for data in before.values()]
    assert cassette["keyed_with"]["request_redacted"] is True

    code, _, err = rekey(capsys, cassette_dir)
    assert code == 1 and "redaction rule" in err
    (cassette_dir / next(iter(before))).write_text(json.dumps({**cassette, "keyed_with": make_recipe().to_json()}))
    code, _, err = rekey(capsys, cassette_dir, "--key-header", "x-tenant")
    assert code == 1 and "did not keep the header(s) x-tenant" in err
    code, _, err = rekey(capsys, cassette_dir, "--ignore", "model.name")
    assert code == 2 and "--ignore" in err and "model.name" in err


def test_rekey_brings_format_1_cassettes_to_format_2_in_place(tmp_path, capsys):
    folder = tmp_path / "cassettes"
    shutil.copytree(ROOT / "cassettes", folder)
    for path in cassette_files(folder):  # as committed before recipe 2
        cassette = json.loads(path.read_text())
        cassette.pop("keyed_with", None)
        path.write_text(json.dumps({**cassette, "cassette_format": 1}))
    before = names(folder)
    code, out, _ = rekey(capsys, folder)
    assert code == 0 and f"0 moved, 0 merged, {len(before)} rewritten in place" in out
    assert names(folder) == before  # node/… subfolders stay where they are
    for path in cassette_files(folder):
        cassette = json.loads(path.read_text())
        assert cassette["cassette_format"] == 2 and cassette["keyed_with"]["recipe"] == 2
        assert path.name == f"{cassette['key']}.json"


def test_rekey_refuses_a_cassette_that_is_a_symlink_out_of_the_folder_and_writes_nothing(tmp_path, capsys):
    """Rekey rewrites what it reads: a symlink from a pull request must not copy an outside file into the folder."""
    folder = tmp_path / "cassettes"
    shutil.copytree(ROOT / "cassettes", folder)
    outside = tmp_path / "outside.json"
    first = cassette_files(folder)[0]
    outside.write_bytes(first.read_bytes())
    link = first.parent / f"{'f' * 32}.json"
    link.symlink_to(outside)
    before = snapshot(folder)
    code, out, err = rekey(capsys, folder)
    assert code == 1
    assert "outside the cassette folder" in out + err
    assert snapshot(folder) == before and link.is_symlink()
