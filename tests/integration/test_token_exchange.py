"""Token exchanges (Google OAuth, Microsoft identity platform): never stored; in replay answered with a placeholder.

The library side is real: google-auth's own service-account refresh parses the placeholder (here through a
transport that calls the builder, and through the proxy in replay mode with no cassette at all).
"""

from __future__ import annotations

import datetime
import json
import ssl
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from cassette_proxy.core.traffic import token_exchange
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_upstream import LIVE_TOKEN
from google.auth import jwt
from google.auth.transport import Response as TransportResponse
from google.oauth2 import service_account

GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"
MICROSOFT_TOKEN_URL = "https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000/oauth2/v2.0/token"
FAKE_CLIENT_SECRET = "fake-client-secret-DO-NOT-STORE-0123456789"


def service_account_info() -> dict:
    """A throwaway service account: a fresh RSA key, never valid anywhere."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return {
        "type": "service_account",
        "project_id": "cassette-test",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": pem.decode(),
        "client_email": "tester@cassette-test.iam.gserviceaccount.com",
        "client_id": "100000000000000000001",
        "token_uri": GOOGLE_TOKEN_URL,
    }


class PlaceholderTransport:
    """A google-auth transport answering every request with what the proxy would answer in replay mode."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
        parts = urlsplit(url)
        body = body.encode() if isinstance(body, str) else body or b""
        self.bodies.append(body)
        assert token_exchange.parse_endpoints([]).matches(method, parts.hostname, parts.path)
        content_type = (headers or {}).get("Content-Type") or (headers or {}).get("content-type", "")
        answer_headers, answer = token_exchange.placeholder(parts.hostname, parts.path, body, content_type)
        return FakeResponse(200, answer_headers, answer)


class FakeResponse(TransportResponse):
    def __init__(self, status: int, headers: dict, data: bytes) -> None:
        self._status, self._headers, self._data = status, headers, data

    @property
    def status(self):
        return self._status

    @property
    def headers(self):
        return self._headers

    @property
    def data(self):
        return self._data


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("POST", GOOGLE_TOKEN_URL, True),
        ("POST", "https://www.googleapis.com/oauth2/v4/token", True),
        ("POST", "https://accounts.google.com/o/oauth2/token", True),
        ("POST", MICROSOFT_TOKEN_URL, True),
        ("POST", "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/token", True),
        ("POST", "https://LOGIN.microsoftonline.com/common/oauth2/v2.0/token?x=1", True),
        ("GET", GOOGLE_TOKEN_URL, False),
        ("GET", "https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration", False),
        ("POST", "https://oauth2.googleapis.com/tokeninfo", False),
        ("POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", False),
    ],
)
def test_default_token_endpoints(method, url, expected):
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    assert token_exchange.parse_endpoints([]).matches(method, parts.hostname, path) is expected


def test_more_token_endpoints_are_host_path_globs():
    endpoints = token_exchange.parse_endpoints(["sts.example.com/v1/token", "auth.*.example.net/*/oauth/token"])
    assert endpoints.matches("POST", "sts.example.com", "/v1/token")
    assert endpoints.matches("POST", "auth.eu.example.net", "/tenant/oauth/token")
    assert not endpoints.matches("POST", "sts.example.com", "/v1/tokens")
    assert endpoints.matches("POST", "oauth2.googleapis.com", "/token")  # the defaults stay


@pytest.mark.parametrize("bad", ["sts.example.com", "https://sts.example.com/token", "/token", "sts.example.com/"])
def test_a_token_endpoint_glob_without_host_or_path_is_refused_with_an_example(bad):
    with pytest.raises(ValueError, match=r"HOST/PATH without a scheme, e\.g\. sts\.example\.com/oauth2/token") as e:
        token_exchange.parse_endpoints([bad])
    assert repr(bad) in str(e.value)


def test_google_auth_service_account_refreshes_from_the_placeholder():
    transport = PlaceholderTransport()
    credentials = service_account.Credentials.from_service_account_info(
        service_account_info(), scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    credentials.refresh(transport)
    assert credentials.token.startswith("cassette-placeholder-")
    assert credentials.valid
    # google-auth keeps the expiry as a naive UTC datetime (and subtracts its refresh margin later).
    remaining = credentials.expiry.replace(tzinfo=datetime.UTC).timestamp() - time.time()
    assert 3500 < remaining <= 3600
    # The same account and scope get the same token; another scope another one.
    again = service_account.Credentials.from_service_account_info(
        service_account_info() | {"client_email": credentials.service_account_email},
        scopes=["https://www.googleapis.com/auth/cloud-platform"],
    )
    again.refresh(transport)
    other = credentials.with_scopes(["https://www.googleapis.com/auth/generative-language"])
    other.refresh(transport)
    assert again.token == credentials.token != other.token


def test_google_id_token_only_when_asked_and_with_a_usable_expiry():
    transport = PlaceholderTransport()
    credentials = service_account.IDTokenCredentials.from_service_account_info(
        service_account_info(), target_audience="https://my-service.example.com"
    )
    credentials.refresh(transport)
    claims = jwt.decode(credentials.token, verify=False)
    assert claims["aud"] == "https://my-service.example.com"
    assert claims["exp"] - time.time() > 3500
    answer = json.loads(token_exchange.placeholder("oauth2.googleapis.com", "/token", transport.bodies[0], "")[1])
    assert set(answer) == {"id_token"}
    plain = token_exchange.placeholder("oauth2.googleapis.com", "/token", b"grant_type=refresh_token&scope=a", "")
    assert "id_token" not in json.loads(plain[1])


def test_microsoft_placeholder_has_what_msal_reads():
    form = urlencode(
        {
            "client_id": "11111111-2222-3333-4444-555555555555",
            "client_secret": FAKE_CLIENT_SECRET,
            "grant_type": "client_credentials",
            "scope": "https://cognitiveservices.azure.com/.default",
        }
    ).encode()
    headers, body = token_exchange.placeholder(
        "login.microsoftonline.com", urlsplit(MICROSOFT_TOKEN_URL).path, form, "application/x-www-form-urlencoded"
    )
    answer = json.loads(body)
    assert answer["token_type"] == "Bearer"
    assert answer["expires_in"] == answer["ext_expires_in"] == 3599
    assert answer["access_token"].startswith("cassette-placeholder-")
    assert answer["scope"] == "https://cognitiveservices.azure.com/.default"
    assert "id_token" not in answer
    assert FAKE_CLIENT_SECRET.encode() not in body
    assert headers["cache-control"] == "no-store"
    user = form.replace(b"client_credentials", b"refresh_token").replace(b"azure.com%2F.default", b"x+openid+profile")
    user_answer = json.loads(
        token_exchange.placeholder("login.microsoftonline.com", "/common/oauth2/v2.0/token", user, "")[1]
    )
    assert {"id_token", "client_info", "refresh_token"} <= set(user_answer)
    assert jwt.decode(user_answer["id_token"], verify=False)["aud"] == "11111111-2222-3333-4444-555555555555"


def token_request(proxy_url: str, url: str = GOOGLE_TOKEN_URL, *, ca_bundle: Path) -> httpx.Response:
    form = {"grant_type": "client_credentials", "client_id": "cassette-test", "client_secret": FAKE_CLIENT_SECRET}
    verify = ssl.create_default_context(cafile=str(ca_bundle))
    with httpx.Client(proxy=proxy_url, verify=verify, timeout=30, trust_env=False) as client:
        return client.post(url, data=form)


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_replay_answers_token_exchanges_itself_and_stores_nothing(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_token_endpoints=["sts.example.com/v1/token"])
    bundle = proxy.ca_bundle
    google = token_request(proxy.url, ca_bundle=bundle)
    microsoft = token_request(proxy.url, MICROSOFT_TOKEN_URL, ca_bundle=bundle)
    custom = token_request(proxy.url, "https://sts.example.com/v1/token", ca_bundle=bundle)
    report = proxy.stop()
    for response in (google, microsoft, custom):
        assert response.status_code == 200, response.text
        assert response.json()["access_token"].startswith("cassette-placeholder-")
        assert response.json()["expires_in"] == 3599
        assert response.headers["x-cassette-token-exchange"] == "placeholder"
    assert "ext_expires_in" in microsoft.json()
    assert https_upstream.count == 0
    assert files_under(cassette_dir) == []
    assert report["counts"]["token_exchanges"] == 3
    assert report["counts"]["upstream"] == report["counts"]["misses"] == report["counts"]["passthrough"] == 0


def test_replay_answers_a_token_exchange_even_for_hosts_outside_cassette_hosts(https_upstream, start_proxy):
    proxy = start_proxy(https_upstream, cassette_hosts=["api.openai.com"])
    response = token_request(proxy.url, ca_bundle=proxy.ca_bundle)
    report = proxy.stop()
    assert response.json()["access_token"].startswith("cassette-placeholder-")
    assert https_upstream.count == 0
    assert report["counts"]["token_exchanges"] == 1


@pytest.mark.parametrize("mode", ["record", "update"])
def test_record_passes_token_exchanges_through_and_never_writes_or_logs_the_token(
    https_upstream, start_proxy, cassette_dir, mode
):
    proxy = start_proxy(https_upstream, cassette_mode=mode)
    response = token_request(proxy.url, ca_bundle=proxy.ca_bundle)
    report = proxy.stop()
    assert response.json()["access_token"] == LIVE_TOKEN  # the client gets the real answer
    assert https_upstream.count == 1
    assert files_under(cassette_dir) == []
    assert report["counts"]["token_exchanges"] == 1
    assert report["counts"]["recorded"] == 0
    for text in (proxy.log_text(), json.dumps(report)):
        assert LIVE_TOKEN not in text
        assert FAKE_CLIENT_SECRET not in text
