"""What a miss tells the user to type: in the words of how the proxy was started, and for values that look made up."""

from __future__ import annotations

import random
import re
import uuid

import pytest
from cassette_proxy.core import hints
from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.keys.recipe import make_recipe, stored_identity, stored_key
from cassette_proxy.core.reading.miss import closest, miss_body
from cassette_proxy.core.reading.random_values import common_shape


@pytest.mark.parametrize(
    ("started_by", "typed"),
    [("run", "`cassette run --mode record -- …`"), ("serve", "`cassette serve --mode record`"),
     ("pytest", "`pytest --cassette-mode=record`"), ("mitmdump", "`--set cassette_mode=record`")],
)  # fmt: skip
def test_the_record_hint_names_what_the_user_types(started_by, typed):
    message = miss_body("k" * 32, "POST", "https://u", "a/c.json", "replay", [], started_by=started_by)["error"][
        "message"
    ]
    assert message.endswith(f"To record it: {typed} (records only what is missing).")
    assert "cassette_mode" not in message or started_by == "mitmdump"
    session = hints.record_session(started_by)  # a WebSocket session's miss, told in the client's error
    assert session.startswith(f"To record it: {typed} (runs the session live")
    assert "cassette_mode" not in session or started_by == "mitmdump"


SEEDED = random.Random(23)
"""Collected the same by every xdist worker (ids hold the values), yet as random-looking as a framework's."""


def made_up_uuid() -> uuid.UUID:
    return uuid.UUID(int=SEEDED.getrandbits(128), version=4)


MADE_UP = [
    (str(made_up_uuid()), str(made_up_uuid()), "a UUID"),
    (f"agents-sdk:run:{made_up_uuid().hex}", f"agents-sdk:run:{made_up_uuid().hex}", "32 hex digits"),
    ("trace_" + made_up_uuid().hex, "trace_" + made_up_uuid().hex, "32 hex digits"),
    ("2025-03-01T10:00:00.123Z", "2026-11-29T20:07:02.456Z", "a timestamp"),
    ("2025-03-01T10:00:00+00:00", "2025-03-01T10:00:01+00:00", "a timestamp"),
    ("sess_Z3kP9qLm2XwR7tYb4NcV", "sess_Hq8Lr2Mn5PkW1sXz9BtD", "a random token of 20 characters"),
    ("sess_Z3k-P9qLm2XwR7tYb4NcV", "sess_Hq8-Lr2Mn5PkW1sXz9BtD", "a random token of 21 characters"),
    ("1712345678", "1712349999", "a Unix timestamp"),
]


@pytest.mark.parametrize(("before", "after", "what"), MADE_UP)
def test_a_made_up_value_gets_a_pattern_that_keys_both_alike(before, after, what):
    shape = common_shape(before, after)
    assert shape.what == what
    assert re.fullmatch(shape.expression, before) and re.fullmatch(shape.expression, after)
    recipe = make_recipe(ignore_values=[shape.expression], frameworks=())  # what the hint's flag gives the run
    assert stored_key(request({"user": before}), recipe) == stored_key(request({"user": after}), recipe)


@pytest.mark.parametrize(
    ("before", "after"),
    [("Say hello", "Say goodbye"), ("gpt-4o-mini-2024-07-18", "gpt-4o-2024-08-06"), ("call_abc", "call_abd"),
     ("SummariseTheDocumentNow", "SummariseTheReportNow1"), (str(made_up_uuid()), made_up_uuid().hex)],
)  # fmt: skip
def test_real_changes_and_changed_shapes_are_not_called_made_up(before, after):
    assert common_shape(before, after) is None


def request(body: dict) -> dict:
    return {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {},
            "body_format": "json", "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}}  # fmt: skip


def recorded(tmp_path, body: dict) -> None:
    stored = request(body)
    key = stored_key(stored, make_recipe())
    path = tmp_path / relative_name("https", "api.openai.com", 443, "/v1/chat/completions", key)
    path.parent.mkdir(parents=True, exist_ok=True)
    response = {"status": 200, "headers": {}, "body_format": "json", "body": {}}
    path.write_bytes(dumps(new_cassette(key, stored, response, {}, make_recipe().to_json())))


def miss_message(tmp_path, body: dict, started_by: str) -> tuple[list[dict], str]:
    current = request(body)
    nearest = closest(tmp_path / "api.openai.com/v1/chat/completions", tmp_path, current, make_recipe())
    key = stored_key(current, make_recipe())
    return nearest, miss_body(key, "POST", current["url"], "x.json", "replay", nearest, started_by=started_by)["error"][
        "message"
    ]


def test_a_miss_that_differs_only_in_a_made_up_value_gives_the_exact_flag(tmp_path):
    recorded(tmp_path, {"metadata": {"request_id": str(made_up_uuid())}, "created_at": 1712345678})
    body = {"metadata": {"request_id": str(made_up_uuid())}, "created_at": 1712349999}
    nearest, message = miss_message(tmp_path, body, "pytest")
    assert nearest[0]["random_values"] == [
        {"field": "created_at", "looks_like": "a Unix timestamp", "ignore": "created_at"},
        {"field": "metadata.request_id", "looks_like": "a UUID",
         "pattern": "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    ]  # fmt: skip
    assert (
        "Only values that look made up on each run differ: created_at (a Unix timestamp), metadata.request_id "
        "(a UUID). If your code invents them, key them by shape with `pytest --cassette-ignore-value="
        "'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'` (or that line under cassette_ignore_values "
        "in pytest.ini); leave them out of the key with `pytest --cassette-ignore=created_at`"
    ) in message
    _, by_run = miss_message(tmp_path, body, "run")
    assert (
        "`cassette run --ignore-value '[0-9a-f]{8}-" in by_run and "`cassette run --ignore created_at -- …`" in by_run
    )


def test_a_miss_with_a_real_change_beside_a_made_up_value_gives_no_such_hint(tmp_path):
    recorded(tmp_path, {"metadata": {"request_id": str(made_up_uuid())}})
    body = {"metadata": {"request_id": str(made_up_uuid())}, "temperature": 0}
    nearest, message = miss_message(tmp_path, body, "run")
    assert "random_values" not in nearest[0] and "look made up" not in message


def test_a_value_a_preset_already_keys_is_no_difference_at_all(tmp_path):
    recorded(tmp_path, {"prompt_cache_key": f"agents-sdk:run:{made_up_uuid().hex}"})
    current = request({"prompt_cache_key": f"agents-sdk:run:{made_up_uuid().hex}"})
    assert stored_identity(current, make_recipe())["body"]["json"]["prompt_cache_key"] == "agents-sdk:run:…#1"
    nearest, message = miss_message(tmp_path, {"prompt_cache_key": f"agents-sdk:run:{made_up_uuid().hex}"}, "run")
    assert nearest[0]["differences"] == [] and "is the same request as keyed now" in message


def test_hints_quote_for_the_shell():
    assert hints.ignore_value("run", "a b") == "`cassette run --ignore-value 'a b' -- …`"
    assert hints.ignore_path("mitmdump", "messages.0.id") == "`--set cassette_ignore=messages.0.id`"
