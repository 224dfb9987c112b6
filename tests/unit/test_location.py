"""Where a cassette lives (core/files/location.py): a URL path segment longer than a file name may be (255 bytes) and a
whole name over MAX_NAME are shortened deterministically (a readable prefix plus a hash); names that fit are
unchanged, so existing cassettes keep their paths. Such requests recorded and replayed through a real mitmdump:
tests/integration/test_long_path_segments.py; in the addon: tests/addon/test_long_names.py."""

from __future__ import annotations

from cassette_proxy.core.files.location import MAX_NAME, MAX_SEGMENT, relative_name, short_name

KEY = "0123456789abcdef0123456789abcdef"


def segments(path: str) -> list[str]:
    return relative_name("https", "api.example.com", 443, path, KEY).split("/")[1:-1]


def test_a_segment_that_fits_is_unchanged():
    fits = "a" * MAX_SEGMENT
    assert segments(f"/v1/files/{fits}/content") == ["v1", "files", fits, "content"]


def test_a_long_segment_becomes_a_readable_prefix_and_a_hash_of_the_whole_segment():
    long = "file-" + "x" * 395
    (first, short) = segments(f"/v1/{long}")
    assert first == "v1"
    assert len(short.encode()) <= MAX_SEGMENT
    assert short.startswith("file-xxxx")
    assert segments(f"/v1/{long}") == ["v1", short]  # deterministic
    assert segments(f"/v1/{long[:-1]}y")[1] != short  # same prefix, other segment: another folder


def test_a_long_non_ascii_segment_fits_in_255_bytes():
    (short,) = segments("/" + "é" * 300)
    assert len(short.encode()) <= 255


def long_path(total: int) -> str:
    """A URL path of segments of up to 150 characters whose cassette name (`relative_name`) is `total` bytes long."""
    path = "/v1"
    while (left := total - len(relative_name("https", "api.example.com", 443, path, KEY))) > 0:
        path += "s" if left == 1 else "/" + "s" * min(150, left - 1)
    return path


def test_a_name_over_the_limit_is_shortened_to_a_readable_prefix_and_a_hash_and_one_at_it_is_not():
    at = relative_name("https", "api.example.com", 443, long_path(MAX_NAME), KEY)
    assert len(at) == MAX_NAME  # stored as it is: existing cassettes keep their names
    over = relative_name("https", "api.example.com", 443, long_path(MAX_NAME + 1), KEY)
    short = short_name(over)
    assert len(short) < 300 and all(len(part) <= 255 for part in short.split("/"))
    assert short.startswith("api.example.com/v1/sss") and short.endswith(f"/{KEY}.json")
    assert short == short_name(over)  # deterministic
    assert short_name(over.replace("s/", "t/", 1)) != short  # another endpoint: another folder
