"""Bedrock's runtime hosts are under cassette control by default, in every region; its control plane is not."""

import fnmatch

import pytest
from cassette_proxy.core.defaults import DEFAULT_HOSTS
from cassette_proxy.core.keys.hosts import HostScope
from cassette_proxy.launch.client_env import no_proxy_value


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


def test_chatgpt_codex_model_paths_are_default_hosts_and_the_rest_of_chatgpt_com_is_not():
    scope = HostScope(DEFAULT_HOSTS)
    assert scope.covers("chatgpt.com", "/backend-api/codex/responses")
    assert scope.covers("ChatGPT.com.", "/backend-api/codex/responses?x=1")
    assert not scope.covers("chatgpt.com", "/backend-api/conversation")
    assert not scope.covers("chatgpt.com", "/")
    assert "chatgpt.com" in scope  # a connection to it is under control: the seal refuses it in replay
    assert scope.covers("api.openai.com", "/anything")


def test_a_no_proxy_entry_for_a_host_with_controlled_paths_is_dropped():
    assert no_proxy_value("chatgpt.com,.example.com", DEFAULT_HOSTS) == ".example.com,localhost,127.0.0.1,::1"


@pytest.mark.parametrize(
    "host",
    ["api.moonshot.ai", "api.z.ai", "api.sambanova.ai", "models.github.ai", "dashscope-intl.aliyuncs.com",
     "bedrock-mantle.us-east-1.api.aws", "gateway.pydantic.info"],
)  # fmt: skip
def test_the_providers_pydantic_ai_calls_by_default_are_default_hosts(host):
    assert host in HostScope(DEFAULT_HOSTS)
