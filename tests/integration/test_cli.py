"""`cassette run`, `serve` and `env` as a user meets them: the installed command, a real mitmdump, real clients."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cassette_command import CASSETTE, cassette, chat_command, redirect_args
from cassette_proxy.launch import client_env
from harness import FAKE_OPENAI_KEY, SYSTEM_CA_BUNDLE


def cassette_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json")) if folder.exists() else []


def test_record_mode_flag_records_and_default_replays(tmp_path, https_upstream):
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    recorded = cassette("run", "--mode", "record", "--", *chat_command("hello"), cwd=tmp_path, env=env)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.strip() == "200 echo: hello"
    assert "cassette: record: 0 hits, 0 misses, 1 recorded, 1 upstream" in recorded.stderr
    assert len(cassette_files(tmp_path / "cassettes")) == 1

    replayed = cassette("run", "--", *chat_command("hello"), cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.strip() == "200 echo: hello"
    assert "cassette: replay: 1 hits, 0 misses, 0 recorded, 0 upstream" in replayed.stderr
    assert https_upstream.count == 1


def test_cassette_mode_variable_records(tmp_path, https_upstream):
    env = {"CASSETTE_MODE": "record", "CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    result = cassette("run", "--", *chat_command("from the environment"), cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "cassette: record: 0 hits, 0 misses, 1 recorded" in result.stderr
    assert https_upstream.count == 1
    assert len(cassette_files(tmp_path / "cassettes")) == 1


def test_mode_flag_beats_cassette_mode_variable(tmp_path, https_upstream):
    env = {"CASSETTE_MODE": "record", "CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    result = cassette("run", "--mode", "replay", "--", *chat_command("not recorded"), cwd=tmp_path, env=env)
    assert result.stdout.strip() == "409"
    assert "cassette: replay: 0 hits, 1 misses" in result.stderr
    assert https_upstream.count == 0
    assert cassette_files(tmp_path / "cassettes") == []


def test_a_mode_overridden_behind_the_launcher_is_refused(tmp_path, https_upstream):
    """Another addon (or a config file) must not silently change the mode asked for: the proxy, started beside the
    command, never answers it in the other mode, and the run fails naming both."""
    other = tmp_path / "force_record.py"
    other.write_text(
        "from mitmproxy import ctx\n"
        "class ForceRecord:\n"
        "    def configure(self, updated):\n"
        "        if ctx.options.cassette_mode != 'record':\n"
        "            ctx.options.update(cassette_mode='record')\n"
        "addons = [ForceRecord()]\n"
    )
    args = ["--mode", "replay", "--mitmdump-arg=-s", f"--mitmdump-arg={other}"]
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    result = cassette("run", *args, "--", *chat_command("never recorded"), cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "mitmdump runs in mode 'record', not the 'replay' asked for" in result.stderr
    assert "200" not in result.stdout
    assert https_upstream.count == 0
    assert cassette_files(tmp_path / "cassettes") == []


def test_misspelled_mode_is_refused_before_anything_runs(tmp_path):
    result = cassette("run", "--", sys.executable, "-c", "print('ran')", cwd=tmp_path, env={"CASSETTE_MODE": "recrod"})
    assert result.returncode == 2
    assert "'recrod' is not a mode; use one of replay, record, update, off" in result.stderr
    assert "ran" not in result.stdout


def test_strict_fails_a_swallowed_miss(tmp_path):
    result = cassette("run", "--strict", "--", *chat_command("never recorded"), cwd=tmp_path)
    assert result.stdout.strip() == "409"  # the command swallowed the miss and exited 0
    assert result.returncode == 1
    assert "cassette: miss POST https://api.openai.com/v1/chat/completions" in result.stderr
    assert "--strict: failing the run for 1 misses" in result.stderr


def test_without_strict_a_swallowed_miss_keeps_the_command_status(tmp_path):
    result = cassette("run", "--", *chat_command("never recorded"), cwd=tmp_path)
    assert result.stdout.strip() == "409"
    assert result.returncode == 0
    assert "1 misses" in result.stderr


@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_the_command_exit_status_is_returned(tmp_path, strict):
    result = cassette("run", *strict, "--", sys.executable, "-c", "raise SystemExit(7)", cwd=tmp_path)
    assert result.returncode == 7


def test_two_runs_at_once_do_not_collide(tmp_path, https_upstream):
    """Each run waits inside its command until the other has started: both proxies are up at the same time."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    script = (
        "import os, pathlib, sys, time\n"
        "barrier = pathlib.Path(sys.argv[1])\n"
        "(barrier / sys.argv[2]).write_text(os.environ['HTTPS_PROXY'] + ' ' + os.environ['OPENAI_BASE_URL'])\n"
        "deadline = time.monotonic() + 120\n"
        "while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "os.execv(sys.executable, [sys.executable, '-c', sys.argv[3], sys.argv[2], sys.argv[4]])\n"
    )
    env = {**os.environ, "CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    env.pop("CASSETTE_MODE", None)
    runs = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        _, _, client, _, key = chat_command(name)
        args = [CASSETTE, "run", "--mode", "record", "--reverse", "openai=https://api.openai.com", "--"]
        args += [sys.executable, "-c", script, str(barrier), name, client, key]
        runs.append(
            subprocess.Popen(args, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outputs = [run.communicate(timeout=240) for run in runs]
    for run, (_, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
    assert [out.strip() for out, _ in outputs] == ["200 echo: first", "200 echo: second"]
    addresses = [(barrier / name).read_text().split() for name in ("first", "second")]
    ports = {url.rsplit(":", 1)[1] for pair in addresses for url in pair}
    assert len(ports) == 4, addresses
    assert https_upstream.count == 2


def test_private_confdir_is_owner_only_and_removed_after_the_run(tmp_path):
    script = (
        "import os, stat, sys\n"
        "folder = os.path.dirname(os.environ['SSL_CERT_FILE'])\n"
        "print(folder, oct(stat.S_IMODE(os.stat(folder).st_mode)), oct(stat.S_IMODE(os.stat(os.path.join(folder, 'confdir')).st_mode)))\n"
    )
    result = cassette("run", "--", sys.executable, "-c", script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    folder, folder_mode, confdir_mode = result.stdout.split()
    assert (folder_mode, confdir_mode) == ("0o700", "0o700")
    assert not Path(folder).exists()


def test_missing_mitmdump_names_every_place_it_looked(tmp_path):
    env = {"PATH": str(tmp_path), "CASSETTE_MITMDUMP": ""}
    result = cassette("run", "--", "true", cwd=tmp_path, env=env)
    assert result.returncode == 2
    for place in ("--mitmdump PATH", "$CASSETTE_MITMDUMP", str(Path(sys.executable).parent), "on PATH"):
        assert place in result.stderr


def test_ca_bundle_holds_system_exported_and_proxy_cas_once(tmp_path, upstream_certificate):
    proxy_ca = tmp_path / "proxy-ca.pem"
    proxy_ca.write_text("-----BEGIN CERTIFICATE-----\nPROXY\n-----END CERTIFICATE-----\n")
    corporate = upstream_certificate[0]
    environ = {
        "SSL_CERT_FILE": str(corporate),
        "NODE_EXTRA_CA_CERTS": str(corporate),
        "REQUESTS_CA_BUNDLE": "/nonexistent",
    }
    bundle = client_env.write_ca_bundle(tmp_path / "bundle.pem", proxy_ca, environ).read_text()
    corporate_pem = corporate.read_text().strip()
    assert bundle.count(corporate_pem) == 1
    assert bundle.rstrip().endswith("PROXY\n-----END CERTIFICATE-----")
    system_first = SYSTEM_CA_BUNDLE.read_text().split("-----END CERTIFICATE-----")[0]
    assert system_first.split("-----BEGIN CERTIFICATE-----")[1] in bundle


@pytest.mark.parametrize(
    ("existing", "hosts", "expected"),
    [
        ("", ["api.openai.com"], "localhost,127.0.0.1,::1"),
        ("api.openai.com,internal.corp", ["api.openai.com"], "internal.corp,localhost,127.0.0.1,::1"),
        (".openai.com, *.anthropic.com", ["api.openai.com", "api.anthropic.com"], "localhost,127.0.0.1,::1"),
        ("api.openai.com:443,openai.com.evil", ["api.openai.com"], "openai.com.evil,localhost,127.0.0.1,::1"),
        ("*", ["api.openai.com"], "localhost,127.0.0.1,::1"),
        (".azure.com,localhost", ["*.openai.azure.com"], "localhost,127.0.0.1,::1"),
        ("internal.corp,localhost", ["*"], "localhost,127.0.0.1,::1"),
        ("localhost", ["localhost"], "127.0.0.1,::1"),
    ],
)
def test_no_proxy_loses_the_entries_covering_controlled_hosts(existing, hosts, expected):
    assert client_env.no_proxy_value(existing, hosts) == expected


def test_serve_prints_the_environment_that_env_repeats(tmp_path, https_upstream):
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    env.pop("CASSETTE_MODE", None)
    serve = subprocess.Popen(
        [CASSETTE, "serve", "--mode", "record"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        exports = ""
        for line in serve.stdout:
            if line.startswith("# serving at http://127.0.0.1:"):
                break
            exports += line
        assert "export HTTPS_PROXY=http://127.0.0.1:" in exports, serve.stderr.read()
        repeated = subprocess.run([CASSETTE, "env"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert repeated.stdout == exports
        client = " ".join(f"'{word}'" for word in chat_command("served"))
        used = subprocess.run(
            ["bash", "-c", f'eval "$({CASSETTE} env)" && {client}'],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert used.stdout.strip() == "200 echo: served", used.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=60)
    assert serve.returncode == 0, err
    assert "cassette: record: 0 hits, 0 misses, 1 recorded, 1 upstream" in err
    gone = subprocess.run([CASSETTE, "env"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 2
    assert "no `cassette serve` is running" in gone.stderr


def test_sigterm_reaches_the_command_and_the_proxy_is_stopped(tmp_path):
    """CI cancelling a job sends SIGTERM: the suite gets it, and no mitmdump is left behind."""
    script = (
        "import json, os, pathlib, sys, time\n"
        "ready = pathlib.Path(os.environ['SSL_CERT_FILE']).with_name('ready.json')\n"
        "while not ready.exists():  # the command starts beside the proxy\n"
        "    time.sleep(0.02)\n"
        "print(json.loads(ready.read_text())['pid'], flush=True)\n"
        "time.sleep(120)\n"
    )
    env = {name: value for name, value in os.environ.items() if name != "CASSETTE_MODE"}
    run = subprocess.Popen(
        [CASSETTE, "run", "--", sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    mitmdump_pid = int(run.stdout.readline())
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGTERM
    assert "cassette: replay: 0 hits" in err
    with pytest.raises(ProcessLookupError):
        os.kill(mitmdump_pid, 0)


ONLY_REVERSE_CLIENT = """
import os, sys, openai
print(sorted(n for n in ("HTTPS_PROXY", "HTTP_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE") if os.environ.get(n)))
client = openai.OpenAI(api_key=sys.argv[1], max_retries=0)
print(client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "only reverse"}])
      .choices[0].message.content)
"""


def test_only_reverse_sets_base_urls_without_proxy_or_ca_variables_and_replays(tmp_path, https_upstream):
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        env[name] = ""  # not set by the test machine either: what the run prints is what the launcher set
    args = ["--only-reverse", "--reverse", "openai=https://api.openai.com", "--"]
    client = [sys.executable, "-c", ONLY_REVERSE_CLIENT, FAKE_OPENAI_KEY]
    for mode in ("record", "replay"):
        result = cassette("run", "--mode", mode, *args, *client, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split("\n")[:2] == ["[]", "echo: only reverse"]
    assert https_upstream.count == 1
    assert len(cassette_files(tmp_path / "cassettes")) == 1


def test_only_reverse_without_a_route_is_refused(tmp_path):
    result = cassette("run", "--only-reverse", "--", "true", cwd=tmp_path)
    assert result.returncode == 2
    assert "--only-reverse needs at least one --reverse" in result.stderr


def test_proxy_ca_only_bundle_holds_one_certificate_and_forward_replay_works(tmp_path, https_upstream):
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    count = "import os; print(open(os.environ['SSL_CERT_FILE']).read().count('BEGIN CERTIFICATE'))"
    result = cassette("run", "--proxy-ca-only", "--", sys.executable, "-c", count, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
    for mode in ("record", "replay"):
        result = cassette(
            "run", "--mode", mode, "--proxy-ca-only", "--", *chat_command("one CA"), cwd=tmp_path, env=env
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "200 echo: one CA"
    assert https_upstream.count == 1


def test_replay_gives_the_proxy_ca_alone_by_default_and_the_rest_on_request(tmp_path):
    count = "import os; print(open(os.environ['SSL_CERT_FILE']).read().count('BEGIN CERTIFICATE'))"
    env = {"NO_PROXY": "localhost", "SSL_CERT_FILE": "", "REQUESTS_CA_BUNDLE": "", "SSL_CERT_DIR": ""}
    counts = {}
    for flags in ([], ["--system-cas"], ["--mode", "record"]):
        result = cassette("run", *flags, "--", sys.executable, "-c", count, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        counts[" ".join(flags) or "replay"] = int(result.stdout)
    assert counts["replay"] == 1
    assert counts["--system-cas"] > 1
    assert counts["--mode record"] == counts["--system-cas"]
