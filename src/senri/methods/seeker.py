"""The crop/re-sample harness ParaVT and Video-o3 share (issue 38; ``shared/spec/evidence_seekers.md`` S1–S3).

Both releases show the policy a uniform overview, read time windows out of its reply, decode each window again
from the source video and send the new frames back as a user turn, re-sending the whole history every turn.
What they share lives here, what varies (window grammar, caps, re-sampler rates and budgets, observation text,
termination) lives in each method:

- :meth:`CropSeeker.decode` reads source frames by index on senri's exact decoder (each at the middle of its
  frame interval, so the planned frame is the one decoded) and resizes them bicubically to a size the method's
  rule picks (:func:`senri.resample.smart_resize`); a frame that does not decode is left out and
  counted ``black_frames`` by the caller, as the releases' decoders drop it;
- :meth:`CropSeeker.send` makes one completion of the full history: the request is sized against the model's
  context and image limits first (:func:`senri.backends.budget.overflow`); one that does not fit is not sent
  (the release's call would fail on it) and counted ``context_overflows``, and the episode ends without an
  answer; replies cut at their limit are counted ``truncated_replies``; the stop strings (Video-o3's closing
  tags) go with the request.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from senri.backends.base import ChatRequest, ChatResponse, Message
from senri.methods.base import CallTally, Method, RunContext
from senri.resample import smart_resize
from senri.methods.structured import call_record

#: A size rule: (height, width) of a decoded source frame -> (height, width) to resize it to.
SizeRule = Callable[[int, int], tuple[int, int]]


def bicubic(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` resized to ``height`` × ``width`` (bicubic; PIL's resize filters with antialiasing when it
    shrinks, as torchvision's ``antialias=True`` does in qwen-vl-utils)."""
    from PIL import Image

    if min(height, width) <= 0:  # qwen-vl-utils' unclamped smart_resize on a thin frame; torch refuses it too
        raise ValueError(f"cannot resize a frame to {width}×{height}")
    if image.shape[:2] == (height, width):
        return image
    return np.asarray(Image.fromarray(image).resize((width, height), Image.BICUBIC))


def jpeg_round_trip(image: np.ndarray, quality: int) -> np.ndarray:
    """``image`` saved as JPEG at ``quality`` and read back (a release that extracts frames to JPEG files first)."""
    from senri.decode import decode_jpeg, encode_jpeg

    return decode_jpeg(encode_jpeg(image, quality=quality))


def pixel_rule(min_pixels: int, max_pixels: int, factor: int = 28) -> SizeRule:
    """qwen-vl-utils' resize within [min_pixels, max_pixels] at ``factor``, as a :data:`SizeRule`."""
    return lambda height, width: smart_resize(height, width, factor, min_pixels, max_pixels)


class CropSeeker(Method):
    """A method that decodes the video itself, shows the model frames and re-sends its whole history."""

    approach = "evidence_seeking"
    uses_model = True
    uses_pixels = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        self.check_capabilities()
        if context.pixels is None:
            raise ValueError(f"method {context.method_name!r} decodes the video itself and got none")
        info = context.video
        self.fps, self.n_frames = float(info.avg_fps), int(info.n_frames)
        self.duration_s = self.n_frames / self.fps if self.fps > 0 else 0.0

    def check_capabilities(self) -> None:
        """Refuse a model that lacks what the method needs, before any frame is read (a method with role
        models of its own checks them once it has opened them)."""
        self.refuse_missing_capabilities()

    def decode(self, indices: Sequence[int], size: SizeRule, jpeg_quality: int | None = None) -> list[np.ndarray]:
        """The source frames ``indices`` as RGB arrays, each JPEG round-tripped at ``jpeg_quality`` first
        (None: not) and resized to ``size`` of its decoded size; frames that do not decode are left out."""
        from senri.decode import read_frames

        targets = [(i + 0.5) / self.fps for i in indices]
        out = []
        for frame in read_frames(self.context.pixels, targets, accuracy="exact"):
            if frame.image is None:
                continue
            image = frame.image if jpeg_quality is None else jpeg_round_trip(frame.image, jpeg_quality)
            out.append(bicubic(image, *size(*image.shape[:2])))
        return out

    def send(self, messages: Sequence[Message], max_tokens: int, purpose: str, tally: CallTally,
             calls: list[dict[str, Any]], stop: Sequence[str] = ()) -> tuple[str, str | bool, ChatResponse] | None:
        """One completion of the whole history: (text, how it ended: the stop string that ended it, "" when
        none did — its own end, or cut at its limit —, True when it ended but the backend does not say how;
        the response), "" for a failed call; None when the history no longer fits the model (not sent,
        ``context_overflows``)."""
        from senri.backends.budget import overflow

        request = ChatRequest(messages=tuple(messages), purpose=purpose,
                              **{**self.sampling(), "max_tokens": max_tokens}, stop=tuple(stop))
        backend = self.context.backend
        too_big = overflow(backend, request) if backend is not None else None
        if too_big is not None:
            tally.count("context_overflows")
            calls.append({"call": purpose, "skipped": f"the history does not fit the model: {too_big}"})
            return None
        (response,) = self.chat_many([request])
        tally.add(request, response)
        calls.append(call_record(request, response))
        if response.truncated:
            tally.count("truncated_replies")
        if response.error:
            return "", "", response
        ended = "" if response.truncated else (True if response.stop_reason is None else response.stop_reason)
        return response.text or "", ended, response
