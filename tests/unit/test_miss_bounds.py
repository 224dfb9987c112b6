"""A miss's work is bounded whatever the bodies hold, and its diff reads as a person would say it. Pure, no proxy.

The hostile inputs are made here: a near miss against a recording holding a multi-megabyte data URL (what
pydantic-ai's and LangChain's multimodal tests send), lists with an item inserted or two parts swapped, nesting
far past the interpreter's recursion limit, a cassette nested 1,000 deep beside a good one.
"""

from __future__ import annotations

import base64
import random

from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.keys.recipe import make_recipe
from cassette_proxy.core.reading import random_values
from cassette_proxy.core.reading.diff import (
    MAX_CHANGES,
    MAX_DEPTH,
    Reordered,
    changes,
    differences,
    first_difference,
    in_context,
    weighed_differences,
)
from cassette_proxy.core.reading.miss import closest, miss_body

RECIPE = make_recipe()
URL = "https://api.openai.com/v1/chat/completions"


def data_url(size: int, seed: int) -> str:
    return "data:image/png;base64," + base64.b64encode(random.Random(seed).randbytes(size)).decode()


def chat(*parts: dict) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": list(parts)}]}


def request(body: dict) -> dict:
    return {"method": "POST", "url": URL, "headers": {}, "body_format": "json", "body": body}


def recorded_folder(tmp_path, *bodies: dict):
    folder = tmp_path / "api.openai.com" / "v1" / "chat" / "completions"
    folder.mkdir(parents=True)
    for i, body in enumerate(bodies):
        key = f"{i:032x}"
        (folder / f"{key}.json").write_bytes(
            dumps(new_cassette(key, request(body), {"status": 200, "headers": {}}, {}))
        )
    return folder


def test_a_near_miss_against_a_megabyte_data_url_reads_the_string_a_bounded_number_of_times(tmp_path, monkeypatch):
    # Every split of the data URL (base64 is full of `/`) was tried as a made-up id's prefix: quadratic, minutes.
    tried = []
    real = random_values._tail_shape
    monkeypatch.setattr(random_values, "_tail_shape", lambda tail: tried.append(len(tail)) or real(tail))
    recorded = chat(
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": data_url(1_500_000, 1)}}
    )
    current = chat(
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": data_url(100_000, 2)}}
    )
    folder = recorded_folder(tmp_path, recorded)
    [entry] = closest(folder, tmp_path, request(current), RECIPE)
    [difference] = entry["differences"]
    assert difference.startswith(
        "messages[0].content[1].image_url.url: a long value differs (2,000,022 → 133,358 characters"
    )
    assert "the same up to character 22" in difference
    assert len(difference) < 300
    assert sum(tried) == 0  # a megabyte string is never read for a made-up value


def test_a_made_up_tail_is_still_found_after_a_short_prefix():
    [(prefix, shape)] = [r for r in random_values.string_shapes("agents-sdk:run:" + "ab12" * 8) if r[0]]
    assert prefix == "agents-sdk:run:" and shape.what == "32 hex digits"
    long_text = "x" * 70 + ":" + "ab12" * 8  # a tail after the first 64 characters is not looked for
    assert all(not p for p, _ in random_values.string_shapes(long_text))


def test_an_inserted_part_is_one_change_and_the_rest_are_not_shifted():
    text = [{"type": "text", "text": f"part {i}"} for i in range(5)]
    assert differences(chat(*text), chat(*text[:2], {"type": "text", "text": "new"}, *text[2:])) == [
        'messages[0].content[2]: added {"type": "text", "text": "new"}'
    ]
    assert differences(chat(*text), chat(*text[:1], *text[2:])) == [
        'messages[0].content[1]: removed (was {"type": "text", "text": "part 1"})'
    ]


def test_swapped_parts_are_one_change_that_says_which_went_where():
    image = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    text = {"type": "text", "text": "describe it"}
    [(where, old, new)] = changes(chat(text, image), chat(image, text))
    assert where == "messages[0].content" and isinstance(old, Reordered) and new == [image, text]
    assert differences(chat(text, image), chat(image, text)) == [
        "messages[0].content: the same 2 items in another order ([1] → [0], [0] → [1])"
    ]


def test_a_changed_item_in_place_still_shows_its_field():
    before = chat({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    after = chat({"type": "text", "text": "a"}, {"type": "text", "text": "c"})
    assert differences(before, after) == ['messages[0].content[1].text: "b" → "c"']


def test_the_closest_recording_of_swapped_parts_is_the_same_prompt_not_another(tmp_path):
    image = {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}}
    prompt = {"type": "text", "text": "what animal is this?"}
    others = [chat({"type": "text", "text": f"other prompt {i}"}, {"type": "text", "text": "x"}) for i in range(3)]
    folder = recorded_folder(tmp_path, *others, chat(prompt, image))
    nearest = closest(folder, tmp_path, request(chat(image, prompt)), RECIPE)
    assert nearest[0]["cassette"].endswith(f"{3:032x}.json")
    assert nearest[0]["differences"] == [
        "messages[0].content: the same 2 items in another order ([1] → [0], [0] → [1])"
    ]


def test_the_closest_recording_of_a_request_that_gained_fields_is_its_own_not_a_shorter_list(tmp_path):
    # llm-gemini's schema test: its recording lacks three `title` fields (three lines), while another test's
    # recording has another prompt and no schema at all (two lines, one of them a whole subtree gone).
    def body(prompt: str, schema: dict | None) -> dict:
        found = {"model": "m", "messages": [{"role": "user", "content": prompt}], "safety": ["a", "b", "c", "d"]}
        return found | ({"response_format": {"type": "json_schema", "schema": schema}} if schema else {})

    def schema(titled: bool) -> dict:
        fields = {"name": "string", "age": "integer", "bio": "string"}
        return {
            "type": "object",
            "required": list(fields),
            "properties": {
                name: {"type": kind} | ({"title": name.title()} if titled else {}) for name, kind in fields.items()
            },
        }

    folder = recorded_folder(tmp_path, body("Name a pet pelican", None), body("Invent a dog", schema(False)))
    nearest = closest(folder, tmp_path, request(body("Invent a dog", schema(True))), RECIPE)
    assert nearest[0]["cassette"].endswith(f"{1:032x}.json")
    assert nearest[0]["differences"] == [
        f'response_format.schema.properties.{name}.title: added "{name.title()}"' for name in ("age", "bio", "name")
    ]
    assert "weight" not in nearest[0] and "same_body" not in nearest[0]
    assert weighed_differences({"a": 1}, {"a": 2, "b": {"c": [1, 2], "d": {}}}) == (
        ["a: 1 → 2", 'b: added {"c": [1, 2], "d": {}}'],
        4,
    )


def test_two_texts_alike_in_their_first_characters_are_shown_where_they_differ():
    old, new = "x" * 30 + "aaa" + "y" * 50, "x" * 30 + "bbb" + "y" * 50
    assert in_context("[0].text", old, new) == (f'[0].text: …"{"x" * 20}aaa{"y" * 37}" → …"{"x" * 20}bbb{"y" * 37}"')
    assert in_context("n", 1, 2) == "n: 1 → 2" and in_context("s", "ab", "ac") == 's: "ab" → "ac"'


def test_nesting_past_the_recursion_limit_is_one_change_not_a_crash():
    deep_a: list = ["a"]
    deep_b: list = ["b"]
    for _ in range(5000):
        deep_a, deep_b = [deep_a], [deep_b]
    [(where, _, _)] = changes({"x": deep_a}, {"x": deep_b})
    assert where == "x" + "[0]" * (MAX_DEPTH - 1)


def test_a_diff_stops_listing_at_its_bound():
    found = differences({f"f{i}": 0 for i in range(5000)}, {f"f{i}": 1 for i in range(5000)})
    assert len(found) == MAX_CHANGES + 1
    assert found[-1] == f"… and more (listed up to {MAX_CHANGES})"


def test_a_cassette_nested_1000_deep_is_left_out_and_the_good_one_still_found(tmp_path):
    folder = recorded_folder(tmp_path, chat({"type": "text", "text": "hello"}))
    (folder / f"{'f' * 32}.json").write_text("[" * 1000 + "]" * 1000)
    [entry] = closest(folder, tmp_path, request(chat({"type": "text", "text": "hellO"})), RECIPE)
    assert entry["differences"] == ['messages[0].content[0].text: "hello" → "hellO"']


def test_first_difference_is_exact_at_the_edges():
    assert first_difference("abc", "abc") == 3
    assert first_difference("abc", "abd") == 2
    assert first_difference("", "x") == 0
    assert first_difference("ab", "abc") == 2
    long = "q" * 100_000
    assert first_difference(long + "a", long + "b") == 100_000


def test_a_miss_answered_without_its_search_says_so():
    message = miss_body("k" * 32, "POST", URL, "a/c.json", "replay", [], search_cut=2.0)["error"]["message"]
    assert "the search for the closest recording took over 2 s and was left out of this answer" in message
    assert "no recording exists" not in message
