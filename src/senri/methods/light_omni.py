"""Light-Omni's own answering loop over its own store (L-L1..L3; issue 62 item 3): per question one reaction
call (LP4, retrieve adapter, the latent read-out and the soft-prompt query vector), one retrieval (12 semantic,
4 episodic with 10 % of their frames; retrieval forced for benchmark questions) and one response call (LP5,
response adapter); the letter is the response's first character.

The model is the system (spec "What a faithful reimplementation must not miss", 6): the run is pinned to the
``light_omni`` model config, the release's patched Qwen2.5-Omni run by the release worker. SENRI adapter choices
(S-3f, recorded in the run's config): START_TIME as released, first-character scoring (``answer_reading:
first_character``; ``parse_answer`` reads the response with senri's parser instead), a video whose build was
lost is kept and each of its questions fails with the reason (the release drops it from its scores, L-Q1).
"""

from __future__ import annotations

from typing import Any, ClassVar

from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.records import Question

#: The method's named deviations from the release (docs/protocol.md "Light-Omni").
DEVIATIONS: dict[str, Any] = {"answer_reading": "first_character"}
ANSWER_READINGS = ("first_character", "parse_answer")


class LightOmni(Method):
    approach: ClassVar[str] = "persistent_memory"
    uses_model: ClassVar[bool] = True
    uses_memory: ClassVar[bool] = True
    extra_code: ClassVar[tuple[str, ...]] = (
        "memory/light_omni/store.py", "memory/light_omni/agent.py", "memory/light_omni/memory.py",
        "memory/light_omni/replies.py", "memory/light_omni/engine.py", "workers/light_omni.py")

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        from senri.memory.store import store_class

        if context.memory_system != "light_omni" or context.memory_store is None:
            raise ValueError(f"method {context.method_name!r} reads a Light-Omni store (memory_system: light_omni), "
                             f"got {context.memory_system!r}")
        self.answer_reading = str(context.method_config.get("answer_reading", "first_character"))
        if self.answer_reading not in ANSWER_READINGS:
            raise ValueError(f"method {context.method_name!r}: answer_reading {self.answer_reading!r} is not one "
                             f"of {', '.join(ANSWER_READINGS)}")
        self.store = store_class("light_omni").open(context.memory_store, dict(context.memory_system_config or {}),
                                                    context.video)
        self._model = None
        self._memory = None

    def model(self):
        """The answering model: the run's model config (pinned: light_omni), a release worker."""
        if self._model is None:
            from senri.memory.light_omni.store import open_engine

            self._model = open_engine({"omni": (self.context.model_name, self.context.model_config)},
                                      f"method {self.context.method_name!r}")
            self._memory = self.store.memory(self._model)
        return self._model

    def answer(self, question: Question) -> MethodAnswer:
        from senri.answers import parse_answer
        from senri.memory.light_omni.agent import answer_question
        from senri.memory.light_omni.engine import LightOmniModelError
        from senri.memory.light_omni.replies import first_character, question_text

        tally = CallTally()
        if self.store.lost:
            tally.errors.append(f"light_omni: the video's memory build was lost ({self.store.lost})")
            return MethodAnswer(None, None, False, tally, {"lost": self.store.lost})
        options = [f"{letter}. {text}" for letter, text in zip(question.letters, question.options)]
        try:
            model = self.model()
            outcome = answer_question(self._memory, model, question_text(question.question, options))
        except (LightOmniModelError, ValueError) as exc:
            tally.errors.append(f"light_omni: {exc}")
            return MethodAnswer(None, None, False, tally)
        tally.n_vlm_calls += len(outcome.calls)
        trace = {"roles": outcome.calls, "query_text": outcome.query_text, "semantic_hits": outcome.semantic_hits,
                 "episodic_hits": outcome.episodic_hits, "is_response": outcome.reaction.is_response,
                 "is_retrieve": outcome.reaction.is_retrieve, "answer_reading": self.answer_reading}
        response = outcome.response
        if self.answer_reading == "parse_answer":
            letter = parse_answer(response, question.letters).letter
        elif not response:  # the release's first-character rule raises IndexError here (L-L3)
            tally.errors.append("light_omni: empty response (the release's first-character scoring raises)")
            return MethodAnswer(None, response, False, tally, trace)
        else:
            letter = first_character(response)
        ok = letter in question.letters
        return MethodAnswer(letter if ok else None, response, ok, tally, trace)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
            self._model = None
