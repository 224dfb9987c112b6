"""Where a suite's time goes per test when each test builds a new SDK client: a first look (issue 16, goal 5).

    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/client_costs.py

For TESTS tests, each: build an `openai.OpenAI` client, make one chat call, close it. Routes:
- direct: plain HTTP to the fake upstream, no proxy (the floor any replay route pays);
- forward, new client per test: HTTPS to api.openai.com through the proxy (a TLS handshake with the
  proxy per client; the client loads the combined CA bundle, as under `cassette run` in record mode: replay
  hands the proxy's CA alone by default, which a client parses faster, docs/running.md);
- forward, one client reused: the same calls on one client (what pooling would give);
- reverse: plain HTTP to the proxy's reverse listener (`base_url`), a new client per test;
- the floor, forward, new client per test and one client reused: the same HTTPS calls through a bare mitmdump
  answering a constant (`floor_addon.py`, the same CA), so what a new client costs through the proxy can be
  told apart from what it costs through mitmproxy itself.
And, client-side only: building a client with the default CA store against the combined bundle.
Not a claim about VCR.py (not installed here); the route costs are what a comparison would start from.
"""

from __future__ import annotations

import json
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "support")]

import httpx  # noqa: E402
import openai  # noqa: E402
import run  # noqa: E402
from harness import FAKE_OPENAI_KEY, FakeUpstream, Proxy  # noqa: E402

TESTS = 100
ROUNDS = 5


def call(client: openai.OpenAI, i: int) -> None:
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"test {i}"}])


def suite(make_client, reuse: bool = False) -> float:
    began = time.perf_counter()
    shared = make_client() if reuse else None
    for i in range(TESTS):
        client = shared or make_client()
        call(client, i)
        if not reuse:
            client.close()
    if shared:
        shared.close()
    return time.perf_counter() - began


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="client-costs-"))
    upstream = FakeUpstream(folder / "upstream").start()
    cassettes = folder / "cassettes"
    results: dict = {"tests": TESTS}
    floor: run.Mitmdump | None = None
    try:
        recorder = Proxy(folder / "rec", cassettes, upstream, modes=["regular", f"reverse:{upstream.url}"],
                         cassette_mode="record", cassette_hosts=["api.openai.com", "127.0.0.1"]).start()  # fmt: skip
        bundle = recorder.ca_bundle

        def forward(proxy: Proxy, url: str | None = None) -> openai.OpenAI:
            verify = ssl.create_default_context(cafile=str(proxy.ca_bundle))
            http = httpx.Client(proxy=url or proxy.url, verify=verify)
            return openai.OpenAI(api_key=FAKE_OPENAI_KEY, http_client=http, max_retries=0)

        def reverse(proxy: Proxy) -> openai.OpenAI:
            port = next(p for mode, p in proxy.listen.items() if mode.startswith("reverse"))
            return openai.OpenAI(api_key=FAKE_OPENAI_KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)

        suite(lambda: forward(recorder))
        suite(lambda: reverse(recorder))
        recorder.stop()
        replayer = Proxy(folder / "rep", cassettes, upstream, modes=["regular", f"reverse:{upstream.url}"],
                         cassette_hosts=["api.openai.com", "127.0.0.1"]).start()  # fmt: skip
        bare = run.floor(folder)  # a bare mitmdump answering a constant, lazy as ours is, with the replayer's CA
        shutil.copytree(replayer.confdir, bare.folder / "confdir")
        floor = bare.start()
        floor_url = f"http://{run.HOST}:{floor.port}"
        routes = {
            "direct, new client per test": lambda: suite(
                lambda: openai.OpenAI(api_key=FAKE_OPENAI_KEY, base_url=f"{upstream.url}/v1", max_retries=0)
            ),
            "forward HTTPS via proxy, new client per test": lambda: suite(lambda: forward(replayer)),
            "forward HTTPS via proxy, one client": lambda: suite(lambda: forward(replayer), reuse=True),
            "reverse HTTP via proxy, new client per test": lambda: suite(lambda: reverse(replayer)),
            "forward HTTPS via bare mitmproxy (floor), new client per test": lambda: suite(
                lambda: forward(replayer, floor_url)
            ),
            "forward HTTPS via bare mitmproxy (floor), one client": lambda: suite(
                lambda: forward(replayer, floor_url), reuse=True
            ),
        }
        timings: dict[str, list[float]] = {name: [] for name in routes}
        for _ in range(ROUNDS):  # interleaved rounds
            for name, measure in routes.items():
                timings[name].append(measure())
        results["suite_s"] = {name: round(statistics.median(t), 3) for name, t in timings.items()}

        def per_new_client(new: str, one: str) -> float:
            """Milliseconds a new client adds over reusing one, per round: its construction (an SSL context and
            the CA bundle), a new connection, CONNECT and the TLS handshake."""
            return statistics.median((a - b) / TESTS * 1000 for a, b in zip(timings[new], timings[one], strict=True))

        results["new_client_over_one_ms"] = {
            "ours": round(per_new_client("forward HTTPS via proxy, new client per test",
                                         "forward HTTPS via proxy, one client"), 2),
            "bare mitmproxy (floor)": round(per_new_client(
                "forward HTTPS via bare mitmproxy (floor), new client per test",
                "forward HTTPS via bare mitmproxy (floor), one client"), 2),
        }  # fmt: skip
        replayer.stop()

        def build(cafile: str | None) -> float:
            began = time.perf_counter()
            for _ in range(20):
                verify = ssl.create_default_context(cafile=cafile) if cafile else True
                httpx.Client(verify=verify).close()
            return (time.perf_counter() - began) / 20 * 1000

        results["client_build_ms"] = {"default CA store": round(build(None), 2),
                                      "combined CA bundle": round(build(str(bundle)), 2)}  # fmt: skip
    finally:
        if floor is not None:
            floor.stop()
        upstream.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
