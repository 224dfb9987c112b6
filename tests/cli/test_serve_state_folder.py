"""The folder of `cassette serve`'s state file is private: created 0700, refused when another user owns it or
others may write it, whether it lives under XDG_RUNTIME_DIR or under $TMPDIR.

`eval "$(cassette env)"` runs what that file says: a folder another local user
created first in a shared $TMPDIR would let them choose the commands.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from cassette_command import CASSETTE
from cassette_proxy.launch import serve_state, user_folder

PLANTED = "export HTTPS_PROXY=http://127.0.0.1:1\necho PLANTED-BY-ANOTHER-USER\n"


def environment(base: Path, where: str) -> tuple[dict, Path]:
    """The environment of `cassette env` and the state folder it uses, under XDG_RUNTIME_DIR or under TMPDIR."""
    env = {name: value for name, value in os.environ.items() if name not in ("XDG_RUNTIME_DIR", "TMPDIR")}
    env["XDG_RUNTIME_DIR" if where == "xdg" else "TMPDIR"] = str(base)
    return env, base / f"cassette-proxy-{os.getuid()}"


def plant(folder: Path) -> None:
    """A state file naming a live process (this test), as a squatter would write it."""
    folder.mkdir(exist_ok=True)
    (folder / "serve.env").write_text(f"{serve_state.state_header(os.getpid())}\n{PLANTED}")


def cassette_env(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([CASSETTE, "env"], env=env, capture_output=True, text=True, timeout=60)


OTHER_USER = 65534  # nobody


@pytest.mark.parametrize("where", ["xdg", "tmpdir"])
@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda folder: os.chown(folder, OTHER_USER, OTHER_USER), f"belongs to user id {OTHER_USER}, not to you"),
        (lambda folder: folder.chmod(0o777), "has mode 777: others may read or write it"),
        (lambda folder: folder.chmod(0o755), "has mode 755"),
        (lambda folder: folder.chmod(0o710), "has mode 710"),
    ],
    ids=["other-owner", "world-writable", "world-readable", "group-searchable"],
)
def test_env_refuses_a_folder_others_own_or_may_use_and_reads_nothing(tmp_path, where, damage, problem):
    if os.getuid() != 0 and "belongs" in problem:
        pytest.fail("giving a folder to another user needs root: CI runs the suite as root")
    env, folder = environment(tmp_path, where)
    plant(folder)
    folder.chmod(0o700)
    damage(folder)
    result = cassette_env(env)
    assert result.returncode == 2
    assert "PLANTED" not in result.stdout + result.stderr
    assert str(folder) in result.stderr
    assert problem in result.stderr
    assert "nothing was read" in result.stderr


@pytest.mark.parametrize("where", ["xdg", "tmpdir"])
def test_env_refuses_a_symlinked_folder(tmp_path, where):
    env, folder = environment(tmp_path, where)
    elsewhere = tmp_path / "elsewhere"
    plant(elsewhere)
    elsewhere.chmod(0o700)
    folder.symlink_to(elsewhere)
    result = cassette_env(env)
    assert result.returncode == 2
    assert "is not a folder (a symlink or a file)" in result.stderr
    assert "PLANTED" not in result.stdout


@pytest.mark.parametrize("where", ["xdg", "tmpdir"])
def test_a_private_folder_is_read_as_before(tmp_path, where):
    env, folder = environment(tmp_path, where)
    plant(folder)
    folder.chmod(0o700)
    result = cassette_env(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == PLANTED


def test_the_folder_is_created_0700_whatever_the_umask(tmp_path):
    folder = tmp_path / "cassette-proxy-x"
    previous = os.umask(0)
    try:
        assert user_folder.private_folder(folder, create=True)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert not user_folder.private_folder(tmp_path / "absent", create=False)


def test_serve_refuses_a_bad_folder_before_starting_a_proxy(tmp_path):
    env, folder = environment(tmp_path, "tmpdir")
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    result = subprocess.run([CASSETTE, "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "has mode 777" in result.stderr
    assert "serving at" not in result.stdout
    assert list(folder.iterdir()) == []


def test_env_refuses_a_leftover_whose_pid_another_process_has_now(tmp_path):
    """A serve killed outright leaves its state file; its pid, reused, must not make its port look served."""
    env, folder = environment(tmp_path, "xdg")
    folder.mkdir(mode=0o700)
    started = int(serve_state.state_header(os.getpid()).rsplit(" ", 1)[1])
    (folder / "serve.env").write_text(f"{serve_state.STATE_HEADER}{os.getpid()} started {started + 1}\n{PLANTED}")
    result = cassette_env(env)
    assert result.returncode == 2
    assert "no `cassette serve` is running" in result.stderr
    assert "PLANTED" not in result.stdout
