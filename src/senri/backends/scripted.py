"""``scripted`` backend, for tests only: replays responses from a JSONL file instead of running a model.

Each line is a rule ``{"match": "text", "text": "...", ...}``; a request gets the first rule whose ``match``
occurs in its last user message (a rule without ``match`` matches anything; a list of texts matches when every
one occurs, so a script can answer one role of one question, e.g. ``["Where was I", "[r1]"]``). Optional fields:
``letter_logprobs`` (a dict), ``finish_reason`` (default ``stop``; ``length`` stands for a reply cut at its
token limit), ``tool_calls`` (a list of ``{"name", "arguments"}``, returned when the request offers tools;
``images``/``tools`` in the model config switch those capabilities), ``error`` (the call fails with this
message), ``delay_s`` (sleep first, to
let tests kill a run mid-call, or to stand for a model's latency), ``prompt_tokens`` / ``completion_tokens``.
Every request is appended to ``record`` (a JSONL file) when configured, so tests can inspect exactly what a
method sent. A rule with ``repetition_penalty`` matches only requests sent with that penalty (null: none), so a
script can answer a captioner's retry differently. ``concurrency`` (default 1) answers up to that many requests
of one batch at once, as a server with that many slots would. A context limit in the config (``context_tokens``,
``n_ctx``; ``max_images``) is enforced as an engine enforces it: a request past it fails
(:func:`senri.backends.budget.overflow`). A config with ``reasoning: true`` and ``reasoning_parser`` stands for a
backend that applies a schema after the thinking.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from senri.backends.base import (Backend, BackendError, Capabilities, ChatRequest, ChatResponse, reasoning_parser,
                                 stop_match)
from senri.backends.budget import overflow


class ScriptedBackend(Backend):
    kind = "scripted"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        script = config.get("script")
        if not script or not Path(script).is_file():
            raise BackendError(f"model config script: scripted backend needs an existing JSONL file, got {script!r}")
        self.rules = [json.loads(line) for line in Path(script).read_text().splitlines() if line.strip()]
        self.record = Path(config["record"]) if config.get("record") else None
        self.concurrency = max(1, int(config.get("concurrency", 1)))
        self._record_lock = threading.Lock()

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return Capabilities(images=bool(config.get("images", True)), video=bool(config.get("video", False)),
                            json_schema=True, logprobs=True, tools=bool(config.get("tools", False)),
                            schema_after_reasoning=reasoning_parser(config) is not None)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "script": Path(self.config["script"]).read_text()}

    def complete(self, request: ChatRequest) -> ChatResponse:
        prompt = next((m.plain_text() for m in reversed(request.messages) if m.role == "user"), "")
        if self.record is not None:
            with self._record_lock, self.record.open("a") as handle:
                handle.write(json.dumps({"purpose": request.purpose, "payload": request.cache_payload()}) + "\n")
        too_big = overflow(self, request)
        if too_big is not None:  # as an engine rejects a prompt past its context window
            return ChatResponse(text="", error=f"scripted backend: request exceeds the model's limits: {too_big}")
        for rule in self.rules:
            if "repetition_penalty" in rule and rule["repetition_penalty"] != request.repetition_penalty:
                continue
            if _matches(rule.get("match"), prompt):
                time.sleep(float(rule.get("delay_s", 0)))
                if rule.get("error"):
                    return ChatResponse(text="", error=str(rule["error"]))
                text, matched = stop_match(str(rule.get("text", "")), request.stop)
                stopped = matched is not None
                return ChatResponse(
                    text=text,
                    prompt_tokens=int(rule.get("prompt_tokens", len(prompt.split()))),
                    completion_tokens=int(rule.get("completion_tokens", len(str(rule.get("text", "")).split()))),
                    latency_s=float(rule.get("latency_s", 0.01)),
                    letter_logprobs=rule.get("letter_logprobs"),
                    tool_calls=([{"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                                  else json.dumps(c["arguments"])} for c in rule.get("tool_calls") or []]
                                if request.tools else None),
                    finish_reason="stop" if stopped else str(rule.get("finish_reason", "stop")),
                    stop_reason=matched or "",
                )
        return ChatResponse(text="", error=f"scripted backend: no rule matches the prompt {prompt[:80]!r}")

    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[int, ChatResponse], None] | None = None) -> list[ChatResponse]:
        if self.concurrency == 1 or len(requests) < 2:
            return super().complete_many(requests, on_done)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self.complete, r) for r in requests]
            responses = []
            for i, future in enumerate(futures):
                responses.append(future.result())
                if on_done is not None:
                    on_done(i, responses[-1])
        return responses


def _matches(match: str | Sequence[str] | None, prompt: str) -> bool:
    """A rule's ``match``: None matches any prompt, a text one containing it, a list one containing every text."""
    if match is None:
        return True
    return match in prompt if isinstance(match, str) else all(str(part) in prompt for part in match)
