"""The CLI's clear one-line errors where mitmdump's traceback used to show: `--dir` naming a file (`run`, and
`serve --detach`, which must not register), a replay from a folder that does not exist, and `serve --detach --port
N` with N taken. None of them starts mitmdump."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from cassette_command import CASSETTE
from cassette_proxy.cli import main
from cassette_proxy.cli.proxy_flags import checked_folder


def private_env(tmp_path: Path) -> dict[str, str]:
    """This test's own user folder (warm proxy registrations), so nothing of the machine's is read or left."""
    env = {name: value for name, value in os.environ.items() if name not in ("TMPDIR", "CASSETTE_MODE")}
    return {**env, "XDG_RUNTIME_DIR": str(tmp_path)}


def registrations(tmp_path: Path) -> list[Path]:
    return list((tmp_path / f"cassette-proxy-{os.getuid()}").rglob("*.json"))


@pytest.mark.parametrize("command", [["run", "--", "true"], ["serve", "--detach"]], ids=["run", "serve-detach"])
def test_dir_naming_a_file_is_one_line_and_exit_2(tmp_path, command):
    afile = tmp_path / "cassettes.txt"
    afile.write_text("not a folder")
    done = subprocess.run([CASSETTE, command[0], "--dir", str(afile), *command[1:]], env=private_env(tmp_path),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (f"cassette: --dir {afile} is a file, not a folder: pass the folder the cassettes are in "
                           "(or set CASSETTE_DIR)\n")  # fmt: skip
    assert registrations(tmp_path) == []


def test_serve_detach_on_a_taken_port_says_so_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([CASSETTE, "serve", "--detach", "--port", str(port), "--dir", str(tmp_path)],
                              env=private_env(tmp_path), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"cassette: --port {port}: port {port} on 127.0.0.1 is not free (Address "
                                        "already in use); pick another or leave --port out for a free one"]  # fmt: skip
    assert registrations(tmp_path) == []


def test_a_replay_from_a_missing_folder_says_it_is_missing(tmp_path, capsys):
    missing = tmp_path / "no-such-folder"
    assert checked_folder(missing, "replay") == missing
    assert capsys.readouterr().err == (f"cassette: warning: the cassette folder {missing} does not exist: in replay "
                                       "every request to a controlled host will miss (pass --dir, or record first with "
                                       "--mode record)\n")  # fmt: skip
    checked_folder(missing, "record")  # recording creates it
    assert capsys.readouterr().err == ""


def test_run_refuses_a_file_before_looking_for_mitmdump(tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("")
    assert main(["run", "--dir", str(afile), "--mitmdump", str(tmp_path / "no-mitmdump"), "--", "true"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
