"""The run summary's miss line (core/report.py): the first difference the 409 named, for clients that hide the 409
(llm-gemini turns it into an IndexError) and leave the summary as the one place the cause is read."""

from __future__ import annotations

import pytest
from cassette_proxy.core.report import Miss, Report

URL = "https://api.openai.com/v1/chat/completions"


def miss(closest: list[dict]) -> Miss:
    return Miss(key="k", method="POST", url=URL, cassette="api.openai.com/v1/chat/completions/k.json",
                closest=closest, test="t.py::test_a")  # fmt: skip


@pytest.mark.parametrize(
    ("closest", "said"),
    [
        (
            [{"cassette": "a.json", "differences": ['body messages.0.content: "hi" → "hello"', "header x: 1 → 2"]}],
            '; closest recording differs in: body messages.0.content: "hi" → "hello" (and more)) in test t.py::test_a',
        ),
        (
            [{"cassette": "a.json", "differences": [], "settings": ["recorded with cassette_ignore ['user']"]}],
            "; closest recording: recorded with cassette_ignore ['user']) in test t.py::test_a",
        ),
        ([], "(would be api.openai.com/v1/chat/completions/k.json) in test t.py::test_a"),
    ],
    ids=["a difference", "only settings", "nothing recorded there"],
)
def test_the_miss_line_carries_the_first_difference(closest, said):
    [line] = [line for line in Report(misses=[miss(closest)]).summary().splitlines() if "cassette: miss" in line]
    assert line.startswith(f"cassette: miss POST {URL} (would be api.openai.com/v1/chat/completions/k.json")
    assert line.endswith(said)
