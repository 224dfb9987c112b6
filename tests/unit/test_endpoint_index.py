"""The endpoint index a miss ranks its closest recordings from: listed once, then kept right while other
processes add, remove and rewrite cassettes in the folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cassette_proxy.core.defaults import DEFAULT_KEY_HEADERS
from cassette_proxy.core.keys.recipe import make_recipe
from cassette_proxy.core.reading import miss
from cassette_proxy.core.reading.endpoint_index import EndpointIndex, EndpointIndexes

KEYS = [f"{i:032x}" for i in range(6)]


def write(folder: Path, name: str, mtime: float, body: dict | None = None) -> Path:
    path = folder / name
    path.write_text(json.dumps(cassette(body or {"n": name})))
    os.utime(path, (mtime, mtime))
    return path


def cassette(body: dict) -> dict:
    return {
        "cassette_format": 1,
        "key": KEYS[0],
        "request": {"method": "POST", "url": "http://h/v1/x", "headers": {}, "body_format": "json", "body": body},
        "response": {"status": 200, "headers": {}, "body_format": "json", "body": {}},
    }


RECIPE = make_recipe([], DEFAULT_KEY_HEADERS, [])


def asked(body: dict) -> dict:
    """A missed request to the folder's endpoint, as the addon hands it to the search."""
    return {"method": "POST", "url": "http://h/v1/x", "headers": {}, "body_format": "json", "body": body}


def found(entry: dict) -> tuple[str, list[str]]:
    return entry["cassette"], entry["differences"]


def settle(folder: Path) -> None:
    """Date the folder's last change in the past, as if the last write was seconds ago (see RACY_NS)."""
    old = time.time() - 10
    os.utime(folder, (old, old))


def in_another_process(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "h_8000" / "v1" / "x"
    folder.mkdir(parents=True)
    now = time.time() - 100
    for i, key in enumerate(KEYS[:4]):
        write(folder, f"{key}.json", now + i)
    (folder / f".{KEYS[5]}.json.tmp").write_text("{")  # a write in progress is not a cassette
    (folder / "notes.txt").write_text("not a cassette")
    settle(folder)
    return folder


def names(index: EndpointIndex, count: int = 10) -> list[str]:
    return [name for name, _ in index.newest(count)]


def test_lists_the_cassettes_newest_first_and_nothing_else(folder):
    index = EndpointIndex(str(folder))
    assert names(index) == [f"{k}.json" for k in reversed(KEYS[:4])]
    assert names(index, 2) == [f"{KEYS[3]}.json", f"{KEYS[2]}.json"]


def test_an_unchanged_folder_is_neither_listed_nor_stated_again(folder):
    index = EndpointIndex(str(folder))
    names(index)
    assert (index.listings, index.stats) == (1, 4)
    for _ in range(5):
        names(index)
    assert (index.listings, index.stats) == (1, 4)


def test_a_file_added_by_another_process_is_seen_and_only_it_is_stated(folder):
    index = EndpointIndex(str(folder))
    names(index)
    in_another_process(f"open({str(folder / (KEYS[4] + '.json'))!r}, 'w').write('{{}}')")
    assert names(index)[0] == f"{KEYS[4]}.json"
    assert (index.listings, index.stats) == (2, 5)


def test_a_file_removed_by_another_process_is_gone(folder):
    index = EndpointIndex(str(folder))
    names(index)
    in_another_process(f"import os; os.remove({str(folder / (KEYS[3] + '.json'))!r})")
    assert names(index) == [f"{k}.json" for k in reversed(KEYS[:3])]


def test_a_cassette_rewritten_by_rename_moves_to_the_front(folder):
    index = EndpointIndex(str(folder))
    names(index)
    settle(folder)
    # What an atomic write does: a new file, renamed over the old one (a new inode, a new mtime).
    in_another_process(
        "import os;"
        f"open({str(folder / '.new.tmp')!r}, 'w').write('{{}}');"
        f"os.replace({str(folder / '.new.tmp')!r}, {str(folder / (KEYS[0] + '.json'))!r})"
    )
    assert names(index)[0] == f"{KEYS[0]}.json"


def test_a_folder_changed_within_the_clock_tick_is_listed_again(folder):
    """Two writes in one tick of the file system clock leave one folder mtime: a recent stamp is not trusted."""
    index = EndpointIndex(str(folder))
    write(folder, f"{KEYS[4]}.json", time.time())  # the folder's mtime is now
    names(index)
    names(index)
    assert index.listings == 2
    assert index.stats == 5  # listed again, but nothing unchanged is stat-ed again


def test_a_missing_folder_has_no_cassettes_until_it_appears(tmp_path):
    index = EndpointIndex(str(tmp_path / "absent"))
    assert names(index) == []
    (tmp_path / "absent").mkdir()
    write(tmp_path / "absent", f"{KEYS[0]}.json", time.time())
    assert names(index) == [f"{KEYS[0]}.json"]


def test_indexes_keep_the_most_recently_used_folders(tmp_path):
    indexes = EndpointIndexes(size=2)
    a, b = indexes.of("a"), indexes.of("b")
    assert indexes.of("a") is a
    indexes.of("c")
    assert indexes.of("a") is a
    assert indexes.of("b") is not b


def test_a_second_miss_reads_no_unchanged_cassette_and_sees_a_new_one(folder, monkeypatch):
    search = miss.ClosestSearch()
    root = folder.parents[2]
    reads = []
    real_load = miss.load
    monkeypatch.setattr(miss, "load", lambda path, root=None: reads.append(path) or real_load(path, root))

    first = search.closest(folder, root, asked({"n": f"{KEYS[2]}.json"}), RECIPE)
    assert len(reads) == 4
    assert found(first[0]) == (f"h_8000/v1/x/{KEYS[2]}.json", [])

    search.closest(folder, root, asked({"n": "other"}), RECIPE)
    assert len(reads) == 4

    write(folder, f"{KEYS[4]}.json", time.time(), {"n": "new"})
    nearest = search.closest(folder, root, asked({"n": "new"}), RECIPE)
    assert [Path(p).name for p in reads[4:]] == [f"{KEYS[4]}.json"]
    assert nearest[0]["cassette"] == f"h_8000/v1/x/{KEYS[4]}.json"


def test_a_cassette_rewritten_in_place_is_read_again(folder, monkeypatch):
    """An editor saving over the file keeps its inode; the new mtime and size make it a new version."""
    search = miss.ClosestSearch()
    root = folder.parents[2]
    search.closest(folder, root, asked({"n": "x"}), RECIPE)
    path = folder / f"{KEYS[1]}.json"
    path.write_text(json.dumps(cassette({"n": "edited in place"})))
    nearest = search.closest(folder, root, asked({"n": "edited in place"}), RECIPE)
    assert found(nearest[0]) == (f"h_8000/v1/x/{KEYS[1]}.json", [])
