"""This user's private folder on this machine: `cassette serve`'s state, the warm proxies, the proxy's CA.

Under `$XDG_RUNTIME_DIR` (else `$TMPDIR`, else /tmp): `cassette-proxy-<uid>`, mode 0700. Things in it are
trusted (`eval "$(cassette env)"` runs what one file says, a warm proxy's record names its control token),
so a folder another user could have made or may write is refused before anything in it is read.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from .errors import LauncherError


def user_folder() -> Path:
    """The folder's path (not checked: see `private_folder`)."""
    return Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"cassette-proxy-{os.getuid()}"


def private_subfolder(name: str) -> Path:
    """`user_folder()/name`, both made (0700) and checked private."""
    folder = user_folder()
    private_folder(folder, create=True)
    private_folder(folder / name, create=True)
    return folder / name


def private_folder(folder: Path, create: bool) -> bool:
    """Check (and with `create`, make, mode 0700) the state file's folder; False when it does not exist.

    `eval "$(cassette env)"` runs what the state file says, and `$TMPDIR` is
    shared: a folder another user created first, or one others may write to,
    would let them choose the commands. Such a folder is refused before
    anything in it is read or written.
    """
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    try:
        status = os.lstat(folder)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(status.st_mode):
        raise LauncherError(
            f"{folder} is not a folder (a symlink or a file): the `cassette serve` state must live in a private "
            "folder; nothing was read. Remove it, then start `cassette serve` again."
        )
    if status.st_uid != os.getuid():
        raise LauncherError(
            f"{folder} belongs to user id {status.st_uid}, not to you ({os.getuid()}): another user may have made it "
            "to choose what `cassette env` prints; nothing was read. Remove it (or point XDG_RUNTIME_DIR or TMPDIR "
            "at a private folder), then start `cassette serve` again."
        )
    if status.st_mode & 0o077:
        raise LauncherError(
            f"{folder} has mode {stat.S_IMODE(status.st_mode):o}: others may read or write it, and `cassette env` "
            f"output is run by the shell; nothing was read. Run `chmod 700 {folder}` if you made it, else remove it, "
            "then start `cassette serve` again."
        )
    return True
