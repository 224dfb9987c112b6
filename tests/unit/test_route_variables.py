"""Each reverse route sets NAME_BASE_URL and the variables its provider's SDKs read, with the path each expects."""

from __future__ import annotations

import pytest
from cassette_proxy.launch.client_env import route_variables
from cassette_proxy.launch.launcher import parse_reverse

LISTENER = "http://127.0.0.1:40001"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai=https://api.openai.com",
         {"OPENAI_BASE_URL": f"{LISTENER}/v1", "OPENAI_API_BASE": f"{LISTENER}/v1"}),
        ("anthropic=https://api.anthropic.com", {"ANTHROPIC_BASE_URL": LISTENER, "ANTHROPIC_API_URL": LISTENER}),
        ("azure_openai=https://myres.openai.azure.com",
         {"AZURE_OPENAI_BASE_URL": LISTENER, "AZURE_OPENAI_ENDPOINT": LISTENER, "AZURE_API_BASE": LISTENER}),
        ("gemini=https://generativelanguage.googleapis.com",
         {"GEMINI_BASE_URL": LISTENER, "GOOGLE_GEMINI_BASE_URL": LISTENER}),
        ("vertex=https://us-central1-aiplatform.googleapis.com",
         {"VERTEX_BASE_URL": LISTENER, "GOOGLE_VERTEX_BASE_URL": LISTENER}),
        ("ollama=http://localhost:11434",
         {"OLLAMA_BASE_URL": LISTENER, "OLLAMA_HOST": LISTENER, "OLLAMA_API_BASE": LISTENER}),
        ("bedrock=https://bedrock-runtime.us-east-1.amazonaws.com",
         {"BEDROCK_BASE_URL": LISTENER, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": LISTENER}),
        ("cohere=https://api.cohere.com", {"COHERE_BASE_URL": LISTENER, "CO_API_URL": LISTENER}),
        ("groq=https://api.groq.com", {"GROQ_BASE_URL": LISTENER}),  # the groq SDK's own variable
        # a path given ends NAME_BASE_URL (OpenAI-compatible clients); an SDK that adds its own path gets none
        ("ollama=http://localhost:11434/v1",
         {"OLLAMA_BASE_URL": f"{LISTENER}/v1", "OLLAMA_HOST": LISTENER, "OLLAMA_API_BASE": LISTENER}),
        ("vllm=http://127.0.0.1:8000/v1", {"VLLM_BASE_URL": f"{LISTENER}/v1"}),
    ],
)  # fmt: skip
def test_a_route_sets_the_variables_its_sdks_read(spec, expected):
    reverse = parse_reverse(spec)
    assert route_variables(reverse.name, LISTENER, reverse.base_path) == expected
