"""Methods that answer with one prompt per question: the question, its options and optional visual input.

``answer_format`` picks how the letter is obtained:
- ``json``: structured output against :func:`senri.answers.answer_schema` (falls back to ``text`` on a
  backend without JSON-schema support; the trace says so);
- ``text``: free text, read by the strict parser of :mod:`senri.answers`;
- ``logprobs``: the arg-max of the question's letters' first-token log-probabilities; with ``debias: true`` the
  question is asked under the N cyclic reorderings of its N options and each option's log-probabilities
  are summed over its N positions (no labels needed).

Every form offers exactly the question's letters (A–D for four options, A–F for six): the prompt lists its
options and names its letters, the schema's enum and the scored letters are those.
"""

from __future__ import annotations

from typing import Any, Sequence

from senri.answers import answer_schema, best_letter, cyclic_order, debiased_scores, parse_answer, question_prompt
from senri.backends.base import ChatRequest, ChatResponse, Message, Part
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import call_record, request_schema
from senri.records import Question, letters_in_words, option_letters

ANSWER_FORMATS = ("json", "text", "logprobs")
#: Completion length of a ``logprobs`` answer: the letter's log-probabilities are read from the first generated
#: token, so one token (the letter) is all the request generates. The answer format fixes it; it is not a
#: budget, hence not a ``max_tokens`` setting of the method config.
LOGPROB_ANSWER_TOKENS = 1
#: How the trace's rule line counts a question's letters ("the four letters'" for a SENRI question, as before).
_COUNT_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


class PromptedChoice(Method):
    """Base of ``blind`` and ``direct``: subclasses supply the visual parts and the context line."""

    def __init__(self, context: RunContext) -> None:
        from senri.prompts import prompt_set

        super().__init__(context)
        config = context.method_config
        self.prompt_set = prompt_set(config.get("prompts") or "answer", config.get("prompts_dir"))
        self.requested_format = str(config.get("answer_format", "json"))
        self.debias = bool(config.get("debias", False))
        #: Greedy decoding whatever the model config's temperature (the paper's direct perception is greedy).
        self.greedy = bool(config.get("greedy", False))
        capabilities = context.backend.capabilities if context.backend is not None else None
        self.answer_format = self.requested_format
        if capabilities is not None:
            if self.requested_format == "json" and not capabilities.json_schema:
                self.answer_format = "text"
            if self.requested_format == "logprobs" and not capabilities.logprobs:
                raise ValueError(f"method {context.method_name!r}: answer_format logprobs needs a backend with "
                                 f"log-probabilities; model {context.model_name!r} ({context.model_config.get('backend')}) has none")
        if self.debias and self.answer_format != "logprobs":
            raise ValueError(f"method {context.method_name!r}: debias needs answer_format: logprobs")

    # Subclass hooks ----------------------------------------------------------------------------------
    def visual_parts(self, question: Question) -> list[Part]:
        return []

    def context_text(self, question: Question) -> str:
        return ""

    def seen_frames(self) -> list[float]:
        """Source times of the frames every question's prompt carries (none for ``blind``): booked as
        ``frames_seen`` and kept in the trace, where the question browser draws them on the time strip."""
        return []

    # ------------------------------------------------------------------------------------------------
    def _request(self, question: Question, options: list[str], purpose: str) -> ChatRequest:
        letters = option_letters(len(options))
        instruction = self.prompt_set.render(f"format_{self.answer_format}", letters=letters_in_words(letters))
        text = question_prompt(question.question, options, self.answer_format, self.context_text(question), instruction)
        system = self.context.method_config.get("system")
        messages = ((Message.text("system", system),) if system else ()) + (
            Message("user", (*self.visual_parts(question), text)),)
        sampling = self.sampling()
        sampling["max_tokens"] = self.role_max_tokens("answer")
        if self.greedy:
            sampling.update(temperature=0.0, top_p=1.0)
        if self.answer_format == "logprobs":
            sampling["max_tokens"] = LOGPROB_ANSWER_TOKENS
        return ChatRequest(
            messages=messages,
            # A reasoning model thinks first: the schema only where the backend applies it after the thinking.
            json_schema=request_schema(self.context.backend, answer_schema(len(options)))
            if self.answer_format == "json" else None,
            letter_logprobs=letters if self.answer_format == "logprobs" else (),
            purpose=purpose,
            **sampling,
        )

    def _requests(self, question: Question) -> list[ChatRequest]:
        options = list(question.options)
        if self.answer_format != "logprobs":
            return [self._request(question, options, "answer")]
        shifts = range(len(options)) if self.debias else range(1)
        return [self._request(question, [options[i] for i in cyclic_order(k, len(options))], f"answer:shift{k}")
                for k in shifts]

    def _finish(self, question: Question, requests: Sequence[ChatRequest], responses: Sequence[ChatResponse],
                tally: CallTally) -> MethodAnswer:
        options = list(question.options)
        trace: dict[str, Any] = {"answer_format": self.answer_format,
                                 "calls": [call_record(q, r) for q, r in zip(requests, responses)]}
        frames = self.seen_frames()
        if frames:
            trace["frames_s"] = frames
            tally.did("frames_seen", len(frames))
        if self.answer_format != self.requested_format:
            trace["format_fallback"] = f"{self.requested_format} → {self.answer_format} (backend capability)"
        if any(r.error for r in responses):
            return MethodAnswer(None, None, False, tally, trace)
        if self.answer_format != "logprobs":
            parsed = parse_answer(responses[0].text, options)
            trace["parse_rule"] = parsed.rule
            return MethodAnswer(parsed.letter, responses[0].text, parsed.ok, tally, trace)
        per_shift = {k: r.letter_logprobs or {} for k, r in enumerate(responses)}
        letters = option_letters(len(options))
        scores = debiased_scores(per_shift, len(options))
        letter = best_letter(scores)
        for k, call in enumerate(trace["calls"]):
            # What each shown letter stood for under this ordering: the browser labels every score by the
            # original option, so the N calls' letters read as one vote.
            call["shown_as"] = {letters[position]: letters[original]
                                for position, original in enumerate(cyclic_order(k, len(options)))}
        trace.update({"debias": self.debias, "letter_logprobs": per_shift, "scores": scores,
                      "scores_by_letter": dict(zip(letters, scores)),
                      "rule": ("the arg-max of each original option's log-probabilities summed over the orderings it "
                               "was shown in" if self.debias else
                               f"the arg-max of the {_COUNT_WORDS.get(len(letters), len(letters))} letters' "
                               "log-probabilities")
                      + "; none on a tie or when no letter was scored"})
        return MethodAnswer(letter, responses[0].text, letter is not None, tally, trace)

    def answer(self, question: Question) -> MethodAnswer:
        return self.answer_many([question])[0]

    def answer_many(self, questions: Sequence[Question]) -> list[MethodAnswer]:
        """All requests of these questions in one batch: vLLM batches them, the openai backend overlaps them."""
        per_question = [self._requests(q) for q in questions]
        flat = [r for requests in per_question for r in requests]
        responses = self.chat_many(flat)
        answers, start = [], 0
        for question, requests in zip(questions, per_question):
            mine = responses[start:start + len(requests)]
            start += len(requests)
            tally = CallTally()
            tally.add_all(requests, mine)
            answers.append(self._finish(question, requests, mine, tally))
        return answers
