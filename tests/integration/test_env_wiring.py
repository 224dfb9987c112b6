"""The environment `cassette run` hands to a command, exercised by real clients of every runtime.

The machine's own CA and NO_PROXY exports are present on purpose (many CI
images set them): a corporate CA bundle in SSL_CERT_FILE & co. and NO_PROXY
naming the API hosts. They must break neither the proxied calls nor the
unproxied HTTPS calls that needed that CA.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, ROOT, FakeUpstream, make_certificate

NODE_SUITE = ROOT / "tests" / "node"
CHAT_URL = "https://api.openai.com/v1/chat/completions"


def chat_body(prompt: str) -> str:
    return json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]})


PYTHON_OPENAI = """
import sys
from openai import OpenAI
client = OpenAI(api_key=sys.argv[2], max_retries=0)
reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": sys.argv[1]}])
print(reply.choices[0].message.content)
"""
PYTHON_POST = """
import json, sys, {module}
headers = {{"authorization": "Bearer " + sys.argv[2]}}
reply = {module}.post("{url}", json=json.loads(sys.argv[1]), headers=headers, timeout=30)
print(reply.json()["choices"][0]["message"]["content"])
"""
NODE_FETCH = f"""
const [body, key] = process.argv.slice(1)
fetch('{CHAT_URL}', {{ method: 'POST', body, headers: {{ 'content-type': 'application/json', authorization: 'Bearer ' + key }} }})
  .then((r) => r.json()).then((j) => console.log(j.choices[0].message.content))
"""
NODE_OPENAI = """
import OpenAI from 'openai'
const client = new OpenAI({ apiKey: process.argv[2], maxRetries: 0 })
const reply = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: process.argv[1] }] })
console.log(reply.choices[0].message.content)
"""
NODE_ANTHROPIC = """
import Anthropic from '@anthropic-ai/sdk'
const client = new Anthropic({ apiKey: process.argv[2], maxRetries: 0 })
const reply = await client.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 50, messages: [{ role: 'user', content: process.argv[1] }] })
console.log(reply.content[0].text)
"""


def client_command(name: str) -> tuple[list[str], Path | None]:
    """The command line of one client sending `name` as its prompt, and the folder it must run in."""
    body = chat_body(name)
    commands = {
        "openai-python": ([sys.executable, "-c", PYTHON_OPENAI, name, FAKE_OPENAI_KEY], None),
        "requests": ([sys.executable, "-c", PYTHON_POST.format(module="requests", url=CHAT_URL), body, FAKE_OPENAI_KEY], None),
        "httpx": ([sys.executable, "-c", PYTHON_POST.format(module="httpx", url=CHAT_URL), body, FAKE_OPENAI_KEY], None),
        "curl": (["curl", "-sS", "--fail", CHAT_URL, "-H", "content-type: application/json",
                  "-H", f"authorization: Bearer {FAKE_OPENAI_KEY}", "-d", body], None),
        "node20-fetch-preload": (["node", "-e", NODE_FETCH, body, FAKE_OPENAI_KEY], NODE_SUITE),
        "node-openai-sdk": (["node", "--input-type=module", "-e", NODE_OPENAI, name, FAKE_OPENAI_KEY], NODE_SUITE),
        "node-anthropic-sdk": (["node", "--input-type=module", "-e", NODE_ANTHROPIC, name, FAKE_ANTHROPIC_KEY], NODE_SUITE),
    }  # fmt: skip
    return commands[name]


CLIENTS = [
    "openai-python",
    "requests",
    "httpx",
    "curl",
    "node20-fetch-preload",
    "node-openai-sdk",
    "node-anthropic-sdk",
]


@pytest.fixture(scope="module")
def corporate_ca(tmp_path_factory) -> tuple[Path, Path]:
    """A certificate the machine trusts through its own exports only, like a corporate CA."""
    return make_certificate(tmp_path_factory.mktemp("corporate"))


@pytest.fixture(scope="module")
def machine_exports(corporate_ca) -> dict[str, str]:
    names = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
    return {**dict.fromkeys(names, str(corporate_ca[0])), "NO_PROXY": "api.openai.com,.anthropic.com", "no_proxy": "*"}


@pytest.fixture(scope="module")
def cassettes(tmp_path_factory, corporate_ca, machine_exports) -> Path:
    """Every client's cassette, recorded through that client against the fake upstream (HTTPS)."""
    folder = tmp_path_factory.mktemp("wiring")
    upstream = FakeUpstream(folder / "upstream", corporate_ca).start()
    try:
        env = {**machine_exports, "CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)}
        for name in CLIENTS:
            command, cwd = client_command(name)
            recorded = cassette("run", "--mode", "record", "--strict", "--dir", str(folder / "cassettes"), "--",
                                *command, cwd=cwd or folder, env=env)  # fmt: skip
            assert recorded.returncode == 0, recorded.stdout + recorded.stderr
            assert "1 recorded" in recorded.stderr, recorded.stderr
    finally:
        upstream.stop()
    return folder / "cassettes"


@pytest.mark.parametrize("name", CLIENTS)
def test_client_hits_its_cassette_through_the_wired_environment(tmp_path, name, cassettes, machine_exports):
    command, cwd = client_command(name)
    result = cassette(
        "run", "--strict", "--dir", str(cassettes), "--", *command, cwd=cwd or tmp_path, env=machine_exports
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"echo: {name}" in result.stdout
    assert "cassette: replay: 1 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough" in result.stderr


@pytest.mark.parametrize("client", ["httpx", "requests", "curl"])
def test_exported_ca_still_trusted_for_unproxied_https(tmp_path, corporate_ca, machine_exports, client):
    """Loopback bypasses the proxy; the corporate CA it needs comes from the machine's exports, merged into the bundle."""
    server = FakeUpstream(tmp_path / "server", corporate_ca).start()
    try:
        url = f"https://localhost:{server.url.rsplit(':', 1)[1]}/anything"
        command = {
            "httpx": [sys.executable, "-c", f"import httpx; print(httpx.get('{url}').json()['path'])"],
            "requests": [sys.executable, "-c", f"import requests; print(requests.get('{url}').json()['path'])"],
            "curl": ["curl", "-sS", "--fail", url],
        }[client]
        result = cassette("run", "--", *command, cwd=tmp_path, env=machine_exports)
        served = server.count
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert "/anything" in result.stdout
    assert served == 1


def test_node_without_undici_is_told_once_what_to_do(tmp_path):
    """Node 20's fetch ignores HTTPS_PROXY; where undici cannot be resolved the preload says so, once per run."""
    version = tuple(
        int(part) for part in subprocess.check_output(["node", "-p", "process.versions.node"], text=True).split(".")
    )
    fetch = f"fetch('{CHAT_URL}').then(() => console.log('reached'), () => console.log('failed'))"
    result = cassette("run", "--", "sh", "-c", f'node -e "{fetch}"; node -e "{fetch}"', cwd=tmp_path)
    notice = "fetch ignores HTTPS_PROXY and no undici (>= 6.16) is resolvable"
    if version >= (24,) or (version[0] == 22 and version >= (22, 21)):
        assert notice not in result.stderr
    else:
        assert result.stderr.count(notice) == 1, result.stderr
        assert "npm install --save-dev undici@6" in result.stderr
