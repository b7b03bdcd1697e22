"""Structured (JSON) calls of agentic methods: schema-constrained where the backend can, validated always,
repaired once, and recorded — never an exception for a malformed reply.

Agents (localizers, answerers, controllers) reply with small JSON objects. A backend with JSON-schema
support is constrained to the schema; any other reply is read with :func:`senri.answers.json_objects` and
checked by the caller's validator. A reply that fails is sent back once (``retries``) with the repair prompt
the caller rendered from its method's prompt set (the family's ``repair.txt``, quoting the required form, so a
``prompts_dir`` rewords it and it is part of the prompt digest); if the repair fails too, the call's record
says so and the caller decides (an answerer's malformed reply is "not confident", a forced answer's is a parse
failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from senri.answers import json_objects, split_reasoning
from senri.backends.base import ChatRequest, Message
from senri.methods.base import CallTally, Method

Validator = Callable[[dict], "dict | None"]


@dataclass
class StructuredReply:
    value: dict | None
    text: str
    attempts: int
    error: str | None = None
    #: A reasoning model's thinking (``<think>…</think>``), cut off before the JSON was read; kept for the trace.
    reasoning: str | None = None

    def record(self, purpose: str) -> dict[str, Any]:
        """The trace entry of this call."""
        entry: dict[str, Any] = {"call": purpose, "attempts": self.attempts, "reply": self.value}
        if self.reasoning:
            entry["reasoning"] = self.reasoning
        if self.value is None:
            entry["failure"] = self.error or "malformed"
            entry["raw"] = self.text[:500]
        return entry


def first_valid(text: str, validate: Validator) -> dict | None:
    """The first JSON object in ``text`` (reasoning cut off first) that ``validate`` accepts, validated."""
    body = split_reasoning(text)[0]
    for candidate in json_objects(body):
        checked = validate(candidate)
        if checked is not None:
            return checked
    return None


def ask_json(method: Method, messages: tuple[Message, ...], schema: Mapping[str, Any], validate: Validator,
             repair: str, purpose: str, tally: CallTally, retries: int = 1, max_tokens: int | None = None
             ) -> StructuredReply:
    """One structured call (plus up to ``retries`` repairs), booked into ``tally``. ``repair`` is the repair
    turn's text, rendered by the caller from its prompt set (no wording lives here)."""
    backend = method.context.backend
    constrained = backend is not None and backend.capabilities.json_schema
    sampling = method.sampling()
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    text, attempts = "", 0
    for attempt in range(retries + 1):
        request = ChatRequest(messages=messages, json_schema=schema if constrained else None,
                              purpose=purpose if attempt == 0 else f"{purpose}:repair", **sampling)
        response = method.chat_many([request])[0]
        tally.add(request, response)
        attempts += 1
        if response.error:
            return StructuredReply(None, "", attempts, f"model call failed: {response.error}")
        text = response.text or ""
        reply, reasoning = split_reasoning(text)
        value = first_valid(reply, validate)
        if value is not None:
            return StructuredReply(value, text, attempts, reasoning=reasoning)
        # The repair turn quotes the reply without its reasoning: resending a long think block would
        # only spend the context window.
        messages = messages + (Message.text("assistant", reply), Message.text("user", repair))
    return StructuredReply(None, text, attempts, "malformed JSON after repair", split_reasoning(text)[1])
