"""`cassette view` in a real browser: headless Chromium (Debian's, driven through its chromedriver by Selenium).

The cassettes and the run report come from a real mitmdump in front of the fake
upstream: a chat whose prompt holds markup, an Anthropic stream recorded live,
and a replay run whose changed prompt misses. Both the served page and the
exported file must show the conversations, the assembled stream, the miss's
diff, and the markup as text that never runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import httpx
import pytest
from cassette_command import CASSETTE
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Report
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, FakeUpstream, Proxy, make_certificate
from samples import chat, write
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
]
CHAT = "https://api.openai.com/v1/chat/completions"
HOSTILE = 'Summarise <script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> please'
STREAMED_PROMPT = "stream me a short answer please"


def ask(client: httpx.Client, prompt: str) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "temperature": 0.2, "messages": [{"role": "user", "content": prompt}]}
    return client.post(CHAT, json=body, headers={"authorization": f"Bearer {FAKE_OPENAI_KEY}"})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Path]:
    """A cassette folder recorded through mitmdump, and the report of a replay run with one hit and one miss."""
    folder = tmp_path_factory.mktemp("recorded")
    cassettes = folder / "cassettes"
    (folder / "certs").mkdir()
    upstream = FakeUpstream(folder / "upstream", make_certificate(folder / "certs")).start()
    try:
        proxy = Proxy(folder / "record", cassettes, upstream, cassette_mode="record").start()
        verify = ssl.create_default_context(cafile=proxy.ca_bundle)
        with httpx.Client(proxy=proxy.url, verify=verify, trust_env=False, timeout=30) as client:
            assert ask(client, HOSTILE).status_code == 200
            assert ask(client, "What is the capital of France?").status_code == 200
        with pytest.MonkeyPatch.context() as env:  # the SDK's own HTTP client finds the proxy as a user's would
            for name, value in proxy.client_env().items():
                env.setenv(name, value)
            sdk = anthropic.Anthropic(
                api_key=FAKE_ANTHROPIC_KEY,
                base_url="https://api.anthropic.com",
                max_retries=0,
                default_headers={"x-fake-event-gap": "0.03"},
            )
            with sdk.messages.stream(
                model="claude-test-model",
                max_tokens=64,
                system="Answer briefly.",
                messages=[{"role": "user", "content": STREAMED_PROMPT}],
            ) as stream:
                assert "".join(stream.text_stream) == f"echo: {STREAMED_PROMPT}"
        assert proxy.stop()["counts"]["recorded"] == 3
        upstream.stop()

        replay = Proxy(folder / "replay", cassettes, upstream, cassette_mode="replay").start()
        verify = ssl.create_default_context(cafile=replay.ca_bundle)
        with httpx.Client(proxy=replay.url, verify=verify, trust_env=False, timeout=30) as client:
            assert ask(client, HOSTILE).status_code == 200
            assert ask(client, "What is the capital of Spain?").status_code == 409
        report = replay.stop()
        assert (report["counts"]["hits"], report["counts"]["misses"]) == (1, 1)
    finally:
        upstream.stop()
    return {"cassettes": cassettes, "report": replay.report_path}


@contextmanager
def chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not fetch a driver: Debian's is given
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: webdriver.Chrome, css: str, text: str = "", timeout: float = 20, then: Callable | None = None):
    """The first element matching `css` whose text contains `text`, once it appears, or what `then` makes of it.

    The served page re-renders its list and report when a poll finds the folder
    changed, so an element can go stale between being found and being read or
    clicked: the wait then looks again, and `then` runs inside it for that reason.
    """

    def found(d):
        element = next(
            (e for e in d.find_elements(By.CSS_SELECTOR, css) if text in e.get_attribute("textContent")), None
        )
        return None if element is None else (then(element) if then else element,)

    stale = (StaleElementReferenceException,)
    return WebDriverWait(driver, timeout, ignored_exceptions=stale).until(found, f"no {css} containing {text!r}")[0]


def click(element) -> None:
    element.click()


def text_of(element) -> str:
    return element.text


def check_report(driver: webdriver.Chrome) -> None:
    """The miss shows the closest recording's changed field side by side; counts name the hit and the miss."""
    counts = wait_for(driver, "#report .counts", then=text_of)
    assert "hits: 1" in counts and "misses: 1" in counts

    def diff_rows(miss) -> list[list[str]]:
        return [
            [cell.get_attribute("textContent") for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in miss.find_elements(By.CSS_SELECTOR, ".diff-row")
        ]

    rows = wait_for(driver, ".miss", "POST https://api.openai.com/v1/chat/completions", then=diff_rows)
    assert ["messages[0].content", "What is the capital of France?", "What is the capital of Spain?"] in rows


def check_markup_is_text(driver: webdriver.Chrome) -> None:
    prompt = wait_for(driver, ".cassette-row .prompt", "Summarise", then=lambda e: e.get_attribute("textContent"))
    assert prompt == HOSTILE
    assert driver.find_elements(By.CSS_SELECTOR, "#list script, #list img, #conversations img") == []
    assert driver.execute_script("return window.pwned") is None


def check_stream(card) -> None:
    """The streamed answer reads as the client saw it, with the model, stop reason, usage and event timeline."""
    assert card.find_element(By.CSS_SELECTOR, ".answer-text").get_attribute("textContent") == f"echo: {STREAMED_PROMPT}"
    answer = card.find_element(By.CSS_SELECTOR, ".turn.answer").get_attribute("textContent")
    assert "claude-test-model" in answer and "finish end_turn" in answer and "output_tokens 7" in answer
    roles = [e.get_attribute("textContent") for e in card.find_elements(By.CSS_SELECTOR, ".turn .role")]
    assert roles == ["system", "user", "answer"]
    timeline = card.find_element(By.CSS_SELECTOR, ".timeline").get_attribute("textContent")
    assert "message_start" in timeline and "content_block_delta" in timeline and "first after" in timeline


def test_exported_file_shows_conversations_stream_miss_diff_and_markup_as_text(recorded, tmp_path):
    out = tmp_path / "cassettes.html"
    other = Report(mode="record", recorded=1)  # a second run whose stream was cut off: the reports are summed
    other.error(
        ErrorEntry(
            ErrorKind.STREAM_INCOMPLETE, "cut off <b>mid-stream</b>", cassette="api.anthropic.com/v1/messages/x.json"
        )
    )
    other.write(tmp_path / "other-report.json")
    reports = ["--report", str(recorded["report"]), "--report", str(tmp_path / "other-report.json")]
    done = subprocess.run(
        [CASSETTE, "view", str(recorded["cassettes"]), *reports, "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wrote {out} (3 of 3 cassettes)" in done.stdout
    with chromium(tmp_path / "profile") as driver:
        driver.get(out.as_uri())
        check_report(driver)
        assert "errors: 1" in wait_for(driver, "#report .counts").text
        error = wait_for(driver, "#report .error", "stream_incomplete").text
        assert "api.anthropic.com/v1/messages/x.json: cut off <b>mid-stream</b>" in error
        check_markup_is_text(driver)
        cards = driver.find_elements(By.CSS_SELECTOR, "#conversations .conversation")
        assert len(cards) == 3  # every included conversation in full
        check_stream(wait_for(driver, "#conversations .conversation", "content_block_delta"))
        capital = wait_for(driver, "#conversations .conversation", "capital of France")
        assert "temperature" in capital.get_attribute("textContent")
        driver.find_element(By.ID, "search").send_keys("France")
        assert len([c for c in driver.find_elements(By.CSS_SELECTOR, "#conversations .conversation")]) == 1
        assert driver.execute_script("return window.pwned") is None
        assert driver.save_screenshot(str(tmp_path / "export.png"))
    assert (tmp_path / "export.png").read_bytes().startswith(b"\x89PNG")


def test_served_page_lists_opens_a_stream_shows_the_miss_and_picks_up_new_cassettes(recorded, tmp_path):
    folder = tmp_path / "cassettes"
    shutil.copytree(recorded["cassettes"], folder)
    view = subprocess.Popen(
        [CASSETTE, "view", str(folder), "--report", str(recorded["report"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = view.stdout.readline()
        assert first.startswith(f"cassette view: serving {folder} at http://127.0.0.1:"), first
        url = first.split(" at ", 1)[1].split()[0]
        headers = httpx.get(url, timeout=10).headers
        assert "script-src 'sha256-" in headers["content-security-policy"]
        with chromium(tmp_path / "profile") as driver:
            driver.get(url)
            check_report(driver)
            check_markup_is_text(driver)
            wait_for(driver, ".cassette-row", STREAMED_PROMPT, then=click)
            wait_for(driver, "#detail .conversation", STREAMED_PROMPT, then=check_stream)
            wait_for(driver, "#detail .raw-toggle", then=click)
            assert '"body_format": "events"' in wait_for(driver, "#detail pre.raw", then=text_of)

            wait_for(driver, ".cassette-row", "Summarise", then=click)
            assert wait_for(driver, "#detail .turn.role-user .part", "Summarise", then=text_of) == HOSTILE
            assert driver.execute_script("return window.pwned") is None

            write(folder, chat("A question recorded while the page is open", "Fresh answer"))
            wait_for(driver, ".cassette-row", "A question recorded while the page is open")
            assert driver.save_screenshot(str(tmp_path / "served.png"))
        assert (tmp_path / "served.png").read_bytes().startswith(b"\x89PNG")
    finally:
        view.send_signal(signal.SIGTERM)
        rest, _ = view.communicate(timeout=15)
    assert view.returncode == 0
    assert "cassette view: stopped" in rest
