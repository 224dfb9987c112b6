"""A known secret never reaches an output, in whatever form it was printed (core/secrets/scrub.py); a credential with a line
break is stripped or refused before it is sent (core/drift/credentials.py, launch/resend.py). Every key here is fake."""

from __future__ import annotations

import io
import json
import logging
import shutil
from urllib.parse import quote, quote_plus

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.drift.credentials import CredentialError, credential_headers
from cassette_proxy.core.keys.recipe import facts_of
from cassette_proxy.core.output import PrintableStream, logger
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Report
from cassette_proxy.core.secrets.scrub import PLACEHOLDER, Scrubber, register
from cassette_proxy.launch import drift_run
from cassette_proxy.launch.resend import request_headers
from samples import chat, write

KEY = "sk-fake-scrub-0123456789abcdef"
"""Obviously fake; the tests below add the artefacts a `.env` file or a secret store leaves around it."""


def forms(raw: str) -> dict[str, str]:
    """How an exception, a JSON writer, a URL or a log may show `raw`."""
    return {
        "raw": raw,
        "str repr": repr(raw),
        "bytes repr": repr(f"Bearer {raw}".encode()),  # http.client: Invalid header value b'Bearer sk-…\n'
        "json": json.dumps(raw),
        "json in json": json.dumps(json.dumps(raw)),
        "percent": quote(raw, safe=""),
        "percent lower": quote(raw, safe="").replace("%0A", "%0a").replace("%0D", "%0d"),
        "form": quote_plus(raw),
        "stripped": raw.strip(),
        "no whitespace": "".join(raw.split()),
        "escaped": raw.encode("unicode_escape").decode(),
    }


@pytest.mark.parametrize("raw", [f"{KEY}\n", f"{KEY}\r\n", f"  {KEY}\t", f"{KEY[:12]}\r\n{KEY[12:]}", KEY],
                         ids=["newline", "crlf", "spaces", "crlf-inside", "plain"])  # fmt: skip
def test_every_printed_form_of_a_secret_is_scrubbed(raw):
    scrubber = Scrubber([raw])
    for name, form in forms(raw).items():
        text = scrubber.scrub(f"ValueError: Invalid header value {form} (sent)")
        assert KEY not in text and KEY[:12] not in text and KEY[12:] not in text, (name, text)
        assert PLACEHOLDER in text and text.startswith("ValueError: Invalid header value ") and text.endswith(" (sent)")


def test_a_text_without_a_secret_is_left_alone():
    scrubber = Scrubber([f"{KEY}\n"])
    assert scrubber.scrub("the request failed: connection refused") == "the request failed: connection refused"
    assert Scrubber().scrub("anything") == "anything"


def test_a_value_too_short_to_search_for_is_not_registered():
    scrubber = Scrubber(["k", "  abc\n"])
    assert scrubber.scrub("a kind of abc") == "a kind of abc"


def test_loggers_and_the_cli_streams_scrub_registered_secrets():
    raw = "sk-fake-scrub-logged-0123456789\n"
    register(raw)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    log = logger("cassette_proxy.tests.scrub")
    log.addHandler(handler)
    try:
        try:
            raise ValueError(f"Invalid header value {('Bearer ' + raw).encode()!r}")
        except ValueError:
            log.exception("failed for %r", raw)
    finally:
        log.removeHandler(handler)
    printed = io.StringIO()
    print(f"cassette: {raw!r} {quote(raw)}", file=PrintableStream(printed))  # type: ignore[arg-type]
    for text in (out.getvalue(), printed.getvalue()):
        assert "sk-fake-scrub-logged" not in text and PLACEHOLDER in text


def test_the_run_report_and_its_summary_scrub_registered_secrets(tmp_path):
    raw = "sk-fake-scrub-report-0123456789\n"
    register(raw)
    report = Report()
    report.error(ErrorEntry(ErrorKind.OWN_ERROR, f"failed: {raw!r}"))
    report.write(tmp_path / "report.json")
    for text in (report.summary(), (tmp_path / "report.json").read_text()):
        assert "sk-fake-scrub-report" not in text and PLACEHOLDER in text


@pytest.mark.parametrize("raw", [f"{KEY}\n", f"\n {KEY}\r\n"])
def test_a_credential_with_surrounding_whitespace_is_sent_stripped(raw):
    assert credential_headers("api.openai.com", {"OPENAI_API_KEY": raw}) == {"authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize("raw", [f"{KEY[:10]}\n{KEY[10:]}", f"{KEY}\rX-Evil: 1", f"{KEY}\x00"])
def test_a_credential_with_a_line_break_inside_is_refused_naming_the_variable_only(raw):
    with pytest.raises(CredentialError) as refused:
        credential_headers("api.openai.com", {"OPENAI_API_KEY": raw})
    message = str(refused.value)
    assert "$OPENAI_API_KEY holds a line break or control character" in message
    assert KEY[:10] not in message and KEY[10:] not in message


def test_a_blank_variable_is_unset_and_the_next_one_is_read():
    headers = credential_headers("generativelanguage.googleapis.com", {"GOOGLE_API_KEY": "\n", "GEMINI_API_KEY": KEY})
    assert headers == {"x-goog-api-key": KEY}
    with pytest.raises(CredentialError, match="no credentials: set OPENAI_API_KEY"):
        credential_headers("api.openai.com", {"OPENAI_API_KEY": " \n"})


def test_an_account_header_with_a_line_break_is_refused_too():
    with pytest.raises(CredentialError, match=r"\$OPENAI_ORG_ID holds a line break"):
        credential_headers("api.openai.com", {"OPENAI_API_KEY": KEY, "OPENAI_ORG_ID": "org-fake\r\nX: 1"})


def test_a_key_header_from_a_cassette_with_a_line_break_is_refused_before_sending():
    cassette = chat("hi", "hello")
    cassette["request"]["headers"] = {"openai-beta": "v2\r\nX-Injected: 1"}
    with pytest.raises(ValueError, match="its openai-beta header holds a line break") as refused:
        request_headers(facts_of(cassette["request"]), ["openai-beta"], {})
    assert "X-Injected" not in str(refused.value)


class StandInProxy:
    url, ca_bundle = "http://127.0.0.1:9", "ca.pem"

    def stop(self) -> None:
        pass


def test_drift_keeps_a_newline_ended_key_out_of_stdout_the_report_and_the_markdown(tmp_path, monkeypatch, capsys):
    raw = "sk-fake-drift-newline-0123456789\n"
    folder = tmp_path / "cassettes"
    write(folder, chat("hi", "hello"))
    sent = []

    def failing_send(proxy_url, ca_bundle, facts, headers, *bounds):
        sent.append(headers["authorization"])
        raise ValueError(" ".join(forms(raw).values()))  # every form an error message could quote the key in

    monkeypatch.setenv("OPENAI_API_KEY", raw)
    monkeypatch.setattr(drift_run.launcher, "start", lambda settings: StandInProxy())
    monkeypatch.setattr(drift_run, "send", failing_send)
    report, markdown = tmp_path / "drift.json", tmp_path / "drift.md"
    code = main(["drift", "--dir", str(folder), "--mitmdump", shutil.which("true") or "true", "--report", str(report),
                 "--markdown", str(markdown)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 3, err
    assert sent == [f"Bearer {raw.strip()}"]  # sent stripped; its failure is the cassette's error
    for text in (out, err, report.read_text(), markdown.read_text()):
        assert "sk-fake-drift-newline" not in text and "0123456789" not in text
    assert PLACEHOLDER in json.loads(report.read_text())["results"][0]["message"]
