"""M3-Agent's own answering: the controller loop over its memory graph (shared/spec/omni_memory.md M-L1..M-L4,
MP3..MP6; :mod:`senri.memory.m3_agent.control`).

Per question: the system turn (MP3 with the question — S-3b: senri's question block with its options), the first
user turn "Searched knowledge: {}", then up to 5 rounds of the controller (thinking on; its raw reply, thinking
included, kept in the history) and a search turn after each non-answer. The answer is the content after
"Content: " of the first ``[Answer]``; its letter is read by senri's answer parser (S-3b). A question whose five
replies hold no Answer has no prediction (the release's gpt_eval False): counted wrong, not an error.

Sampling: the controller samples (T 0.6, top_p 0.95); the release sets no per-request seed (M-Q2), senri seeds each
round from the run's seed, the question and the round (recorded). A video whose memory the release would have
lost at build time (:class:`senri.memory.m3_agent.store.VideoLost`) fails each of its questions with the reason.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from senri.answers import parse_answer, question_block
from senri.backends.base import ChatRequest, Message
from senri.backends.embeddings import EmbeddingError
from senri.memory.m3_agent.control import ControlPrompts, run_controller
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.records import Question


class QuestionFailed(RuntimeError):
    pass


class M3Agent(Method):
    approach: ClassVar[str] = "persistent_memory"
    uses_model: ClassVar[bool] = True
    uses_memory: ClassVar[bool] = True
    extra_code: ClassVar[tuple[str, ...]] = ("memory/m3_agent/store.py", "memory/m3_agent/control.py",
                                             "memory/m3_agent/retrieval.py", "memory/m3_agent/graph.py")

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        from senri.memory.store import store_class

        if context.memory_system != "m3_agent" or context.memory_store is None:
            raise ValueError(f"method {context.method_name!r} reads an M3-Agent store (memory_system: m3_agent), "
                             f"got {context.memory_system!r}")
        self.store = store_class("m3_agent").open(context.memory_store, dict(context.memory_system_config or {}),
                                                  context.video)
        self.store.response_cache = context.response_cache  # query vectors kept beside the controller's calls
        text = self.prompts()
        self.control_prompts = ControlPrompts(system=text["system"].text, instruction=text["instruction"].text,
                                              last_round=text["last_round"].text, empty_note=text["empty_note"].text)
        self.rounds = int(context.method_config.get("rounds", 5))

    def _seed(self, question: Question, round_index: int) -> int:
        key = f"{self.context.seed}:{question.qid}:{round_index}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")

    def _embedding_calls(self, before: dict[str, Any], tally: CallTally) -> dict[str, Any]:
        """This question's query-embedding calls (an API text embedder's counts since ``before``), for its trace;
        their timed-out attempts are booked in the question's ``timeouts`` like any model call's."""
        now = self.store.embedding_calls().get("embedding_calls")
        if not now:
            return {}
        calls = {k: round(v - before.get(k, 0), 6) if isinstance(v, float) else v - before.get(k, 0)
                 for k, v in now.items()}
        if calls["timed_out_attempts"]:
            tally.count("timeouts", calls["timed_out_attempts"])
        return {"embedding_calls": calls}

    def answer(self, question: Question) -> MethodAnswer:
        tally = CallTally()
        tally.book_store(self.store.question_counts())
        if self.store.lost:
            tally.errors.append(f"m3_agent: no memory for this video: {self.store.lost}")
            return MethodAnswer(None, None, False, tally, {"lost": self.store.lost})
        sampling = self.sampling()
        rounds: list[int] = []
        before = dict(self.store.embedding_calls().get("embedding_calls") or {})

        def generate(conversation: list[dict[str, str]]) -> str:
            rounds.append(len(rounds))
            request = ChatRequest(tuple(Message.text(m["role"], m["content"]) for m in conversation),
                                  max_tokens=self.role_max_tokens("controller"),
                                  temperature=float(sampling.get("temperature", 0.6)),
                                  top_p=float(sampling.get("top_p", 0.95)),
                                  seed=self._seed(question, len(rounds)), purpose=f"m3_agent:round:{len(rounds)}")
            response = self.context.backend.complete(request)
            tally.add(request, response)
            tally.did("rounds")
            if response.error:
                raise QuestionFailed(f"controller call failed: {response.error}")
            return response.text

        text = question_block(question.question, question.options)
        try:
            trace = run_controller(text, generate, self.store.fresh_graph, self.store.embed, self.control_prompts,
                                   self.rounds)
        except (QuestionFailed, EmbeddingError) as exc:  # a controller or query-embedding call that failed
            tally.errors.append(f"m3_agent: {exc}")
            return MethodAnswer(None, None, False, tally,
                                {"rounds": len(rounds), **self._embedding_calls(before, tally)})
        parsed = parse_answer(trace.response, question.options) if trace.response is not None else None
        record: dict[str, Any] = {"rounds": trace.rounds, "response": trace.response,
                                  "held_clips": trace.held_clips, "retriever": self.store.retriever,
                                  "seeds": [self._seed(question, r + 1) for r in rounds],
                                  **self._embedding_calls(before, tally)}
        letter = parsed.letter if parsed is not None else None
        return MethodAnswer(letter, trace.response, letter is not None, tally, record)
