"""cassette_repeats through real mitmdump and the real openai SDK: `sequence` gives an agent loop the n-th answer
to the n-th identical question; `reuse` (the default) gives every identical question the same answer."""

from __future__ import annotations

import openai
from cassette_proxy.core.files.location import cassette_files
from harness import FAKE_OPENAI_KEY


def ask() -> str:
    """The same request every time; the fake upstream numbers its answers (x-fake-numbered is not in the key)."""
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, default_headers={"x-fake-numbered": "1"})
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "next?"}])
    return completion.choices[0].message.content


def test_sequence_records_three_answers_and_replays_them_in_order(upstream, start_proxy, client_env, cassette_dir):
    client_env(start_proxy(upstream, cassette_mode="record", cassette_repeats="sequence"))
    recorded = [ask() for _ in range(3)]
    assert recorded == ["#1 echo: next?", "#2 echo: next?", "#3 echo: next?"]
    names = sorted(path.name for path in cassette_files(cassette_dir))
    key = names[0].split(".")[0]
    assert names == [f"{key}.2.json", f"{key}.3.json", f"{key}.json"]

    player = start_proxy(upstream, cassette_mode="replay", cassette_repeats="sequence")
    client_env(player)
    served = upstream.count
    assert [ask() for _ in range(4)] == [*recorded, recorded[-1]]  # past the last recording: repeats it
    report = player.stop()
    assert (report["hits"], report["misses"], upstream.count) == (4, [], served)
    assert len(report["cassettes_used"]) == 3


def test_reuse_answers_identical_requests_with_the_one_recording(https_upstream, start_proxy, client_env, cassette_dir):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    assert [ask() for _ in range(3)] == ["#1 echo: next?"] * 3
    assert len(cassette_files(cassette_dir)) == 1


def test_record_mode_extends_a_shorter_sequence(https_upstream, start_proxy, client_env, cassette_dir):
    client_env(start_proxy(https_upstream, cassette_mode="record", cassette_repeats="sequence"))
    first = ask()
    client_env(start_proxy(https_upstream, cassette_mode="record", cassette_repeats="sequence"))
    assert [ask(), ask()] == [first, "#2 echo: next?"]  # the first is replayed, the second recorded
    assert len(cassette_files(cassette_dir)) == 2
