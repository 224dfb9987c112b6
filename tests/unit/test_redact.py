"""Redaction rules: what they match, what they leave alone, and where they apply."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cassette_proxy.core.secrets.redact import luhn_valid, parse_rule, parse_rules, redact
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY
from hypothesis import given
from hypothesis import strategies as st

SECRETS = parse_rules([])
WITH_PII = parse_rules(["pii"])


def apply(text: str, rules=WITH_PII, path=("request", "body", "content")) -> str:
    for rule in rules:
        if rule.applies_to(path):
            text = rule.apply(text)
    return text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"my key is {FAKE_OPENAI_KEY}.", "my key is [REDACTED:openai-key]."),
        (f"key={FAKE_ANTHROPIC_KEY}", "key=[REDACTED:anthropic-key]"),
        ("AIza" + "Sy3xQ_-k" * 4 + "abc", "[REDACTED:google-api-key]"),
        ("id AKIAIOSFODNN7EXAMPLE", "id [REDACTED:aws-access-key-id]"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = [REDACTED:aws-secret-access-key]",
        ),
        ("token ghp_" + "a1B2" * 9, "token [REDACTED:github-token]"),
        ("Authorization: Bearer abcdefghijklmnop123456", "Authorization: Bearer [REDACTED:bearer-token]"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIz", "[REDACTED:jwt]"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----", "[REDACTED:private-key]"),
        ("write to jane.doe+ci@example.co.uk today", "write to [REDACTED:email] today"),
        ("call +1 (555) 123-4567 or 555.123.4567", "call [REDACTED:phone] or [REDACTED:phone]"),
        ("card 4111 1111 1111 1111, amex 378282246310005", "card [REDACTED:card], amex [REDACTED:card]"),
    ],
)
def test_rule_redacts_its_shape(text, expected):
    assert apply(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "sk-learn-compatible-estimators are fine",  # prose, no digit
        "4111 1111 1111 1112 fails the Luhn check",
        "order 1234567890123456 is an id",
        "at 2024-01-15 10:30:00 from 192.168.100.200, pi is 1234.56789",
        "model gpt-4o-mini-2024-07-18 version 1.2.3",
        "the bearer of bad news",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert apply(text) == text


def test_pii_rules_are_opt_in():
    assert apply("jane@example.com, +1 555 123 4567", SECRETS) == "jane@example.com, +1 555 123 4567"


@pytest.mark.parametrize(
    ("number", "valid"), [("4111111111111111", True), ("4111111111111112", False), ("79927398713", False)]
)
def test_luhn_check(number, valid):
    assert luhn_valid(number) is valid


def cassette(request_body, response_body, response_format="json"):
    return {
        "cassette_format": 1,
        "key": "0" * 32,
        "recorded_at": "2026-01-01T00:00:00+00:00",
        "request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {},
                    "body_format": "json", "body": request_body},
        "response": {"status": 200, "headers": {"x-note": "jane@example.com"}, "body_format": response_format,
                     "body": response_body},
    }  # fmt: skip


def test_redaction_reaches_nested_bodies_headers_and_leaves_structure():
    stored = redact(
        cassette(
            {"messages": [{"role": "user", "content": f"I am jane@example.com, key {FAKE_OPENAI_KEY}"}]},
            {"a": ["jane@example.com"]},
        ),
        WITH_PII,
    )
    assert stored["request"]["body"]["messages"][0] == {
        "role": "user",
        "content": "I am [REDACTED:email], key [REDACTED:openai-key]",
    }
    assert stored["response"]["body"] == {"a": ["[REDACTED:email]"]}
    assert stored["response"]["headers"] == {"x-note": "[REDACTED:email]"}
    assert (stored["key"], stored["request"]["method"], stored["response"]["status"]) == ("0" * 32, "POST", 200)


def test_pii_in_the_stored_url_query_is_redacted():
    stored = cassette({}, {})
    stored["request"]["url"] = "https://api.example.com/v1/users?email=jane.doe%40example.com&page=2"
    assert redact(stored, WITH_PII)["request"]["url"].endswith("?email=[REDACTED:email]&page=2")


def test_custom_rule_is_scoped_to_its_target():
    rules = parse_rules(["/request.body.messages.*.content/acct_[0-9]+/[REDACTED:account]"])
    stored = redact(cassette({"messages": [{"content": "acct_123"}], "user": "acct_456"}, {"echo": "acct_123"}), rules)
    assert stored["request"]["body"] == {"messages": [{"content": "[REDACTED:account]"}], "user": "acct_456"}
    assert stored["response"]["body"] == {"echo": "acct_123"}


def test_custom_rule_with_another_separator_and_a_group_reference():
    rules = parse_rules([r"|response|user=(\w+)/\d+|user=\1/N"])
    assert redact(cassette({}, "user=jane/42\n", "text"), rules)["response"]["body"] == "user=jane/N\n"


def test_base64_bodies_are_not_rewritten():
    body = "c2stZmFrZQ=="
    assert redact(cassette({}, body, "base64"), parse_rules(["/c2/XX"]))["response"]["body"] == body


def test_redaction_returns_a_copy():
    original = cassette({"messages": [{"content": "jane@example.com"}]}, {})
    redact(original, WITH_PII)
    assert original["request"]["body"]["messages"][0]["content"] == "jane@example.com"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("emial", "neither a rule name"),
        ("/only-a-regex", "use /regex/replacement"),
        ("/a/b/c/d", "use /regex/replacement"),
        ("/(/x", "invalid regular expression"),
        ("//x", "the regular expression is empty"),
        (r"/a(b)/\2", "invalid replacement"),
        ("/body/a/b", "must start with request or response"),
        ("/request.method/a/b", "after request comes one of url, headers, body"),
    ],
)
def test_bad_rule_is_rejected_with_the_reason(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_rule(spec)


def test_builtin_secret_rules_come_first_and_are_not_repeated():
    rules = parse_rules(["email", "pii"])
    names = [rule.name for rule in rules]
    assert names[: len(SECRETS)] == [rule.name for rule in SECRETS]
    assert names.count("email") == 1


@given(
    st.lists(
        st.sampled_from(
            [
                "sk-",
                "ant-",
                "AIza",
                "AKIA",
                "ghp_",
                "eyJ",
                ".",
                "Bearer ",
                "bEaReR ",
                "@",
                "%40",
                "x",
                "Q7",
                "_",
                "-",
                " ",
                "aws_secret_access_key=",
                "PRIVATE KEY",
                "-----",
            ]
        ),
        max_size=60,
    )
)
def test_hints_never_hide_a_match(pieces):
    text = "".join(pieces) + "abcdefghij0123456789ABCDEFGHIJ0123456789"
    for rule in WITH_PII:
        assert rule.apply(text) == replace(rule, hints=()).apply(text)


def test_a_text_body_holding_json_has_its_credential_fields_redacted():
    """A JSON answer above 1 MB is stored as text: the credential-field rule must still reach inside it."""
    import json

    from cassette_proxy.core.secrets.redact import parse_rules, redacted

    text = (
        '{"data": [{"Api-Key": "sk-abc\\"def", "n": 1.50}], "password" :  "hunter2", '
        '"schema": {"password": {"type": "string"}}, "other": "password", "note": "é"}'
    )
    out = redacted(text, ("response", "body"), parse_rules([]))

    parsed = json.loads(out)
    assert parsed["data"][0]["Api-Key"] == "[REDACTED:credential-field]"
    assert parsed["password"] == "[REDACTED:credential-field]"
    assert parsed["schema"] == {"password": {"type": "string"}}  # an object, not a credential
    assert parsed["other"] == "password"
    assert '"n": 1.50' in out and '"note": "é"' in out  # everything else as written
    assert redacted('{"a": "b"}', ("response", "body"), parse_rules([])) == '{"a": "b"}'
