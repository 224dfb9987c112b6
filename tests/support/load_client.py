"""One client process of the load test: every job on its own thread, all at once.

    python tests/support/load_client.py --ca BUNDLE < jobs.json > results.json

A job is {"proxy": url, "text": prompt}; a result adds the status, the echoed
answer (or the error type), the seconds the request took and the failed connects
it retried.

A connect that fails (no TCP connection, no CONNECT answer, no TLS handshake)
is retried once, as the SDKs do (openai and anthropic retry connection errors
twice): httpx raises ConnectError only before any request byte is sent, so a
retry cannot make the proxy count a request twice. The failure is reported, not
hidden: the test bounds and prints it.
"""

import argparse
import json
import ssl
import sys
import threading
import time

import httpx

CHAT_URL = "https://api.openai.com/v1/chat/completions"


def run(job: dict, trust: ssl.SSLContext, start: threading.Barrier, results: list, index: int) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": job["text"]}]}
    with httpx.Client(proxy=job["proxy"], verify=trust, timeout=120) as client:
        start.wait()
        began = time.monotonic()
        connect_errors: list[str] = []

        def done(status: int | None, answer: str) -> None:
            seconds = time.monotonic() - began
            results[index] = {**job, "status": status, "answer": answer, "seconds": seconds,
                              "connect_errors": connect_errors}  # fmt: skip

        while True:
            try:
                response = client.post(CHAT_URL, json=body, headers={"authorization": "Bearer sk-fake-load"})
                break
            except httpx.ConnectError as e:
                connect_errors.append(f"{time.monotonic() - began:.2f} s: {e!r}")
                if len(connect_errors) > 1:
                    return done(None, repr(e))
            except httpx.HTTPError as e:
                return done(None, repr(e))
        data = response.json()
        done(
            response.status_code,
            data["choices"][0]["message"]["content"] if response.status_code == 200 else data["error"]["type"],
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ca", required=True)
    args = parser.parse_args()
    jobs = json.load(sys.stdin)
    trust = ssl.create_default_context(cafile=args.ca)
    start = threading.Barrier(len(jobs))
    results: list = [None] * len(jobs)
    threads = [threading.Thread(target=run, args=(job, trust, start, results, i)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
