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

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from senri.answers import Fallback, Validator, first_valid, json_objects, split_reasoning  # noqa: F401 (re-exported)
from senri.backends.base import ChatRequest, ChatResponse, Message, request_schema  # noqa: F401 (re-exported)
from senri.calls import CallTally
from senri.methods.base import Method



@dataclass
class StructuredReply:
    value: dict | None
    text: str
    attempts: int
    error: str | None = None
    #: A reasoning model's thinking (``<think>…</think>``), cut off before the JSON was read; kept for the trace.
    reasoning: str | None = None
    #: Every attempt's reply text, in order (a forced answer's last chance reads them with the answer parser).
    texts: list[str] = field(default_factory=list)
    #: What a context guard left out or shortened to fit the request (or the completion limit it lowered).
    context_trim: dict[str, Any] | None = None
    #: What the call cost over all its attempts (repairs included), and the prompt it was first sent, as text
    #: (images as markers), shortened by :func:`trace_prompt`: the question browser shows them per call.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    prompt: str = ""
    #: The attempts sent back for repair, in order: each reply (cut to :data:`TRACE_REPLY_CHARS`) and why it was
    #: rejected, with the repair turn that followed — a repaired call's record shows every call it counted.
    rejected: list[dict[str, str]] = field(default_factory=list)

    def record(self, purpose: str) -> dict[str, Any]:
        """The trace entry of this call."""
        entry: dict[str, Any] = {"call": purpose, "attempts": self.attempts, "reply": self.value,
                                 "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                                 "seconds": round(self.seconds, 3), "prompt": self.prompt}
        if self.reasoning:
            entry["reasoning"] = self.reasoning
        if self.context_trim:
            entry["context_trim"] = self.context_trim
        if self.rejected:
            entry["rejected_attempts"] = self.rejected
        if self.value is None:
            entry["failure"] = self.error or "malformed"
            entry["raw"] = self.text[:500]
        return entry


#: Characters of a call's prompt kept in its trace entry. A memory method's prompt repeats the video's memory on
#: every call (kilobytes per call, tens of calls per question); the head (instructions, question) and the tail
#: (the latest memories, the reply form) say what the call asked, and the cut says how much was left out.
TRACE_PROMPT_CHARS = 6000
#: Characters of a rejected attempt's reply kept in the trace (the reply that was sent back for repair).
TRACE_REPLY_CHARS = 2000


def trace_prompt(request: ChatRequest, limit: int = TRACE_PROMPT_CHARS) -> str:
    """The request's messages as ``role: text`` blocks (each image or video a ``[image]`` / ``[video]`` marker),
    cut in the middle to ``limit`` characters with a note of how many were left out."""
    blocks = []
    for message in request.messages:
        parts = [p if isinstance(p, str) else f"[{type(p).__name__.removesuffix('Part').lower()}]"
                 for p in message.content]
        blocks.append(f"{message.role}: {''.join(parts)}")
    text = "\n\n".join(blocks)
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[len(text) - limit // 3:]
    return f"{head}\n… [{len(text) - len(head) - len(tail):,} characters left out] …\n{tail}"


def call_record(request: ChatRequest, response: ChatResponse) -> dict[str, Any]:
    """The trace entry of one unstructured call (an answer, a controller turn, a retriever call), in the form
    :meth:`StructuredReply.record` gives structured ones: the prompt it was sent (images as markers), the reply,
    its reasoning, letter log-probabilities, cost and failure, so the question browser shows every call of
    every method. ``transport_attempts``: the backend's own resends of the request (not repairs)."""
    entry: dict[str, Any] = {"call": request.purpose or "answer", "attempts": 1,
                             "reply": response.text, "prompt_tokens": response.prompt_tokens,
                             "completion_tokens": response.completion_tokens, "seconds": round(response.latency_s, 3),
                             "prompt": trace_prompt(request)}
    _, reasoning = split_reasoning(response.text or "")
    if reasoning:
        entry["reasoning"] = reasoning
    if response.letter_logprobs is not None:
        entry["letter_logprobs"] = response.letter_logprobs
    if response.attempts > 1:
        entry["transport_attempts"] = response.attempts
    if response.error:
        entry["failure"] = response.error
    return entry


#: Extra readers of a reply's objects, tried after JSON (VideoLucy's released parser also takes Python literals).


def ask_json(method: Method, messages: tuple[Message, ...], schema: Mapping[str, Any], validate: Validator,
             repair: str, purpose: str, tally: CallTally, retries: int = 1, max_tokens: int | None = None,
             fallback: Fallback | None = None,
             send: Callable[[list[ChatRequest]], list[ChatResponse]] | None = None) -> StructuredReply:
    """One structured call (plus up to ``retries`` repairs), booked into ``tally``: :func:`ask_json_many` of
    one request, schema-constrained where the backend can be. ``repair`` is the repair turn's text, rendered by
    the caller from its prompt set (no wording lives here)."""
    sampling = method.sampling()
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    request = ChatRequest(messages=messages, json_schema=request_schema(method.context.backend, schema),
                          purpose=purpose, **sampling)
    return ask_json_many(method, [request], validate, repair, tally, retries, send=send, fallback=fallback)[0]


def ask_json_many(method: Method, requests: list[ChatRequest], validate: Validator, repair: str,
                  tally: CallTally, retries: int = 1,
                  send: Callable[[list[ChatRequest]], list[ChatResponse]] | None = None,
                  fallback: Fallback | None = None) -> list[StructuredReply]:
    """Structured calls sent as one batch, each malformed reply (a reply cut at the token limit included)
    repaired up to ``retries`` times, every round's repairs batched too; one reply per request, in order.

    ``send`` sends a batch (default ``method.chat_many``; a caller with its own parallel/sequential switch
    passes that). Every request is booked into ``tally``. A repair turn (purpose ``<purpose>:repair``) quotes
    the reply without its reasoning: resending a long think block would only spend the context window. A
    reply keeps the latest reasoning the model gave; a failed call ends that request's repairs."""
    send = send or method.chat_many
    replies = [StructuredReply(None, "", 0, prompt=trace_prompt(request)) for request in requests]
    pending = list(enumerate(requests))
    while pending:
        batch = [request for _, request in pending]
        responses = send(batch)
        tally.add_all(batch, responses)
        repairs: list[tuple[int, ChatRequest]] = []
        for (i, request), response in zip(pending, responses):
            reply = replies[i]
            reply.attempts += 1
            reply.prompt_tokens += response.prompt_tokens
            reply.completion_tokens += response.completion_tokens
            reply.seconds += response.latency_s
            if response.error:
                reply.text, reply.error = "", f"model call failed: {response.error}"
                continue
            reply.text = response.text or ""
            reply.texts.append(reply.text)
            body, reasoning = split_reasoning(reply.text)
            reply.reasoning = reasoning or reply.reasoning
            reply.value = first_valid(body, validate, fallback)
            if reply.value is not None:
                reply.error = None
                continue
            reply.error = "malformed JSON after repair" if reply.attempts > 1 else "malformed JSON"
            if reply.attempts <= retries:
                reply.rejected.append({"reply": reply.text[:TRACE_REPLY_CHARS], "failure": reply.error,
                                       "repair_prompt": repair})
                messages = request.messages + (Message.text("assistant", body), Message.text("user", repair))
                repairs.append((i, replace(request, messages=messages, purpose=f"{requests[i].purpose}:repair")))
        pending = repairs
    return replies
