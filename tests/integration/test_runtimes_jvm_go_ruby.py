"""Java, Go and Ruby programs with no proxy code record and replay under `cassette run`.

Each calls https://api.openai.com/v1/chat/completions with its standard HTTP
client: Java's `java.net.http.HttpClient` (wired through JAVA_TOOL_OPTIONS and
the PKCS12 trust store), Go's net/http and Ruby's Net::HTTP (proxy variables
and SSL_CERT_FILE). The machine's exports are hostile on purpose: NO_PROXY
names the API host and the CA variables name a corporate CA only. Recorded
against the fake upstream, then replayed twice offline with --strict.
Go never proxies loopback addresses, hence the forward proxy and a real API URL.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from harness import FAKE_OPENAI_KEY, FakeUpstream, make_certificate

CHAT_URL = "https://api.openai.com/v1/chat/completions"

JAVA = f"""
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Chat {{
    public static void main(String[] args) throws Exception {{
        String body = "{{\\"model\\":\\"gpt-4o-mini\\",\\"messages\\":[{{\\"role\\":\\"user\\",\\"content\\":\\"" + args[0] + "\\"}}]}}";
        HttpRequest request = HttpRequest.newBuilder(URI.create("{CHAT_URL}"))
            .header("content-type", "application/json")
            .header("authorization", "Bearer " + args[1])
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
        HttpResponse<String> response = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println(response.statusCode() + " " + response.body());
        System.out.println("user option: " + System.getProperty("cassette.test.user"));
        System.exit(response.statusCode() == 200 ? 0 : 1);
    }}
}}
"""

GO = f"""
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {{
	body := fmt.Sprintf(`{{"model":"gpt-4o-mini","messages":[{{"role":"user","content":%q}}]}}`, os.Args[1])
	request, _ := http.NewRequest("POST", "{CHAT_URL}", bytes.NewBufferString(body))
	request.Header.Set("content-type", "application/json")
	request.Header.Set("authorization", "Bearer "+os.Args[2])
	response, err := http.DefaultClient.Do(request)
	if err != nil {{
		fmt.Println(err)
		os.Exit(1)
	}}
	data, _ := io.ReadAll(response.Body)
	fmt.Println(response.StatusCode, string(data))
	if response.StatusCode != 200 {{
		os.Exit(1)
	}}
}}
"""

RUBY = f"""
require "json"
require "net/http"

uri = URI("{CHAT_URL}")
http = Net::HTTP.new(uri.host, uri.port)
http.use_ssl = true
request = Net::HTTP::Post.new(uri, "content-type" => "application/json", "authorization" => "Bearer #{{ARGV[1]}}")
request.body = JSON.generate(model: "gpt-4o-mini", messages: [{{role: "user", content: ARGV[0]}}])
response = http.request(request)
puts "#{{response.code}} #{{response.body}}"
exit(response.code == "200" ? 0 : 1)
"""

TOOLCHAINS = {"java": "java", "go": "go", "ruby": "ruby"}
"""The command each runtime needs; .ci/run installs Go and Ruby from Debian (golang-go, ruby); the JDK is on the machine."""


def program(runtime: str, folder: Path) -> list[str]:
    """The command running the runtime's program (Go compiled once here, so replays do not pay the build)."""
    tool = shutil.which(TOOLCHAINS[runtime])
    assert tool, f"{TOOLCHAINS[runtime]} is not installed: .ci/run installs it (apt-get install golang-go ruby)"
    if runtime == "java":
        (folder / "Chat.java").write_text(JAVA)
        return [tool, str(folder / "Chat.java")]
    if runtime == "go":
        (folder / "chat.go").write_text(GO)
        built = subprocess.run([tool, "build", "-o", str(folder / "chat"), str(folder / "chat.go")],
                               cwd=folder, capture_output=True, text=True)  # fmt: skip
        assert built.returncode == 0, built.stderr
        return [str(folder / "chat")]
    (folder / "chat.rb").write_text(RUBY)
    return [tool, str(folder / "chat.rb")]


@pytest.fixture(scope="module")
def machine_exports(tmp_path_factory) -> dict[str, str]:
    """A CI image's exports: a corporate CA in every CA variable, API hosts in NO_PROXY, the user's own JVM option."""
    corporate, _ = make_certificate(tmp_path_factory.mktemp("corporate"))
    names = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE")
    return {
        **dict.fromkeys(names, str(corporate)),
        "NO_PROXY": "api.openai.com,.anthropic.com",
        "no_proxy": "*",
        "JAVA_TOOL_OPTIONS": "-Dcassette.test.user=kept",
    }


@pytest.fixture(scope="module", params=list(TOOLCHAINS))
def recorded(request, tmp_path_factory, machine_exports) -> tuple[str, list[str], Path]:
    runtime = request.param
    folder = tmp_path_factory.mktemp(runtime)
    command = [*program(runtime, folder), f"hello from {runtime}", FAKE_OPENAI_KEY]
    upstream = FakeUpstream(folder / "upstream", make_certificate(folder)).start()
    try:
        env = {**machine_exports, "CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)}
        result = cassette("run", "--mode", "record", "--strict", "--dir", str(folder / "cassettes"), "--", *command,
                          cwd=folder, env=env)  # fmt: skip
        served = upstream.count
    finally:
        upstream.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"echo: hello from {runtime}" in result.stdout
    assert "1 recorded" in result.stderr, result.stderr
    assert served == 1
    return runtime, command, folder / "cassettes"


@pytest.mark.parametrize("run", [1, 2])
def test_program_replays_offline_with_strict(tmp_path, recorded, machine_exports, run):
    runtime, command, cassettes = recorded
    result = cassette("run", "--strict", "--dir", str(cassettes), "--", *command, cwd=tmp_path, env=machine_exports)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("200 ") and f"echo: hello from {runtime}" in result.stdout
    assert "cassette: replay: 1 hits, 0 misses, 0 recorded, 0 upstream" in result.stderr
    if runtime == "java":
        assert "user option: kept" in result.stdout  # the user's JAVA_TOOL_OPTIONS still apply


def test_cassette_holds_no_key(recorded):
    _, _, cassettes = recorded
    (path,) = cassettes.rglob("*.json")
    assert FAKE_OPENAI_KEY not in path.read_text()
