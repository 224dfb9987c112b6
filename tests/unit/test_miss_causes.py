"""The causes a miss names, and the message it builds from them. Pure logic, no proxy."""

from __future__ import annotations

from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.keys.recipe import make_recipe, stored_identity
from cassette_proxy.core.reading.miss import closest, identity_differences, miss_body

RECIPE = make_recipe()


def request(body=None, url="https://api.openai.com/v1/chat/completions", method="POST", headers=None) -> dict:
    return {
        "method": method,
        "url": url,
        "headers": headers or {},
        "body_format": "json",
        "body": body or {"model": "m"},
    }


def causes(recorded: dict, current: dict, recipe=RECIPE) -> list[str]:
    return identity_differences(stored_identity(recorded, recipe), stored_identity(current, recipe))


def test_every_kind_of_cause_is_named_recorded_to_current():
    recorded = request({"model": "m", "n": 1}, url="https://x.test/v1/a?api-version=1&alt=sse",
                       headers={"anthropic-version": "1", "anthropic-beta": "b"})  # fmt: skip
    current = request({"model": "m", "n": 2}, url="https://x.test/v1/b?api-version=2", method="PUT",
                      headers={"anthropic-version": "2", "anthropic-beta": "b, c"})  # fmt: skip
    assert causes(recorded, current) == [
        "method: POST → PUT",
        "url: https://x.test/v1/a → https://x.test/v1/b",
        'query alt: removed (was "sse")',
        'query api-version: "1" → "2"',
        'header anthropic-beta: ["b"] → ["b", "c"]',
        'header anthropic-version: "1" → "2"',
        "n: 1 → 2",
    ]


def test_equivalent_spellings_are_no_cause():
    recorded = request({"t": 1.0, "m": [{"id": "a"}]}, headers={"anthropic-beta": "x,y"})
    current = request({"m": [{"id": "b"}], "t": 1}, headers={"anthropic-beta": "y, x"})
    assert causes(recorded, current, make_recipe(ignore=["m.*.id"])) == []


def test_non_json_bodies_are_described_not_dumped():
    text = {**request(), "body_format": "text", "body": "plain words"}
    assert causes(request(), text) == ["body: JSON → not JSON"]
    other = {**text, "body": "other words"}
    assert causes(text, other)[0].startswith("body: bytes with sha256 ")


def test_the_message_names_three_causes_and_counts_the_rest():
    nearest = [{"cassette": "a/b.json", "differences": [f"f{i}: 0 → 1" for i in range(5)]}]
    message = miss_body("k" * 32, "POST", "https://u", "a/c.json", "replay", nearest)["error"]["message"]
    assert "differs in: f0: 0 → 1; f1: 0 → 1; f2: 0 → 1 (+2 more)." in message


def test_the_message_names_different_settings_and_the_way_out():
    nearest = [{"cassette": "a/b.json", "differences": [], "settings": ["recorded with a different ignore set: [] → ['x']", "carry recordings over with `cassette rekey`"]}]  # fmt: skip
    message = miss_body("k" * 32, "POST", "https://u", "a/c.json", "replay", nearest)["error"]["message"]
    assert (
        "closest recording a/b.json: recorded with a different ignore set: [] → ['x']; carry recordings over" in message
    )


def test_a_format_1_recording_of_the_same_request_says_it_was_keyed_by_an_older_recipe(tmp_path):
    folder = tmp_path / "api.openai.com" / "v1" / "chat" / "completions"
    folder.mkdir(parents=True)
    cassette = new_cassette("0" * 32, request({"t": 1.0}), {"status": 200, "headers": {}}, {})
    (folder / f"{'0' * 32}.json").write_bytes(dumps({**cassette, "cassette_format": 1}))
    [entry] = closest(folder, tmp_path, request({"t": 1}), RECIPE)
    assert entry["differences"] == []
    assert entry["settings"][0] == "recorded by an older key recipe (cassette_format 1)"
