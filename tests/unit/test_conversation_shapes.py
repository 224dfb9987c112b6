"""conversation.py: every API's request and response shape read into turns, an answer and a stream timeline.

Responses and streams come from the fake upstream's builders (the shapes the
record/replay tests drive real SDKs against) and are stored with the proxy's
own store functions, as a recording would be.
"""

from __future__ import annotations

import json

import fake_upstream
import pytest
from cassette_proxy.core.files.cassette_file import body_fields, events_fields, new_cassette
from cassette_proxy.core.reading.conversation import (
    ANTHROPIC,
    GEMINI,
    OLLAMA,
    OPENAI_CHAT,
    OPENAI_EMBEDDINGS,
    OPENAI_RESPONSES,
    UNKNOWN,
    conversation_of,
)

PNG = "iVBORw0KGgo" + "A" * 1361  # 1,372 base64 characters: 1,029 bytes


def cassette(url: str, body: dict | None, response: dict) -> dict:
    request = {"method": "POST", "url": url, "headers": {}, **body_fields(json.dumps(body).encode(), "json")}
    return new_cassette("0" * 32, request, response, {"cassette_proxy": "test"})


def whole(payload: dict) -> dict:
    return {"status": 200, "headers": {"content-type": "application/json"}, **body_fields(json.dumps(payload).encode(), "application/json")}  # fmt: skip


def streamed(events: list[str], content_type: str = "text/event-stream", gap: int = 40) -> dict:
    timed = [{"ms": 100 + gap * i, "text": text} for i, text in enumerate(events)]
    return {"status": 200, "headers": {"content-type": content_type}, **events_fields(timed)}


def texts(turn) -> list[tuple[str, str, str]]:
    return [(part.kind, part.name, part.text) for part in turn.parts]


def test_openai_chat_turns_tool_calls_images_parameters_and_answer():
    body = {
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "max_tokens": 50,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    }  # fmt: skip
    conversation = conversation_of(
        cassette("https://api.openai.com/v1/chat/completions", body, whole(fake_upstream.openai_chat(body, "A cat.")))
    )
    assert conversation.shape == OPENAI_CHAT
    assert conversation.parameters == {"temperature": 0.2, "max_tokens": 50}
    assert conversation.tools == ["get_weather"]
    system, user, assistant, tool = conversation.turns
    assert texts(system) == [("text", "", "Be brief.")]
    assert texts(user) == [
        ("text", "", "What is in this picture?"),
        ("image", "image/png", "[image image/png, 1.0 KB]"),
    ]
    assert texts(assistant) == [("tool_call", "get_weather", '{"city":"Paris"}')]
    assert texts(tool) == [("tool_result", "call_1", "sunny")]
    answer = conversation.answer
    assert (answer.text, answer.model, answer.finish_reason, answer.streamed) == (
        "A cat.",
        "gpt-4o-mini",
        "stop",
        False,
    )
    assert answer.usage == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def test_openai_chat_stream_is_assembled_with_its_timeline():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body["stream_options"] = {"include_usage": True}
    events = fake_upstream.openai_chat_stream(body, "echo: hi there", error=False)
    answer = conversation_of(cassette("https://api.openai.com/v1/chat/completions", body, streamed(events))).answer
    assert answer.streamed and answer.text == "echo: hi there"
    assert (answer.finish_reason, answer.usage["completion_tokens"]) == ("stop", 3)
    assert (answer.first_event_ms, answer.longest_gap_ms) == (100, 40)
    assert [event.text for event in answer.timeline[:4]] == ["", "echo: ", "hi ", "there"]
    assert answer.timeline[-1].name == "[DONE]"


def test_openai_chat_streamed_tool_call_arguments_are_joined():
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "lookup", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}, "finish_reason": "tool_calls"}]},
    ]  # fmt: skip
    events = [fake_upstream.sse(chunk) for chunk in chunks] + [fake_upstream.sse("[DONE]")]
    answer = conversation_of(cassette("https://api.openai.com/v1/chat/completions", {}, streamed(events))).answer
    assert [(p.kind, p.name, p.text) for p in answer.parts] == [("tool_call", "lookup", '{"q": "x"}')]
    assert answer.finish_reason == "tool_calls"


def test_anthropic_system_blocks_tool_use_and_result():
    body = {
        "model": "claude-test-model",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "QUJD"}},
                {"type": "text", "text": "Describe it."},
            ]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "zoom", "input": {"factor": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "zoomed"}]}]},
        ],
    }  # fmt: skip
    reply = fake_upstream.anthropic_message(body, "A chart.")
    conversation = conversation_of(cassette("https://api.anthropic.com/v1/messages", body, whole(reply)))
    assert conversation.shape == ANTHROPIC
    assert conversation.parameters == {"max_tokens": 64}
    system, user, assistant, result = conversation.turns
    assert texts(system) == [("text", "", "You are terse.")]
    assert [part.text for part in user.parts] == [
        "[image image/png, 1.0 KB]",
        "[file application/pdf, 3 B]",
        "Describe it.",
    ]
    assert texts(assistant) == [("tool_call", "zoom", '{\n  "factor": 2\n}')]
    assert texts(result) == [("tool_result", "tu1", "zoomed")]
    answer = conversation.answer
    assert (answer.text, answer.finish_reason, answer.usage) == (
        "A chart.",
        "end_turn",
        {"input_tokens": 5, "output_tokens": 2},
    )


def test_anthropic_stream_is_assembled():
    body = {"model": "claude-test-model", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    events = fake_upstream.anthropic_stream(body, "echo: hi there", error=False)
    answer = conversation_of(cassette("https://api.anthropic.com/v1/messages", body, streamed(events))).answer
    assert (answer.text, answer.model, answer.finish_reason) == ("echo: hi there", "claude-test-model", "end_turn")
    assert answer.usage == {"input_tokens": 5, "output_tokens": 3}
    assert [event.name for event in answer.timeline][:3] == ["message_start", "content_block_start", "ping"]


def test_anthropic_stream_cut_by_an_error_shows_the_error():
    body = {"model": "claude-test-model", "messages": [{"role": "user", "content": "hi"}]}
    events = fake_upstream.anthropic_stream(body, "echo: hi", error=True)
    answer = conversation_of(cassette("https://api.anthropic.com/v1/messages", body, streamed(events))).answer
    assert [(part.kind, part.name) for part in answer.parts] == [("json", "error")]
    assert "overloaded_error" in answer.parts[0].text


def test_openai_responses_input_items_and_stream():
    body = {
        "model": "gpt-4o-mini",
        "instructions": "Answer in French.",
        "max_output_tokens": 100,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Hello"}, {"type": "input_file", "filename": "notes.pdf", "file_data": "data:application/pdf;base64,QUJDRA=="}]},
            {"type": "function_call", "call_id": "fc1", "name": "translate", "arguments": '{"w":"hi"}'},
            {"type": "function_call_output", "call_id": "fc1", "output": "salut"},
        ],
        "stream": True,
    }  # fmt: skip
    events = fake_upstream.responses_stream(body, "echo: Bonjour")
    conversation = conversation_of(cassette("https://api.openai.com/v1/responses", body, streamed(events)))
    assert conversation.shape == OPENAI_RESPONSES
    assert conversation.parameters == {"max_output_tokens": 100, "stream": True}
    system, user, call, output = conversation.turns
    assert texts(system) == [("text", "", "Answer in French.")]
    assert texts(user) == [("text", "", "Hello"), ("file", "application/pdf", "[file notes.pdf application/pdf, 4 B]")]
    assert texts(call) == [("tool_call", "translate", '{"w":"hi"}')]
    assert texts(output) == [("tool_result", "fc1", "salut")]
    answer = conversation.answer
    assert (answer.text, answer.finish_reason, answer.usage["output_tokens"]) == ("echo: Bonjour", "completed", 2)


def test_openai_responses_whole_with_a_string_input():
    body = {"model": "gpt-4o-mini", "input": "Say hi"}
    reply = {"object": "response", "model": "gpt-4o-mini", "status": "incomplete",
             "incomplete_details": {"reason": "max_output_tokens"},
             "output": [{"type": "reasoning", "summary": []},
                        {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
                        {"type": "function_call", "name": "wave", "arguments": "{}"}],
             "usage": {"input_tokens": 3, "output_tokens": 1}}  # fmt: skip
    conversation = conversation_of(cassette("https://api.openai.com/v1/responses", body, whole(reply)))
    assert texts(conversation.turns[0]) == [("text", "", "Say hi")]
    answer = conversation.answer
    assert [(p.kind, p.name, p.text) for p in answer.parts] == [("text", "", "Hi"), ("tool_call", "wave", "{}")]
    assert answer.finish_reason == "max_output_tokens"


def test_gemini_contents_inline_data_function_calls_and_stream():
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    body = {
        "systemInstruction": {"parts": [{"text": "Be kind."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Look"}, {"inlineData": {"mimeType": "image/jpeg", "data": PNG}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "see", "args": {"x": 1}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "see", "response": {"ok": True}}}]},
        ],
        "generationConfig": {"temperature": 0.5, "maxOutputTokens": 20},
        "tools": [{"functionDeclarations": [{"name": "see"}]}],
    }
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "A "}]}}], "modelVersion": "gemini-2.0-flash"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "dog."}]}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}},
    ]  # fmt: skip
    conversation = conversation_of(cassette(url, body, streamed([fake_upstream.sse(chunk) for chunk in chunks])))
    assert conversation.shape == GEMINI
    assert conversation.model == "gemini-2.0-flash"
    assert conversation.parameters == {"temperature": 0.5, "maxOutputTokens": 20}
    assert conversation.tools == ["see"]
    system, user, model, result = conversation.turns
    assert texts(system) == [("text", "", "Be kind.")]
    assert texts(user)[1] == ("image", "image/jpeg", "[image image/jpeg, 1.0 KB]")
    assert texts(model) == [("tool_call", "see", '{\n  "x": 1\n}')]
    assert result.parts[0].kind == "tool_result"
    answer = conversation.answer
    assert (answer.text, answer.finish_reason, answer.usage["candidatesTokenCount"]) == ("A dog.", "STOP", 2)


def test_ollama_chat_ndjson_stream_and_generate_whole():
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": "hi", "images": ["QUJD"]}],
            "options": {"temperature": 0, "num_predict": 8}}  # fmt: skip
    lines = fake_upstream.ollama_stream(body, "echo: hi there", error=False)
    conversation = conversation_of(
        cassette("http://localhost:11434/api/chat", body, streamed(lines, "application/x-ndjson"))
    )
    assert conversation.shape == OLLAMA
    assert conversation.parameters == {"temperature": 0, "num_predict": 8}
    assert texts(conversation.turns[0]) == [("text", "", "hi"), ("image", "", "[image unknown type, 3 B]")]
    answer = conversation.answer
    assert (answer.text, answer.finish_reason) == ("echo: hi there", "stop")
    assert answer.usage == {"prompt_eval_count": 5, "eval_count": 3}
    assert answer.timeline[-1].name == "done"

    generate = {"model": "llama3.2", "prompt": "Why is the sky blue?", "system": "Short.", "stream": False}
    reply = {"model": "llama3.2", "response": "Rayleigh.", "done": True, "done_reason": "stop", "eval_count": 2}
    conversation = conversation_of(cassette("http://localhost:11434/api/generate", generate, whole(reply)))
    assert [turn.role for turn in conversation.turns] == ["system", "user"]
    assert conversation.last_user_message == "Why is the sky blue?"
    assert conversation.answer.text == "Rayleigh."


def test_a_stream_stored_whole_as_text_is_cut_by_the_same_splitter():
    body = {"model": "claude-test-model", "messages": [{"role": "user", "content": "hi"}]}
    text = "".join(fake_upstream.anthropic_stream(body, "echo: hi", error=False))
    response = {"status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": "text", "body": text}
    answer = conversation_of(cassette("https://api.anthropic.com/v1/messages", body, response)).answer
    assert answer.streamed and answer.text == "echo: hi"
    assert answer.first_event_ms is None and answer.timeline[0].ms is None


@pytest.mark.parametrize(
    "response",
    [
        whole({"data": [{"embedding": [0.1, 0.2]}], "object": "list"}),
        {"status": 200, "headers": {"content-type": "text/plain"}, "body_format": "text", "body": "plain words"},
        {"status": 200, "headers": {}, "body_format": "base64", "body": "AAEC"},
        whole(["a", "list"]),
        streamed(["data: not json\n\n", "data: {\n\n"]),
    ],
    ids=["embeddings-json", "text", "base64", "json-list", "broken-stream"],
)
def test_unknown_shapes_fall_back_to_readable_content(response):
    conversation = conversation_of(cassette("https://api.example.com/v1/anything", {"odd": [1, 2]}, response))
    assert conversation.shape == UNKNOWN
    assert [(p.kind, p.text) for p in conversation.turns[0].parts] == [("json", '{\n  "odd": [\n    1,\n    2\n  ]\n}')]
    answer = conversation.answer
    assert answer.parts or answer.timeline  # something readable, never an exception


def test_a_cassette_missing_its_parts_does_not_raise():
    conversation = conversation_of({"request": "nonsense", "response": {"body_format": "json", "body": 3}})
    assert (conversation.shape, conversation.turns, conversation.answer.parts[0].text) == (UNKNOWN, [], "3")


def test_a_chat_refusal_is_a_labelled_part_and_not_the_answers_text():
    reply = {"model": "gpt-4o", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None, "refusal": "I can't."}, "finish_reason": "stop"},
        {"index": 1, "message": {"role": "assistant", "content": "Sure."}, "finish_reason": "stop"},
    ]}  # fmt: skip
    answer = conversation_of(cassette("https://api.openai.com/v1/chat/completions", {}, whole(reply))).answer
    assert (answer.text, answer.refusal, answer.choices) == ("Sure.", "I can't.", 2)
    assert [(p.kind, p.name) for p in answer.parts] == [("text", "refusal"), ("text", "")]


def test_anthropic_thinking_is_reasoning_not_text():
    reply = {"type": "message", "model": "claude-sonnet-4", "stop_reason": "end_turn", "content": [
        {"type": "thinking", "thinking": "Hmm.", "signature": "s"}, {"type": "text", "text": "Paris."}]}  # fmt: skip
    answer = conversation_of(cassette("https://api.anthropic.com/v1/messages", {"messages": []}, whole(reply))).answer
    assert answer.text == "Paris." and [(p.name, p.text) for p in answer.parts] == [
        ("thinking", "Hmm."),
        ("", "Paris."),
    ]


def test_embeddings_inputs_and_vectors():
    body = {"model": "text-embedding-3-small", "input": ["first", "second"], "encoding_format": "base64"}
    reply = {"object": "list", "model": "text-embedding-3-small", "data": [
        {"object": "embedding", "index": 0, "embedding": "AAAA"}, {"object": "embedding", "index": 1, "embedding": [0.5]}],
        "usage": {"prompt_tokens": 2, "total_tokens": 2}}  # fmt: skip
    conversation = conversation_of(cassette("https://api.openai.com/v1/embeddings", body, whole(reply)))
    assert conversation.shape == OPENAI_EMBEDDINGS and conversation.first_user_message == "first"
    assert [(p.kind, p.text[:22]) for p in conversation.answer.parts] == [
        ("embedding", "[embedding 4 base64 ch"),
        ("embedding", "[embedding 1 values, s"),
    ]
    assert not conversation.answer.raw


def test_bedrock_converse_answer():
    reply = {"output": {"message": {"role": "assistant", "content": [
        {"text": "Let me check."}, {"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Oslo"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 3, "outputTokens": 4}}  # fmt: skip
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    body = {"messages": [{"role": "user", "content": [{"text": "Weather in Oslo?"}]}]}
    conversation = conversation_of(cassette(url, body, whole(reply)))
    assert conversation.first_user_message == "Weather in Oslo?"
    answer = conversation.answer
    assert (answer.text, answer.finish_reason, [p.name for p in answer.tool_calls]) == (
        "Let me check.",
        "tool_use",
        ["weather"],
    )


def test_only_a_body_no_reader_knows_is_raw():
    unknown = conversation_of(cassette("https://api.example.com/v1/models", None, whole({"data": [{"id": "m"}]})))
    error = conversation_of(
        cassette("https://api.openai.com/v1/chat/completions", {}, whole({"error": {"message": "no"}}))
    )
    assert unknown.answer.raw and not error.answer.raw
    assert [(p.kind, p.name) for p in error.answer.parts] == [("json", "error")]
