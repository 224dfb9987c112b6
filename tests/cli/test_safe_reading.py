"""One safe reader for every command: a folder from a pull request holding a symlink to `/dev/zero`, one to
`/etc/passwd`, a file over the size limit, a fifo and a symlinked folder is listed, each refused file named with its
reason, nothing outside the folder read, and no command hangs or grows without bound (the proxy's own checks:
`safe_read.read_limited`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cassette_proxy.cli import diff as diff_command
from cassette_proxy.cli import main
from cassette_proxy.core.files.safe_read import DEFAULT_MAX_SIZE, CassetteError
from cassette_proxy.core.report import Report
from samples import cassette_path, chat, write

ZERO, PASSWD, HUGE, FIFO = (f"{n:032x}" for n in (1, 2, 3, 4))
REASONS = {
    ZERO: "resolves to /dev/zero, outside the cassette folder",
    PASSWD: "resolves to /etc/passwd, outside the cassette folder",
    HUGE: f"is {DEFAULT_MAX_SIZE + 1} bytes, over the cassette_max_size limit of {DEFAULT_MAX_SIZE} bytes",
    FIFO: "is not a regular file (a fifo)",
}
PASSWD_TEXT = "root:x:0:0"


@pytest.fixture
def hostile(tmp_path, monkeypatch) -> Path:
    """A cassette folder with one good cassette, the four hostile files beside it, and a symlinked folder that leads
    to a cassette outside; the commands run from its parent, as in a checkout."""
    root = tmp_path / "cassettes"
    good = write(root, chat("a fine prompt", "a fine answer"))
    folder = good.parent
    (folder / f"{ZERO}.json").symlink_to("/dev/zero")
    (folder / f"{PASSWD}.json").symlink_to("/etc/passwd")
    with open(folder / f"{HUGE}.json", "wb") as huge:
        huge.truncate(DEFAULT_MAX_SIZE + 1)  # sparse: no disk, but stat says 256 MiB + 1
    os.mkfifo(folder / f"{FIFO}.json")
    outside = write(tmp_path / "elsewhere", chat("a prompt outside the folder", "outside"))
    (root / "linked").symlink_to(outside.parents[3], target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return root


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_each_refused_with_its_reason(out: str) -> None:
    for key, reason in REASONS.items():
        assert any(key[-8:] in line and reason in line for line in out.splitlines()), (key, out)
    assert PASSWD_TEXT not in out and "outside the folder" not in out


def test_ls_lists_every_file_and_says_why_it_refuses_each(hostile, capsys):
    code, out = run(capsys, "ls", "cassettes")
    assert code == 1
    assert "a fine prompt" in out
    assert_each_refused_with_its_reason(out)
    assert len(out.splitlines()) == 5  # the symlinked folder is not walked


def test_show_stale_and_scan_refuse_each_hostile_file_with_its_reason(hostile, capsys):
    for key, reason in REASONS.items():
        code, out = run(capsys, "show", key)
        assert code == 1 and reason in out, out
    code, out = run(capsys, "stale", "cassettes")
    assert code == 1 and "4 of 5 cassette(s)" in out
    assert_each_refused_with_its_reason(out)
    code, out = run(capsys, "scan", "cassettes")
    assert code == 1 and "in 4 of 5 file(s)" in out
    assert_each_refused_with_its_reason(out)


def test_rekey_refuses_to_touch_a_folder_it_cannot_read_whole(hostile, capsys):
    code, out = run(capsys, "rekey", "--dir", "cassettes")
    assert code == 1 and "nothing changed (4 problems)" in out
    assert_each_refused_with_its_reason(out)
    assert os.path.islink(next(hostile.rglob(f"{PASSWD}.json")))  # untouched


def test_view_lists_refused_files_with_their_reasons_and_exports_nothing_from_outside(hostile, capsys):
    code, out = run(capsys, "view", "cassettes", "--html", "page.html", "--no-cache")
    assert code == 0 and "(5 of 5 cassettes)" in out
    page = Path("page.html").read_text(encoding="utf-8")
    data = json.loads(page.split('<script type="application/json" id="cassette-data">', 1)[1].split("</script>", 1)[0])
    errors = {entry["id"].rsplit("/", 1)[-1][:32]: entry.get("error", "") for entry in data["cassettes"]}
    details = {cassette_id.rsplit("/", 1)[-1][:32]: detail for cassette_id, detail in data["details"].items()}
    for key, reason in REASONS.items():
        assert reason in errors[key] and reason in details[key]["error"] and "raw" not in details[key]
    assert PASSWD_TEXT not in page and "a prompt outside the folder" not in page


def test_prune_never_leaves_the_folder(hostile, capsys, tmp_path):
    report = Report(hits=1, cassettes_used={cassette_path(chat("a fine prompt", "a fine answer"))})
    report.write(tmp_path / "report.json")
    code, out = run(capsys, "prune", "report.json", "--dir", "cassettes", "--delete")
    assert code == 0 and "deleted 4 unused cassette(s)" in out
    assert (tmp_path / "elsewhere").is_dir() and list((tmp_path / "elsewhere").rglob("*.json"))  # kept
    assert Path("/etc/passwd").is_file()


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def test_diff_refuses_what_the_proxy_would_and_bounds_what_it_asks_of_git(hostile, capsys):
    git("init", "-q")
    git("config", "user.email", "dev@example.invalid")
    git("config", "user.name", "dev")
    folder = next(hostile.rglob(f"{ZERO}.json")).parent
    (folder / f"{HUGE}.json").unlink()
    (folder / f"{FIFO}.json").unlink()
    git("add", "-A")
    git("commit", "-qm", "cassettes")  # the /dev/zero and /etc/passwd links are committed as symlinks
    good = hostile / cassette_path(chat("a fine prompt", "a fine answer"))
    (folder / f"{PASSWD}.json").unlink()
    (folder / f"{PASSWD}.json").write_bytes(good.read_bytes())  # was a symlink at HEAD
    with open(folder / f"{HUGE}.json", "wb") as huge:
        huge.truncate(DEFAULT_MAX_SIZE + 1)
    code, out = run(capsys, "diff")
    assert code == 1
    assert f"{PASSWD}.json at HEAD: is a symlink, not a regular file" in out
    assert REASONS[HUGE] in out
    assert PASSWD_TEXT not in out
    with pytest.raises(CassetteError, match="over the cassette_max_size limit of 100 bytes"):
        diff_command.old_cassette("HEAD", good.relative_to(hostile.parent).as_posix(), max_size=100)
