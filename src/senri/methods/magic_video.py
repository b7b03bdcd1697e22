"""MAGIC-Video's original workflow over its store (G-L1..L3): search rounds, then one QA call with images.

The controller (G14) searches the ``magic_video`` store with one complete-sentence query per round — each
search is one PPR pass with quotas plus the round's chain facts, or the time bypass (G-R*) — and answers after
at most ``max_rounds``; the answer is MAGIC-Video's own QA call (G15): the retrieved memory rendered in time
order, semantic triples last, with 1-fps frames of the retrieved clips (≤ 16 per clip, ≤ 64 in all); when that
call fails or gives no letter, it is asked once more without images (the released code's text-only retry).

Everything else — rounds, repair, forced answer, the trace, the tally, ``SearchContext.ask`` for the store's
time extractor — is :class:`senri.methods.agent.MemorySearch`'s, so SENRI-Agent over the same store differs
only where the papers do.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from senri.answers import question_block
from senri.backends.base import ChatRequest, ImagePart, Message
from senri.methods.agent import Episode, MemorySearch
from senri.methods.base import RunContext


class MagicVideoWorkflow(MemorySearch):
    default_prompts: ClassVar[str] = "magic_video"
    #: G-L1: at most ``max_rounds`` controller calls, then the QA call (G15) — always, and no forced round.
    qa_call: ClassVar[bool] = True
    forced_round: ClassVar[bool] = False
    #: MemorySearch's modules and its own; the store's join through its ``extra_code``.
    extra_code: ClassVar[tuple[str, ...]] = (*MemorySearch.extra_code, "methods/agent.py")

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        if self.store.system != "magic_video":
            raise ValueError(f"method {context.method_name!r} is MAGIC-Video's own workflow: it needs "
                             f"memory_system magic_video, not {self.store.system!r}")
        config = context.method_config
        self.frames_per_clip = int(config.get("qa_frames_per_clip", 16))
        self.max_frames = int(config.get("qa_max_frames", 64))
        self.qa_fps = float(config.get("qa_fps", 1.0))

    def _qa_times(self, ep: Episode) -> list[list[float]]:
        """Per retrieved clip, in time order: its frames at ``qa_fps`` (≤ ``frames_per_clip``), ≤ ``max_frames``
        in all (G-R5)."""
        clips = sorted((i for i in ep.retrieved.values() if i.kind == "visual" and i.anchored),
                       key=lambda i: i.start_s)
        out, left = [], self.max_frames
        for clip in clips:
            if left <= 0:
                break
            n = min(self.frames_per_clip, left, max(1, math.floor((clip.end_s - clip.start_s) * self.qa_fps)))
            out.append([clip.start_s + k / self.qa_fps for k in range(n)])
            left -= n
        return out

    def _answer_request(self, ep: Episode, proposed: str | None) -> ChatRequest | None:
        q = ep.question
        text = self.prompt_set.render("answer", context=self.store.render(list(ep.retrieved.values())),
                                      question=question_block(q.question, q.options))
        parts: list[Any] = []
        capabilities = self._capabilities
        if not ep.trace.get("qa_text_only") and capabilities is not None and capabilities.images:
            wanted = self._qa_times(ep)
            if wanted:
                for times, jpegs in self._cells_frames(wanted):
                    parts += [ImagePart(jpeg, t) for t, jpeg in zip(times, jpegs)]
        sampling = self.sampling()
        sampling["max_tokens"] = self.role_max_tokens("answer")

        def request(frames: list[Any]) -> ChatRequest:
            return ChatRequest(messages=(Message("user", (text, *frames)),), purpose="answer", **sampling)

        kept = self._fit_frames(parts, request)
        if len(kept) < len(parts):  # sized before sending: the latest frames are left out first
            ep.tally.count("context_trims")
            ep.trace["qa_trim"] = {"rule": "drop the latest clip frames first", "frames_sent": len(kept),
                                   "frames_left_out": len(parts) - len(kept)}
        ep.trace["qa_images"] = len(kept)
        return request(kept)

    def _fit_frames(self, frames: list[Any], request: Any) -> list[Any]:
        """The longest prefix of ``frames`` (time order) whose request fits the model config's limits
        (:func:`senri.backends.budget.overflow`); all of them when the config states no limit."""
        from senri.backends.budget import overflow

        backend = self.context.backend
        if backend is None or not frames or overflow(backend, request(frames)) is None:
            return frames
        low, high = 0, len(frames) - 1  # the largest n with request(frames[:n]) fitting, by bisection
        while low < high:
            mid = (low + high + 1) // 2
            if overflow(backend, request(frames[:mid])) is None:
                low = mid
            else:
                high = mid - 1
        return frames[:low]

    def _final_answer(self, ep: Episode, proposed: str | None, text: str | None) -> tuple[str | None, str | None]:
        """G-L3: the QA call; when it fails or comes back empty it is asked once more over the text memory
        only (the released code's retry, which drops the images to shorten the input). An unparsable reply is
        not retried (the release retries only a missing answer)."""
        before = len(ep.tally.errors)
        answer, reply = super()._final_answer(ep, proposed, text)
        failed = ep.tally.errors[before:]
        if (failed or not (reply or "").strip()) and not ep.trace.get("qa_text_only"):
            ep.trace["qa_text_only"] = True
            ep.trace["qa_text_only_retry"] = True
            answer, reply = super()._final_answer(ep, proposed, text)
            if answer is not None and failed:  # recovered: the first call's error is the trace's, not the row's
                del ep.tally.errors[before:before + len(failed)]
                ep.trace["qa_error_with_images"] = "; ".join(failed)
        return answer, reply
