"""Drive the installed `cassette` command as a user's shell or CI would, against the fake upstream."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from harness import FAKE_OPENAI_KEY, REDIRECT, FakeUpstream

CASSETTE = str(Path(sys.executable).with_name("cassette"))

OPENAI_CHAT = """
import sys, httpx
reply = httpx.post(
    "https://api.openai.com/v1/chat/completions",
    headers={"authorization": "Bearer " + sys.argv[2]},
    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]},
    timeout=30,
)
print(reply.status_code, reply.json()["choices"][0]["message"]["content"] if reply.status_code == 200 else "")
"""
"""A client that swallows errors, as agent frameworks do: it exits 0 whatever the status."""


def chat_command(prompt: str) -> list[str]:
    return [sys.executable, "-c", OPENAI_CHAT, prompt, FAKE_OPENAI_KEY]


def redirect_args(upstream: FakeUpstream) -> str:
    """CASSETTE_MITMDUMP_ARGS that send forwarded traffic to the fake upstream (tests only: no real DNS)."""
    args = ["-s", str(REDIRECT), "--set", f"fake_upstream={upstream.url}"]
    if upstream.certificate:
        args += ["--set", f"ssl_verify_upstream_trusted_ca={upstream.certificate[0]}"]
    return shlex.join(args)


def cassette(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 180, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """`cassette ARGS...` with the test process's environment (less CASSETTE_MODE and `unset`) plus `env`; text
    output."""
    base = {name: value for name, value in os.environ.items() if name != "CASSETTE_MODE" and name not in unset}
    return subprocess.run(
        [CASSETTE, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
