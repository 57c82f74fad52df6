"""A deterministic stand-in for a chat model, for grading the measured exercises (5 and 6).

A real model's turn takes as long as the machine makes it take, so a grade that waits on real
turns depends on the machine's load: a loaded grader once timed out on the reference itself.
The stand-in's turns are a script instead: the n-th call with seed s waits ``TURN_SECONDS[(s
+ n) % len]`` seconds, asleep and using no CPU, and answers the same words every time. What
the lease and the bound come to follows from the script, not from how fast the machine is,
and every script turn is long beside a loaded machine's scheduling delays (the renewer's
margin is two thirds of a lease, about 0.4 s).

Its replies stand in for what the chapter measured of small models (exercise 6): handed the
crashed transcript it places the order again, under the same key; handed the shop's records,
which name the key and the ``lookup_order`` rule, it looks the order up. It writes its calls as
text in SmolLM2's ``<tool_call>`` format, read back by the same parser as a real model's.

A receipt made with it says ``backend: scripted``: it shows that the answers' code runs the
measurement correctly, never what renewal or the records do to a real model. That figure is the
receipt a learner makes with the real model (``python learner/exercises.py 5``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence

from lucyshop.models import Reply, _parameter_names, parse_tool_calls

NAME = "scripted stand-in"
# Seconds per turn, cycled: the median of three lies near 0.6 s, the longest is 0.8 s.
TURN_SECONDS = (0.55, 0.7, 0.6, 0.8, 0.5, 0.65)
WORDS = "Thank you for asking , here is what the shop can do today .".split()  # noqa: SIM905
LOOKUP_RULE = re.compile(r'lookup_order\(operation="([^"]+)"\)')


class ScriptedModel:
    """A ``ChatModel`` whose turns are a script: same seed, same waits, same words."""

    file_sha256: str | None = None

    def __init__(self, *, seed: int = 0) -> None:
        self.name = NAME
        self.seed = seed
        self.calls = 0

    def chat(
        self, messages: list[dict], tools: Sequence[dict] = (), max_tokens: int = 256
    ) -> Reply:
        wait = TURN_SECONDS[(self.seed + self.calls) % len(TURN_SECONDS)]
        self.calls += 1
        started = time.perf_counter()
        time.sleep(wait)
        text = _tool_text(messages) if tools else " ".join(WORDS[: max(1, max_tokens)])
        calls = parse_tool_calls(text, _parameter_names(tools)) if tools else ()
        tokens = min(max_tokens, len(text.split()))
        return Reply(text, calls, tokens, time.perf_counter() - started)


def _tool_text(messages: list[dict]) -> str:
    """The recovery reply: look the order up when the last message names its key and the rule,
    else repeat the transcript's last call (place the order again)."""
    last = messages[-1].get("content") or ""
    found = LOOKUP_RULE.search(last)
    if found:
        call = {"name": "lookup_order", "arguments": {"operation": found.group(1)}}
    else:
        placed = next(
            m["tool_calls"][-1]["function"] for m in reversed(messages) if m.get("tool_calls")
        )
        arguments = placed["arguments"]
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        call = {"name": placed["name"], "arguments": arguments}
    return f"<tool_call>[{json.dumps(call)}]</tool_call>"
