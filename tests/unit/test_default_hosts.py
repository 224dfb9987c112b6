"""Bedrock's runtime hosts are under cassette control by default, in every region; its control plane is not."""

import fnmatch

import pytest
from cassette_proxy.core.defaults import DEFAULT_HOSTS


def in_default_scope(host: str) -> bool:
    return any(fnmatch.fnmatchcase(host, pattern) for pattern in DEFAULT_HOSTS)


@pytest.mark.parametrize(
    ("host", "controlled"),
    [
        ("bedrock-runtime.us-east-1.amazonaws.com", True),
        ("bedrock-runtime.eu-central-1.amazonaws.com", True),
        ("bedrock-agent-runtime.us-west-2.amazonaws.com", True),
        ("bedrock.us-east-1.amazonaws.com", False),  # the control plane (model listing, provisioning)
        ("s3.us-east-1.amazonaws.com", False),
    ],
)
def test_bedrock_runtime_hosts_are_default_hosts(host, controlled):
    assert in_default_scope(host) is controlled


@pytest.mark.parametrize(
    "host",
    ["api.cerebras.ai", "api.perplexity.ai", "router.huggingface.co", "api.replicate.com", "api.voyageai.com",
     "api.jina.ai", "us-central1-aiplatform.googleapis.com"],
)  # fmt: skip
def test_the_openai_compatible_providers_people_use_are_default_hosts(host):
    assert in_default_scope(host)
