"""Video-o3's evaluation loop (issue 38; ``shared/spec/evidence_seekers.md`` §2, O-*): one 2-fps overview video,
then up to eight grounded crops decoded again from the source, each sent back as a new video, until the policy
answers inside ``<answer>``.

- O-I1/I2: the main video at 2 fps (int(i · fps / 2) for i < int(D · 2)); over 768 frames, 768 at
  int(i · N / 769) with the header's rate 768 / D; each frame JPEG round-tripped (PIL's default quality, as the
  release's extracted frames), resized per image (factor 56 — qwen-vl-utils' fetch_image given the patch size
  where it expects the merged one — within 15680–602112 px), the count padded to even with the last frame, then the whole video resized within a 16384-token budget (:func:`video_frame_max_pixels`);
- O-I3: the first user turn is the header (rate to 2 decimals, frame count to 1, span "0 to D") with the video
  at its ``<video>`` placeholder, then the question and options;
- O-L2/L3: every turn stops on ``</grounding>`` / ``</answer>`` (the closing tag a stop string removed is put
  back, as the release's keyword criterion keeps it); an ``<answer>…</answer>`` pair wins; otherwise in the
  forced turn the apology; otherwise the last ``<grounding>`` block's JSON (from its first ``{`` to its last
  ``}``, retried with ' → ") must hold a two-number ``temporal_segment`` and a ``sampling_strategy``; a reply
  without both tags of either (an unclosed ``<grounding>`` at its end included) is the answer as it stands;
- O-T1/T2: a crop at 2 fps, 4–768 frames (even), per-frame pixels within the strategy's quota
  (coarse 2048 / medium 4096 / fine 6144 tokens · 784), its header stating its own sample rate
  (:func:`crop_plan`); a window past the end, an end ≤ start or one without frames is an error, as an unknown
  strategy is;
- O-L4/L5/L6: a good crop appends the reply and [observation header, crop video] (the forced variant once 8
  generations were made, which sets forced mode); a parse error appends the reply and the error turn; a crop
  or strategy error appends the reply twice (the release's quirk) and the error turn; the 11th generation is
  replaced by the apology;
- O-A1: the answer is the first ``<answer>`` pair's stripped text (or the apology, or the raw reply), read as
  Video-MME's official scorer reads it (:func:`senri.answers.videomme_official_letter`: "Answer: C" is C,
  "Best answer: D" is B; ``answer_reader: senri`` reads it with the project's parser).

``media: video`` (the default) sends each video as a carrier at 2 frames/s — Qwen2.5-VL's temporal positions use
the processor's default 2 fps for every video, as the release never passes a rate (O-I3) — holding the
release's frames already at their final size (multiples of 28 pass the processor unchanged, O-S1);
``media: images`` sends the same frames as images at the placeholder, for a model without video input (a
named deviation). Prompts are senri's restatement (``config/prompts/video_o3/``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from senri.answers import format_options, parse_answer, videomme_official_letter
from senri.backends.base import ImagePart, Message, Part, VideoPart
from senri.methods.base import CallTally, MethodAnswer, RunContext
from senri.resample import (capped_rate_indices, frame_bounds, header_numbers, smart_resize,
                                    video_frame_max_pixels, window_indices)
from senri.methods.seeker import CropSeeker, bicubic, pixel_rule
from senri.records import Question

_GROUNDING = re.compile(r"<grounding>(.*?)</grounding>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
CLOSING_TAGS = ("</grounding>", "</answer>")
#: The main video's frames are first resized one by one at this factor (O-I2): qwen-vl-utils' fetch_image gets
#: the patch size (28) where it expects the patch size before merging, so it snaps to 2 × 28 (640×360 → 336×616).
MAIN_FRAME_FACTOR = 56
#: ``answer_reader``: ``release`` (Video-MME's official reading, senri.answers.videomme_official_letter) or
#: ``senri`` (the project's parser, senri.answers.parse_answer).
ANSWER_READERS = ("release", "senri")
#: The release's video placeholder inside a user text.
PLACEHOLDER = "<video>"


#: The options whose non-default value departs from the release (option -> the release's value): the report marks
#: a run that set one (the registry ``senri.methods.DEVIATIONS`` reads this mapping).
DEVIATIONS = {"answer_reader": "release", "media": "video"}


def answer_letter(final: str, question: Question, reader: str = "release") -> str | None:
    """O-A1: the prediction a final answer gives, Video-MME's official reading over the question's letters (its
    A–D for four options; a five- or six-option question's E and F too) or senri's parser (``answer_reader:
    senri``); None where neither finds one of them."""
    if reader == "senri":
        return parse_answer(final, question.options).letter
    return videomme_official_letter(final, question.letters)


class GroundingError(ValueError):
    """A grounding block the release could not read (O-L3)."""


@dataclass(frozen=True)
class Turn:
    """What one reply means (O-L2): an answer (stop), a crop request, a parse error, the apology (forced
    mode without an answer), the raw text as the answer (neither tag), or nothing to do (the release's
    ``</answer>``-before-``<answer>`` case: nothing is appended and the turn repeats)."""

    kind: str  # answer | grounding | parse_error | apology | raw | repeat
    text: str = ""
    window: tuple[float, float, str] | None = None


def close_stopped(text: str, ended: str | bool) -> str:
    """A reply as the release's keyword criterion leaves it: the closing tag a stop string cut off put back.
    ``ended`` is how the reply ended (:meth:`CropSeeker.send`): the stop string itself (put back), "" or False
    (no stop string: a reply that ended by itself with an unclosed ``<grounding>`` stays as it is, and the
    release returns it as the answer), or True where the backend does not say which (the closing tag of the
    last unclosed tag is put back)."""
    if isinstance(ended, str):
        return text + ended if ended in CLOSING_TAGS else text
    if not ended:
        return text
    for opening, closing in (("<grounding>", "</grounding>"), ("<answer>", "</answer>")):
        if text.rfind(opening) > text.rfind(closing):
            return text + closing
    return text


def cut_reply(text: str, forced: bool) -> str:
    """O-L2's cut (M:742-746): outside forced mode after the first ``</grounding>`` if there is one, else after
    the first ``</answer>``; in forced mode not at all."""
    if forced:
        return text
    for tag in CLOSING_TAGS:
        at = text.find(tag)
        if at >= 0:
            return text[:at + len(tag)]
    return text


def parse_grounding(text: str) -> tuple[float, float, str]:
    """The window of the last ``<grounding>`` block (O-L3): its first ``{`` to its last ``}`` as JSON (again with
    ' → " when that fails), a two-item ``temporal_segment`` of numbers and a ``sampling_strategy``."""
    blocks = _GROUNDING.findall(text)
    if not blocks:
        raise GroundingError("no <grounding>...</grounding> block")
    body = blocks[-1]
    first, last = body.find("{"), body.rfind("}")
    if first < 0 or last < first:
        raise GroundingError(f"the grounding block holds no JSON object: {body.strip()[:200]!r}")
    raw = body[first:last + 1]
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            value = json.loads(raw.replace("'", '"'))
        except ValueError as exc:
            raise GroundingError(f"the grounding JSON does not parse: {exc}") from None
    if not isinstance(value, dict) or "temporal_segment" not in value or "sampling_strategy" not in value:
        raise GroundingError("the grounding JSON needs temporal_segment and sampling_strategy")
    segment = value["temporal_segment"]
    if not isinstance(segment, (list, tuple)) or len(segment) != 2:
        raise GroundingError(f"temporal_segment must be [start, end], got {segment!r}")
    try:
        start, end = float(segment[0]), float(segment[1])
    except (TypeError, ValueError):
        raise GroundingError(f"temporal_segment must hold two numbers, got {segment!r}") from None
    return start, end, str(value["sampling_strategy"])


def read_turn(text: str, forced: bool) -> Turn:
    """The meaning of one (already cut) reply, in the release's order (O-L2, O-L5)."""
    if "<answer>" in text and "</answer>" in text:  # the first of each: a "</answer>" before it repeats the turn
        start, end = text.find("<answer>"), text.find("</answer>")
        return Turn("answer", text[start + len("<answer>"):end].strip()) if end > start else Turn("repeat")
    if forced:
        return Turn("apology")
    if "<grounding>" in text and "</grounding>" in text:  # an unclosed one is neither: the raw text answers
        try:
            return Turn("grounding", window=parse_grounding(text))
        except GroundingError as exc:
            return Turn("parse_error", str(exc))
    return Turn("raw", text)


def crop_plan(start_s: float, end_s: float, fps: float, n_frames: int, target_fps: float = 2.0,
              min_frames: int = 4, max_frames: int = 768) -> tuple[list[int], float]:
    """A crop's source frames (O-T1) and the rate its header states: the crop's own sample rate, n over the
    frames in range × the source rate (vision_process.py), so 10–11 s of a 30-fps video reads "3.87" and
    10–10.04 s "30.00", not the 2.00 asked for. ValueError where the release's range checks refuse the window
    (a start at or past the end, an end not after the start, no whole frame span)."""
    duration = n_frames / fps
    if start_s >= duration:
        raise ValueError(f"start {start_s:g} s is not before the video's end ({duration:.1f} s)")
    if end_s <= start_s:
        raise ValueError(f"end {end_s:g} s is not after start {start_s:g} s")
    indices = window_indices(start_s, end_s, fps, n_frames, target_fps, min_frames, max_frames)
    first, last = frame_bounds(start_s, end_s, fps, n_frames)
    return indices, len(indices) / (last - first + 1) * fps


def main_video_resize(frame_hw: Sequence[int], n_frames: int, frame_pixels: tuple[int, int] = (15680, 602112),
                      total_tokens: int = 16384, floor_pixels: int = 16464) -> tuple[int, tuple[int, int]]:
    """The main video after each frame's own resize (O-I2; frames of ``frame_hw``, the factor-56 step): the frame
    count padded to even with the last frame, and the size the whole video is resized to — at factor 28 within a
    per-frame ceiling of max(min(max_pixels, total_tokens · 784 / n · 2), floor) over the padded count."""
    padded = n_frames + n_frames % 2
    ceiling = video_frame_max_pixels(total_tokens * 784, padded, frame_pixels[1], floor_pixels)
    return padded, smart_resize(*frame_hw, 28, frame_pixels[0], ceiling)


class VideoO3(CropSeeker):
    @classmethod
    def capability_problems(cls, method: str, spec: Any, model: str, capabilities: Any,
                            roles: Any = None) -> list[str]:
        if capabilities is None:
            return []
        media = str((spec or {}).get("media", "video"))
        if media == "video" and not capabilities.video:
            return [f"method {method!r} sends the video as video (media: video, the release's input); model "
                    f"{model!r} takes no video (use a video model config, or method.{method}.media=images)"]
        if media == "images" and not capabilities.images:
            return [f"method {method!r} shows the model frames; model {model!r} takes no images"]
        return []

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        self.media = str(config.get("media", "video"))
        if self.media not in ("video", "images"):
            raise ValueError(f"method {context.method_name!r}: media must be video or images, got {self.media!r}")
        self.sample_fps = float(config.get("sample_fps", 2.0))
        self.main_cap = int(config.get("main_max_frames", 768))
        self.main_tokens = int(config.get("main_total_tokens", 16384))
        self.frame_pixels = (int(config.get("min_pixels", 15680)), int(config.get("max_pixels", 602112)))
        self.floor_pixels = int(config.get("floor_pixels", 16464))
        self.jpeg_quality = int(config.get("main_jpeg_quality", 75))
        self.crop_frames = (int(config.get("crop_min_frames", 4)), int(config.get("crop_max_frames", 768)))
        self.quotas = {str(k): int(v) for k, v in (config.get("crop_quota_tokens") or
                                                   {"coarse": 2048, "medium": 4096, "fine": 6144}).items()}
        self.max_turn = int(config.get("max_turn", 8))
        self.mrope_fps = float(config.get("mrope_fps", 2.0))
        self.apology = str(config.get("apology", "I'm sorry, I can't answer the question based on the video."))
        self.answer_reader = str(config.get("answer_reader", "release"))
        if self.answer_reader not in ANSWER_READERS:
            raise ValueError(f"method {context.method_name!r}: answer_reader must be one of "
                             f"{', '.join(ANSWER_READERS)}, got {self.answer_reader!r}")
        self.text = self.prompts()
        self._main: tuple[list[Part], float, int, int] | None = None

    # --------------------------------------------------------------------------------------------- videos
    def _frame_max(self, total_tokens: int, n_frames: int) -> int:
        return video_frame_max_pixels(total_tokens * 784, n_frames, self.frame_pixels[1], self.floor_pixels)

    def _media(self, frames: list[np.ndarray], times: Sequence[float]) -> list[Part]:
        """Frames as the model gets them: one carrier video at the rate its positions assume, or images."""
        from senri.decode import carrier_from_jpegs, encode_jpeg

        jpegs = [encode_jpeg(f, quality=95) for f in frames]
        if self.media == "images":
            return [ImagePart(j) for j in jpegs]
        return [VideoPart(carrier_from_jpegs(jpegs, fps=self.mrope_fps), self.mrope_fps, tuple(times),
                          timeline="carrier")]

    def main_video(self) -> tuple[list[Part], float, int, int]:
        """The overview (O-I1/I2): its media, the sample rate the header states, the frames planned and those
        decoded (before the even padding)."""
        if self._main is None:
            indices, rate = capped_rate_indices(self.n_frames, self.fps, self.sample_fps, self.main_cap)
            frames = self.decode(indices, pixel_rule(*self.frame_pixels, factor=MAIN_FRAME_FACTOR),
                                 jpeg_quality=self.jpeg_quality)
            decoded = len(frames)
            times = [i / self.fps for i in indices[:len(frames)]]
            if frames:
                padded, (h, w) = main_video_resize(frames[0].shape[:2], len(frames), self.frame_pixels,
                                                   self.main_tokens, self.floor_pixels)
                frames = [bicubic(f, h, w) for f in frames + [frames[-1]] * (padded - len(frames))]
                times += [times[-1]] * (padded - len(times))
            self._main = (self._media(frames, times) if frames else [], rate, len(indices), decoded)
        return self._main

    def crop(self, start_s: float, end_s: float, strategy: str) -> tuple[list[Part], int, int, float]:
        """A grounded clip (O-T1/T2): its media, the frames planned and those decoded, and its sample rate
        (:func:`crop_plan`); KeyError for an unknown strategy (checked first, as the release's
        ``_prepare_content`` does), ValueError for a window the release's decoder refuses."""
        if strategy not in self.quotas:
            raise KeyError(f"unknown sampling_strategy {strategy!r} (one of {', '.join(self.quotas)})")
        indices, rate = crop_plan(start_s, end_s, self.fps, self.n_frames, self.sample_fps, *self.crop_frames)
        size = pixel_rule(self.frame_pixels[0], self._frame_max(self.quotas[strategy], len(indices)))
        frames = self.decode(indices, size)
        if not frames:
            raise ValueError(f"no frame of {start_s:g}–{end_s:g} s decodes")
        return self._media(frames, [i / self.fps for i in indices[:len(frames)]]), len(indices), len(frames), rate

    def _with_media(self, text: str, media: list[Part]) -> tuple[Part, ...]:
        """A user turn's content: the text with the media at its ``<video>`` placeholder (after it if none)."""
        before, sep, after = text.partition(PLACEHOLDER)
        parts: list[Part] = [before] if before else []
        parts += media
        if after:
            parts.append(after)
        return tuple(parts) if sep else (text, *media)

    # ----------------------------------------------------------------------------------------------- loop
    def answer(self, question: Question) -> MethodAnswer:
        tally, calls, crops = CallTally(), [], []
        media, rate, planned, decoded = self.main_video()
        tally.did("frames_seen", decoded)
        if decoded < planned:  # frames that did not decode: the overview holds fewer
            tally.count("black_frames", planned - decoded)
        fps, n_frames, _, duration = header_numbers(planned, rate, 0, self.duration_s)
        first = self.text.render("question", fps=fps, n_frames=n_frames, duration=duration,
                                 question=question.question, options=format_options(question.options))
        messages = [Message.text("system", self.text.render("system")), Message("user", self._with_media(first, media))]
        max_tokens = self.role_max_tokens("answer")
        forced, generations, final, outcome = False, 0, "", "apology"
        while True:
            sent = self.send(messages, max_tokens, f"video_o3:turn{generations}", tally, calls, CLOSING_TAGS)
            if sent is None:  # the history outgrew the model (context_overflows): no answer
                final, outcome = "", "overflow"
                break
            generations += 1
            tally.did("rounds")
            if generations > self.max_turn + 2:  # the 11th generation is made, then replaced by the apology (O-L6)
                final, outcome = self.apology, "cap"
                break
            reply = cut_reply(close_stopped(sent[0], sent[1]), forced)
            turn = read_turn(reply, forced)
            if turn.kind in ("answer", "raw"):
                final, outcome = turn.text, turn.kind
                break
            if turn.kind == "apology":
                final, outcome = self.apology, "apology"
                break
            if turn.kind == "repeat":
                continue
            late = generations >= self.max_turn
            if turn.kind == "parse_error":
                tally.count("unparsed_tool_calls")
                messages += [Message.text("assistant", reply), self._error_turn(turn.text, late)]
                forced = forced or late
                continue
            start_s, end_s, strategy = turn.window
            tally.did("tool_calls")
            try:
                clip, planned_crop, decoded, crop_rate = self.crop(start_s, end_s, strategy)
            except (KeyError, ValueError) as exc:
                tally.count("rejected_tool_calls")
                crops.append({"turn": generations, "start_s": start_s, "end_s": end_s, "strategy": strategy,
                              "error": str(exc)})
                reply_turn = Message.text("assistant", reply)
                messages += [reply_turn, reply_turn, self._error_turn(str(exc).strip("'\""), late)]
                forced = forced or late
                continue
            if decoded < planned_crop:
                tally.count("black_frames", planned_crop - decoded)
            tally.did("frames_seen", decoded)
            crops.append({"turn": generations, "start_s": start_s, "end_s": end_s, "strategy": strategy,
                          "frames": decoded})
            c_fps, c_n, c_start, c_end = header_numbers(planned_crop, crop_rate, start_s, end_s)
            role = "forced" if late else "observation"
            # "Action k": the release numbers it by turn_count, every generation so far, error turns included
            note = self.text.render(role, step=generations, fps=c_fps, n_frames=c_n,
                                    start=c_start, end=c_end)
            messages += [Message.text("assistant", reply), Message("user", self._with_media(note, clip))]
            if late:
                forced = True
        if forced or outcome in ("apology", "cap"):
            tally.count("forced_answers")
        letter = answer_letter(final, question, self.answer_reader)
        trace = {"crops": crops, "calls": calls, "forced": forced, "outcome": outcome, "final": final[:2000],
                 "generations": generations, "main_frames": planned, "main_fps": rate, "media": self.media}
        return MethodAnswer(letter, final, letter is not None, tally, trace)

    def _error_turn(self, error: str, late: bool) -> Message:
        return Message.text("user", self.text.render("forced_error" if late else "error", error=error))
