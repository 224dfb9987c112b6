"""Credential and SigV4 headers can never become key headers: a key header is stored in every cassette."""

import pytest
from test_options import run_mitmdump


@pytest.mark.parametrize("header", ["Authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"])
def test_a_credential_or_signature_header_is_refused_as_a_key_header(tmp_path, header):
    result = run_mitmdump(tmp_path, f"cassette_key_headers={header}")
    assert result.returncode != 0
    assert f"cassette_key_headers: {header.lower()!r} carries a credential" in result.stdout + result.stderr
