"""One question's model calls, booked: what an answering method, and the memory store it searches on the
question's behalf, add to the question's prediction row (tokens, latency, errors, run-health and behaviour
counts). It sits below both, so a store books into the tally without importing the methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from senri.backends.base import ChatRequest, ChatResponse
from senri.records import BEHAVIOUR_COUNTS, HEALTH_COUNTS, STORE_COUNTS


def is_timeout(error: str) -> bool:
    """Whether a call's error says it ran out of time (httpx, vLLM and llama.cpp word it differently)."""
    text = error.lower()
    return "timed out" in text or "timeout" in text or "deadline" in text


@dataclass
class CallTally:
    """Bookkeeping of one question's model calls: what goes into its prediction row."""

    n_llm_calls: int = 0
    n_vlm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    #: The memory's captioner: calls made (computed and failed), captions reused from the caption cache (no
    #: call), its tokens and model seconds. Kept apart from the agent model's tokens and latency above.
    caption_calls: int = 0
    captions_reused: int = 0
    caption_prompt_tokens: int = 0
    caption_completion_tokens: int = 0
    caption_s: float = 0.0
    #: Run-health counts (:data:`senri.records.HEALTH_COUNTS`), written to the prediction row as columns.
    health: dict[str, int] = field(default_factory=dict)
    #: Behaviour counts (:data:`senri.records.BEHAVIOUR_COUNTS`): what the method did, also columns of the row.
    behaviour: dict[str, int] = field(default_factory=dict)
    #: The memory store's share of the run-health counts (:meth:`book_store`).
    store: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to one run-health count; an unknown name is a programming error, not a new column."""
        if name not in HEALTH_COUNTS:
            raise KeyError(f"unknown run-health count {name!r}; known: {', '.join(HEALTH_COUNTS)}")
        self.health[name] = self.health.get(name, 0) + int(n)

    def book_store(self, counts: Mapping[str, int]) -> None:
        """Book the counts the question's memory store carries as a whole (``question_counts``): added to the
        run-health counts like any other, and remembered as the store's share (:data:`STORE_COUNTS`) so the
        report counts them once per store, not once per question."""
        for name, n in counts.items():
            self.count(name, n)
            if name in STORE_COUNTS:
                self.store[name] = self.store.get(name, 0) + int(n)

    def did(self, name: str, n: int = 1) -> None:
        """Add ``n`` to one behaviour count (:data:`senri.records.BEHAVIOUR_COUNTS`); an unknown name raises."""
        if name not in BEHAVIOUR_COUNTS:
            raise KeyError(f"unknown behaviour count {name!r}; known: {', '.join(BEHAVIOUR_COUNTS)}")
        self.behaviour[name] = self.behaviour.get(name, 0) + int(n)

    def add_captions(self, calls: int, reused: int, prompt_tokens: int, completion_tokens: int, seconds: float,
                     is_vlm: bool) -> None:
        """Book a question's captioner work; a VLM captioner's calls are also VLM calls (``n_vlm_calls``)."""
        self.caption_calls += calls
        self.captions_reused += reused
        self.caption_prompt_tokens += prompt_tokens
        self.caption_completion_tokens += completion_tokens
        self.caption_s += seconds
        if is_vlm:
            self.n_vlm_calls += calls

    def add(self, request: ChatRequest, response: ChatResponse) -> None:
        if request.n_images():
            self.n_vlm_calls += 1
        else:
            self.n_llm_calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.latency_s += response.latency_s
        # Every attempt that ran out of time, as the backend counted them (a retry that then succeeded included);
        # a response without the count (a backend without its own deadline, an older cache) by its error's words.
        timed_out = response.timed_out_attempts or int(bool(response.error) and is_timeout(response.error or ""))
        if timed_out:
            self.count("timeouts", timed_out)
        if response.error:
            self.errors.append(f"{request.purpose or 'call'}: {response.error}")

    def add_all(self, requests: Sequence[ChatRequest], responses: Sequence[ChatResponse]) -> None:
        for request, response in zip(requests, responses):
            self.add(request, response)
