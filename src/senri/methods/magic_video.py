"""MAGIC-Video's original workflow over its store (G-L1..L3): search rounds, then one QA call with images.

The controller (G14) searches the ``magic_video`` store with one complete-sentence query per round — each
search is one PPR pass with quotas plus the round's chain facts, or the time bypass (G-R*) — and answers after
at most ``max_rounds``; the answer is MAGIC-Video's own QA call (G15): the retrieved memory rendered in time
order, semantic triples last, with frames of the retrieved clips chosen as the release chooses them (1 fps, or 16
spread over the whole clip when 1 fps gives more; clips in retrieval order, ≤ 64 frames in all,
:func:`qa_frame_plan`); when that call fails or comes back empty, it is asked once more without images (the
released code's text-only retry).

Everything else — rounds, repair, forced answer, the trace, the tally, ``SearchContext.ask`` for the store's
time extractor — is :class:`senri.methods.agent.MemorySearch`'s, so SENRI-Agent over the same store differs
only where the papers do.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from senri.answers import question_block
from senri.backends.base import ChatRequest, ImagePart, Message
from senri.methods.agent import Episode, MemorySearch
from senri.methods.base import RunContext


def release_frame_indices(start_s: float, end_s: float, video_fps: float, n_frames: int, fps: float = 1.0,
                          max_frames: int | None = 16) -> list[int]:
    """The frame indices the release reads for one retrieved clip (G-R5, its ``_extract_frames``), on a video of
    ``n_frames`` frames at ``video_fps``: the clip's span clamped to the video, its first frame int(start · fps_v)
    to its last int(end · fps_v) (≤ the video's last frame), every int(fps_v / fps)-th frame — 1 fps — and, when
    that gives more than ``max_frames``, ``max_frames`` frames spread evenly over the whole span instead
    (``linspace(first, last, max_frames)`` truncated to int: both ends included). A span of one frame or less
    gives none."""
    if video_fps <= 0 or n_frames <= 0:
        raise ValueError(f"release_frame_indices: video fps {video_fps} and frame count {n_frames} must be positive")
    duration = n_frames / video_fps
    start = max(0.0, min(float(start_s), duration))
    end = max(start, min(float(end_s), duration))
    first, last = int(start * video_fps), min(int(end * video_fps), n_frames - 1)
    if first >= last:
        return []
    step = max(1, int(video_fps / fps) if fps > 0 else int(video_fps))
    indices = list(range(first, last + 1, step))
    if max_frames is not None and len(indices) > max_frames:
        indices = np.linspace(first, last, max_frames, dtype=int).tolist()
    return indices


def qa_frame_plan(clips: Sequence[tuple[float, float]], video_fps: float, n_frames: int, fps: float = 1.0,
                  per_clip: int = 16, total: int = 64, used: int = 0) -> list[list[int]]:
    """Per clip, in the order given (the release's: retrieval order, round after round), its QA frame indices
    (:func:`release_frame_indices` with at most min(``per_clip``, what the budget has left)); once ``total``
    frames are spent a clip gets none (its caption still goes as text). ``used``: frames spent before."""
    out = []
    for start_s, end_s in clips:
        left = total - used
        if left <= 0:
            out.append([])
            continue
        indices = release_frame_indices(start_s, end_s, video_fps, n_frames, fps, min(per_clip, left))
        used += len(indices)
        out.append(indices)
    return out


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
        """Per retrieved clip, in retrieval order, the times of its QA frames (G-R5, :func:`qa_frame_plan` on the
        video's frame rate and frame count): frame i is read at i / fps, where senri's decoder finds frame i."""
        video = self.context.video
        video_fps = float(video.avg_fps or video.r_fps or 0.0)
        if video_fps <= 0:
            raise ValueError(f"{video.path}: field 'avg_fps' is {video.avg_fps!r}: the QA frames need the frame rate")
        n_frames = int(video.n_frames or round(float(video.duration_s) * video_fps))
        clips = [i for i in ep.retrieved.values() if i.kind == "visual" and i.anchored]
        plan = qa_frame_plan([(c.start_s, c.end_s) for c in clips], video_fps, n_frames, self.qa_fps,
                             self.frames_per_clip, self.max_frames)
        return [[i / video_fps for i in indices] for indices in plan if indices]

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
        if len(kept) < len(parts):  # sized before sending: the last retrieved clips' frames are left out first
            ep.tally.count("context_trims")
            ep.trace["qa_trim"] = {"rule": "drop the last retrieved clips' frames first", "frames_sent": len(kept),
                                   "frames_left_out": len(parts) - len(kept)}
        ep.trace["qa_images"] = len(kept)
        return request(kept)

    def _fit_frames(self, frames: list[Any], request: Any) -> list[Any]:
        """The longest prefix of ``frames`` (retrieval order) whose request fits the model config's limits
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
