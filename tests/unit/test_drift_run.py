"""`cassette drift` without a proxy: which cassettes can be re-sent and how (launch/drift_plan.py), the retries after
a 429, the request budget (launch/drift_run.py), the credentials, the report's order, exit status and Markdown. The sender is a stand-in that writes the
re-recording where the scratch proxy would; tests/integration/test_drift_command.py drives the real proxy."""

from __future__ import annotations

import argparse
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cassette_proxy.cli import drift, main
from cassette_proxy.core.drift.credentials import CredentialError, credential_headers, parse_rule
from cassette_proxy.core.drift.drift import Finding, Severity
from cassette_proxy.core.drift.drift_report import (
    EXIT_DRIFT,
    EXIT_UNCHECKED,
    DriftReport,
    Outcome,
    Result,
    render_markdown,
)
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps
from cassette_proxy.core.keys.hosts import HostScope
from cassette_proxy.core.keys.recipe import make_recipe, stored_key
from cassette_proxy.launch import drift_run
from cassette_proxy.launch.drift_plan import Job, Selection, gather, glob_for_tests, plan, selected
from cassette_proxy.launch.drift_run import Budget, Policy, check
from cassette_proxy.launch.resend import Received, request_headers, retry_after
from samples import cassette_path, chat, write

OPENAI_KEY = "sk-fake-drift-DO-NOT-STORE-0123456789"
ENV = {"OPENAI_API_KEY": OPENAI_KEY}
SCOPE = HostScope(["api.openai.com", "api.anthropic.com", "bedrock-runtime.*.amazonaws.com"])


def planned(cassette: dict, environ: dict | None = None, recipe=None, rules=()) -> Job | Result:
    return plan((Path("x.json"), "x.json", cassette), recipe or make_recipe(), SCOPE, ENV if environ is None else environ,
                list(rules))  # fmt: skip


def test_a_cassette_is_re_sent_with_its_key_headers_and_the_providers_credential_only():
    cassette = chat("hi", "hello")
    cassette["request"]["headers"] = {"openai-beta": "assistants=v2", "authorization": "Bearer planted",
                                      "x-forwarded-for": "10.0.0.1"}  # fmt: skip
    cassette["key"] = stored_key(cassette["request"], make_recipe())  # openai-beta is a key header
    job = planned(cassette)
    assert isinstance(job, Job)
    assert job.headers["authorization"] == f"Bearer {OPENAI_KEY}"  # the environment's, not the cassette's
    assert job.headers["openai-beta"] == "assistants=v2" and "x-forwarded-for" not in job.headers
    assert (job.headers["content-type"], job.headers["accept-encoding"]) == ("application/json", "identity")
    assert job.scratch == f"api.openai.com/v1/chat/completions/{cassette['key']}.json"


def url(address: str):
    return lambda cassette: cassette["request"].update(url=address)


@pytest.mark.parametrize(
    ("change", "environ", "message"),
    [
        (lambda c: c.setdefault("keyed_with", {}).update(request_redacted=True), ENV, "its stored request was redacted"),
        (url("https://api.example.com/v1/chat/completions"), ENV, "api.example.com is not under cassette control in this run: pass --hosts api.example.com"),
        (lambda c: None, {}, "api.openai.com: no credentials: set OPENAI_API_KEY"),
        (url("http://api.openai.com/v1/chat/completions"), ENV, "refusing to send credentials for api.openai.com "
         "over plain HTTP"),
        (url("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse"), ENV, "requests are signed (AWS SigV4)"),
    ],
    ids=["redacted", "out-of-scope", "no-credentials", "plain-http", "sigv4"],
)  # fmt: skip
def test_what_cannot_be_re_sent_says_why_and_sends_nothing(change, environ, message):
    cassette = chat("hi", "hello")
    change(cassette)
    cassette["key"] = stored_key(cassette["request"], make_recipe())  # keyed as recorded: the check is the next one
    result = planned(cassette, environ)
    assert isinstance(result, Result) and result.outcome is Outcome.ERROR
    assert message in result.message


def test_a_cassette_keyed_under_other_settings_names_them_and_is_not_sent():
    cassette = chat("hi", "hello", model="gpt-4o")
    cassette["keyed_with"] = {"recipe": 1, "ignore": ["user"], "key_headers": [], "ignore_values": []}
    result = planned(cassette, recipe=make_recipe(ignore=["model"]))
    assert isinstance(result, Result) and result.outcome is Outcome.ERROR
    assert (
        "keyed differently under this run's key settings (recorded with a different ignore set: ['user'] → "
        "['model']" in result.message
    )


# -- check(): a stand-in sender that answers and writes the re-recording as the proxy would ----------------------


class Provider:
    """Answers each request with the next (status, headers, cassette response) and records it in the scratch."""

    def __init__(self, scratch: Path, *answers: tuple[int, dict, dict | None]):
        self.scratch, self.answers, self.sent = scratch, list(answers), []

    def __call__(self, job: Job) -> Received:
        status, headers, response = self.answers.pop(0)
        self.sent.append(job.result.cassette)
        if response is not None:
            rerecorded = {**job.cassette, "response": response}
            write_atomic(self.scratch / job.scratch, dumps(rerecorded))
        return Received(status, {"content-type": "application/json", **headers}, b"{}")


def job_for(answer: str = "4") -> Job:
    job = planned(chat("What is 2+2?", answer))
    assert isinstance(job, Job)
    return job


def run_check(tmp_path, job: Job, provider: Provider, budget: int | None = None, **policy) -> Result:
    (tmp_path / "kept").mkdir(exist_ok=True)
    check(job, provider, tmp_path / "scratch", tmp_path / "kept", Budget(budget), Policy(**policy))
    return job.result


def test_a_same_answer_is_same_and_its_re_recording_is_dropped(tmp_path):
    job = job_for()
    result = run_check(tmp_path, job, Provider(tmp_path / "scratch", (200, {}, job.cassette["response"])))
    assert (result.outcome, result.findings, result.attempts) == (Outcome.SAME, [], 1)
    assert job.rerecording is None and not (tmp_path / "scratch" / job.scratch).exists()


def test_a_changed_answer_is_drift_and_its_re_recording_is_kept(tmp_path):
    job = job_for()
    changed = chat("What is 2+2?", "5", finish="length")["response"]
    result = run_check(tmp_path, job, Provider(tmp_path / "scratch", (200, {}, changed)))
    assert result.outcome is Outcome.DRIFT
    assert [f.field for f in result.findings] == ["finish_reason", "text"]
    assert job.rerecording is not None and json.loads(job.rerecording.read_text())["response"] == changed


def test_a_429_is_retried_after_retry_after_then_compared(tmp_path):
    job = job_for()
    provider = Provider(
        tmp_path / "scratch", (429, {"retry-after-ms": "10"}, None), (200, {}, job.cassette["response"])
    )
    result = run_check(tmp_path, job, provider)
    assert (result.outcome, result.attempts) == (Outcome.SAME, 2)
    assert result.message == "answered after 1 429(s), each waited out (retry-after, else 1 s doubling)"


def test_a_429_that_stays_is_rate_limited_not_drift(tmp_path):
    provider = Provider(tmp_path / "scratch", *[(429, {"retry-after": "0"}, None)] * 3)
    result = run_check(tmp_path, job_for(), provider, retries=2)
    assert (result.outcome, result.attempts, result.findings) == (Outcome.RATE_LIMITED, 3, [])
    assert result.message == "429 after 3 attempt(s) (retries used up); not drift"


def test_a_retry_after_longer_than_max_wait_ends_the_retries(tmp_path):
    result = run_check(tmp_path, job_for(), Provider(tmp_path / "scratch", (429, {"retry-after": "600"}, None)))
    assert result.outcome is Outcome.RATE_LIMITED and "retry-after 600 s is over --max-wait" in result.message


def test_the_request_budget_counts_retries_and_skips_the_rest(tmp_path):
    budget = Budget(2)
    provider = Provider(tmp_path / "scratch", (429, {"retry-after": "0"}, None), (429, {"retry-after": "0"}, None))
    (tmp_path / "kept").mkdir()
    first, second = job_for("4"), job_for("5")
    for job in (first, second):
        check(job, provider, tmp_path / "scratch", tmp_path / "kept", budget, Policy())
    assert (first.result.outcome, first.result.attempts) == (Outcome.RATE_LIMITED, 2)
    assert first.result.message == "over --max-requests while waiting out a 429"
    assert (second.result.outcome, second.result.attempts, provider.sent) == (Outcome.SKIPPED, 0, ["x.json"] * 2)


def test_no_re_recording_is_an_error_not_a_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(drift_run, "WHOLE_WRITE_WAIT", 0.05)
    result = run_check(tmp_path, job_for(), Provider(tmp_path / "scratch", (200, {}, None)))
    assert result.outcome is Outcome.ERROR and "the proxy kept no re-recording" in result.message


def test_a_network_error_is_an_error_and_names_no_credential(tmp_path):
    def failing(job: Job) -> Received:
        raise ConnectionRefusedError(f"refused while sending {job.headers['authorization']}")

    result = run_check(tmp_path, job_for(), failing)
    assert result.outcome is Outcome.ERROR and OPENAI_KEY not in result.message and "[credential]" in result.message


def test_an_answer_the_proxy_made_itself_is_an_error(tmp_path):
    class Unreachable(Provider):
        def __call__(self, job: Job) -> Received:
            body = {"error": {"type": "cassette_upstream_error", "message": "api.openai.com:443 unreachable"}}
            return Received(502, {"content-type": "application/json"}, json.dumps(body).encode())

    result = run_check(tmp_path, job_for(), Unreachable(tmp_path))
    assert (
        result.outcome is Outcome.ERROR
        and "the proxy answered 502 itself: api.openai.com:443 unreachable" in result.message
    )


# -- credentials, headers, retry-after ------------------------------------------------------------------------------


def test_each_provider_takes_its_sdks_variable_in_the_sdks_order():
    assert credential_headers("api.anthropic.com", {"ANTHROPIC_API_KEY": "a"}) == {"x-api-key": "a"}
    assert credential_headers("api.anthropic.com", {"ANTHROPIC_AUTH_TOKEN": "t"}) == {"authorization": "Bearer t"}
    google = {"GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "G"}
    assert credential_headers("generativelanguage.googleapis.com", google) == {"x-goog-api-key": "G"}
    assert credential_headers("my.openai.azure.com", {"AZURE_OPENAI_API_KEY": "z"}) == {"api-key": "z"}
    openai = {"OPENAI_API_KEY": "k", "OPENAI_ORG_ID": "org", "OPENAI_PROJECT_ID": "p"}
    assert credential_headers("api.openai.com", openai) == {"authorization": "Bearer k", "openai-organization": "org",
                                                            "openai-project": "p"}  # fmt: skip
    assert credential_headers("llm.internal", {}) == {}  # unknown hosts may need none


def test_credential_rules_cover_other_hosts_and_come_first():
    rules = [parse_rule("*aiplatform.googleapis.com=VERTEX_TOKEN"), parse_rule("api.openai.com=x-gateway-key:GW")]
    environ = {"VERTEX_TOKEN": "ya29.t", "GW": "gw", "OPENAI_API_KEY": "k"}
    assert credential_headers("us-central1-aiplatform.googleapis.com", environ, rules) == {
        "authorization": "Bearer ya29.t"
    }
    assert credential_headers("api.openai.com", environ, rules) == {"x-gateway-key": "gw"}
    with pytest.raises(CredentialError, match="expected HOST=VARIABLE or HOST=HEADER:VARIABLE"):
        parse_rule("api.openai.com")


def test_retry_after_in_seconds_milliseconds_or_a_date():
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None


def test_hop_by_hop_and_credential_headers_never_come_from_the_key_headers():
    job = job_for()
    headers = request_headers(job.facts, ["host", "authorization", "openai-beta"], {})
    assert "host" not in headers and "authorization" not in headers


def test_a_test_id_glob_becomes_a_glob_on_test_folders():
    assert glob_for_tests("tests/test_app.py::TestChat::test_*") == "tests/tests/test_app.py/TestChat.test_*"
    assert glob_for_tests("*reply*") == "tests/**reply*"


# -- the report ----------------------------------------------------------------------------------------------------


def result(name: str, outcome: Outcome, *findings: Finding) -> Result:
    return Result(f"api.openai.com/v1/chat/completions/{name}.json", "POST api.openai.com/v1/chat/completions",
                  outcome=outcome, findings=list(findings))  # fmt: skip


TEXT = Finding(Severity.TEXT, "text", "a", "b", "similarity 0.00: -[a] +[b]")
SHAPE = Finding(Severity.SHAPE, "added", "", "string", "service_tier")


def report(*results: Result, fail_on: Severity = Severity.BEHAVIOUR) -> DriftReport:
    return DriftReport("cassettes", fail_on, "2026-01-01T00:00:00+00:00", list(results))


def test_results_are_ordered_worst_first_then_unchecked_then_same():
    ordered = report(result("a", Outcome.SAME), result("b", Outcome.DRIFT, TEXT), result("c", Outcome.SKIPPED),
                     result("d", Outcome.DRIFT, SHAPE), result("e", Outcome.ERROR)).ordered()  # fmt: skip
    assert [r.cassette.split("/")[-1] for r in ordered] == ["d.json", "b.json", "e.json", "c.json", "a.json"]


@pytest.mark.parametrize(
    ("results", "fail_on", "status"),
    [
        ([result("a", Outcome.DRIFT, TEXT)], Severity.BEHAVIOUR, 0),
        ([result("a", Outcome.DRIFT, TEXT)], Severity.TEXT, EXIT_DRIFT),
        ([result("a", Outcome.DRIFT, SHAPE)], Severity.STATUS, 0),
        ([result("a", Outcome.SAME), result("b", Outcome.ERROR)], Severity.BEHAVIOUR, EXIT_UNCHECKED),
        ([result("a", Outcome.SAME), result("b", Outcome.RATE_LIMITED)], Severity.BEHAVIOUR, 0),
        ([result("a", Outcome.SKIPPED)], Severity.BEHAVIOUR, EXIT_UNCHECKED),  # nothing was checked
    ],
    ids=["text-below", "text-at", "shape-below-status", "error", "rate-limited", "none-checked"],
)
def test_exit_status(results, fail_on, status):
    assert report(*results, fail_on=fail_on).exit_status() == status


def test_markdown_keeps_recorded_content_inside_code_spans_and_fences():
    hostile = Finding(Severity.TEXT, "text", "a", "b", "similarity 0.10: +[| `x` <img src=y> ```]")
    markdown = render_markdown(report(result("a", Outcome.DRIFT, hostile)))
    row = next(line for line in markdown.splitlines() if line.startswith("| text"))
    # The pipe escaped (the table keeps its four cells), the span's backticks outnumber the content's.
    assert row.endswith(" | ````text changed: similarity 0.10: +[\\| `x` <img src=y> ```]```` |")
    assert "\n````\ntext       text changed: similarity 0.10: +[| `x` <img src=y> ```]\n````\n" in markdown


def test_markdown_carries_no_raw_escape_bell_or_bidi_override():
    hostile = Finding(Severity.TEXT, "text", "a\x1b[2J", "b\u202eevil", "similarity 0.10: +[\x1b]0;pwned\x07]")
    drifted = result("a", Outcome.DRIFT, hostile)
    drifted.prompt, drifted.model = "retitle \x1b]0;x\x07 me", "gpt\u202e"
    errored = result("b", Outcome.ERROR)
    errored.message = "the request failed: \x1b[31mred\x9b and \u2066isolated\u2069"
    markdown = render_markdown(report(drifted, errored))
    for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069"):
        assert raw not in markdown
    assert "\\x1b]0;pwned\\x07" in markdown and "gpt\\u202e" in markdown  # visible, escaped


# -- selection and the command's own checks (nothing here starts a proxy) -----------------------------------------


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    drift.register(parser.add_subparsers())
    return parser.parse_args(["drift", *argv])


PER_TEST = "tests/tests/test_app.py/TestChat.test_reply/api.openai.com/v1/chat/completions/{key}.json"


@pytest.mark.parametrize(
    ("argv", "recorded_at", "per_test", "chosen"),
    [
        ((), "", False, True),
        (("api.openai.com/**",), "", False, True),
        (("api.anthropic.com/**",), "", False, False),
        (("--select-host", "*.openai.com"), "", False, True),
        (("--select-host", "api.anthropic.com"), "", False, False),
        (("--select-test", "tests/test_app.py::TestChat::test_*"), "", True, True),
        (("--select-test", "tests/test_app.py::test_other"), "", True, False),
        (("--select-test", "*test_reply*"), "", False, False),  # a shared cassette belongs to no test
        (("--older-than", "30"), "2020-01-01T00:00:00+00:00", False, True),
        (("--older-than", "30"), "2999-01-01T00:00:00+00:00", False, False),
        (("--older-than", "30"), "not a date", False, True),  # an unknown age may be any age
    ],
)
def test_selection(argv, recorded_at, per_test, chosen):
    cassette = chat("hi", "hello", recorded_at=recorded_at)
    relative = PER_TEST.format(key=cassette["key"]) if per_test else cassette_path(cassette)
    assert selected(drift.selection(args(*argv)), relative, cassette, datetime.now(UTC)) is chosen


def test_an_unreadable_cassette_is_listed_and_the_rest_is_read_oldest_first(tmp_path):
    write(tmp_path, chat("newer", "a", recorded_at="2025-06-01T00:00:00+00:00"))
    write(tmp_path, chat("older", "b", recorded_at="2024-06-01T00:00:00+00:00"))
    (tmp_path / "api.openai.com" / "broken.json").write_text("{not json")
    chosen, unreadable = gather(Selection(), tmp_path)
    assert [cassette["request"]["body"]["messages"][0]["content"] for _, _, cassette in chosen] == ["older", "newer"]
    [broken] = unreadable
    assert (broken.cassette, broken.outcome) == ("api.openai.com/broken.json", Outcome.ERROR)
    assert broken.message.startswith("unreadable cassette:")


def test_nothing_to_re_send_exits_3_without_starting_a_proxy(tmp_path, monkeypatch, capsys):
    write(tmp_path, chat("hi", "hello"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(drift_run, "recheck", lambda *a: pytest.fail("no request can be sent: no proxy to start"))
    code = main(["drift", "--dir", str(tmp_path), "--mitmdump", shutil.which("true")])
    out = capsys.readouterr().out
    assert code == EXIT_UNCHECKED and "api.openai.com: no credentials: set OPENAI_API_KEY" in out


def test_no_selected_cassette_and_a_report_inside_the_folder_are_usage_errors(tmp_path, capsys):
    write(tmp_path, chat("hi", "hello"))
    true = shutil.which("true")
    assert main(["drift", "--dir", str(tmp_path), "--mitmdump", true, "nothing/**"]) == 2
    assert "no cassette in" in capsys.readouterr().err
    assert main(["drift", "--dir", str(tmp_path), "--mitmdump", true, "--report", str(tmp_path / "r.json")]) == 2
    assert "inside the cassette folder" in capsys.readouterr().err
