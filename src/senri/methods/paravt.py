"""ParaVT's agentic evaluation loop (issue 38; ``shared/spec/evidence_seekers.md`` §1, P-*): a uniform overview,
then up to three turns of parallel ``crop_video`` calls re-sampled from the source video, then a forced answer.

- P-I1..I4: 64 overview frames at round(linspace(0, N − 1, 64)) of the source's frames, resized as
  qwen-vl-utils resizes them (factor 28, 100352–602112 px), JPEG quality 85, as separate images without
  timestamps, then the question with the suffix " The video path for this video is: <basename>";
- P-L1..L4: each turn one completion; a reply with no readable call is the final answer; otherwise its first
  5 calls (``<tool_call>`` JSON blocks, then ``<tool_code>crop_video(k=v, …)</tool_code>``; a body that does
  not parse is dropped; name and path are not checked) run one after another, each its own user message:
  the crop's frames, then the "N frames from S s to E s." line (P3), or the error line (P3b) for a window
  without frames; after the third tool turn's tools, the forced question (P4) with max_tokens 64;
- P-T1: a crop is 1 fps, 2–16 frames (even), ≤ 50176 px per frame, indices by the shared rule
  (:mod:`senri.methods.resample`) on senri's exact decoder;
- P-A1: the letter is read by the release's cascade (:func:`extract_letter`).

The raw assistant text (its ``<think>`` included) stays in the history, and the whole history is sent every
turn, as the release does. Prompts are senri's restatement (``config/prompts/paravt/``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from senri.answers import format_options
from senri.backends.base import ImagePart, Message
from senri.methods.base import CallTally, MethodAnswer, RunContext
from senri.methods.resample import overview_indices, window_indices
from senri.methods.seeker import CropSeeker, SizeRule, pixel_rule
from senri.records import Question

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TOOL_CODE = re.compile(r"<tool_code>\s*crop_video\((.*?)\)\s*</tool_code>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def parse_time(value: Any) -> float:
    """A crop bound as the release reads it (U:90-107): a number, a numeric string, MM:SS or HH:MM:SS; anything
    else is 0.0."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = text.split(":")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        return 0.0
    if len(numbers) == 2:
        return numbers[0] * 60 + numbers[1]
    if len(numbers) == 3:
        return numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    return 0.0


def _window(arguments: Any) -> tuple[float, float]:
    args = arguments if isinstance(arguments, dict) else {}
    start = parse_time(args.get("start_time", args.get("start", 0)))
    end_value = args.get("end_time", args.get("end"))
    end = parse_time(end_value) if end_value is not None else start + 10.0
    return start, end


def read_calls(text: str) -> tuple[list[tuple[float, float]], int]:
    """Every crop a reply asks for (P-L2) and how many ``<tool_call>`` blocks were dropped because their body
    is not JSON (the release drops them silently; senri counts them ``unparsed_tool_calls``): each
    ``<tool_call>`` body that parses as JSON (its ``arguments``, a JSON string of them, or nothing), then each
    ``<tool_code>crop_video(k=v, …)</tool_code>``; defaults start 0, end start + 10."""
    calls, dropped = [], 0
    for body in _TOOL_CALL.findall(text or ""):
        try:
            value = json.loads(body)
        except ValueError:
            dropped += 1
            continue
        arguments = value.get("arguments") if isinstance(value, dict) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        calls.append(_window(arguments))
    for body in _TOOL_CODE.findall(text or ""):
        arguments = {}
        for pair in body.split(","):
            key, sep, value = pair.partition("=")
            if sep:
                arguments[key.strip()] = value.strip().strip("'\"")
        calls.append(_window(arguments))
    return calls, dropped


def parse_calls(text: str) -> list[tuple[float, float]]:
    """The crops of :func:`read_calls`."""
    return read_calls(text)[0]


def extract_letter(text: str, letters: str = "ABCDEFGHIJ") -> str | None:
    """ParaVT's answer cascade (P-A1): inside the first ``<answer>`` a bare letter, else its first \\b letter;
    the whole text one letter; "answer is X" / ": X"; the first \\b letter anywhere; the first character."""
    body = (text or "").strip()
    pattern = rf"\b([{letters}])\b"
    match = _ANSWER.search(body)
    if match:
        inner = match.group(1).strip()
        if len(inner) == 1 and inner in letters:
            return inner
        found = re.search(pattern, inner)
        if found:
            return found.group(1)
    if len(body) == 1 and body in letters:
        return body
    found = re.search(rf"(?:answer is|:)\s*\(?([{letters}])\b", body, re.IGNORECASE)
    if found:
        return found.group(1).upper()
    found = re.search(pattern, body)
    if found:
        return found.group(1)
    return body[:1] or None


class ParaVT(CropSeeker):
    @classmethod
    def capability_problems(cls, method: str, spec: Any, model: str, capabilities: Any,
                            roles: Any = None) -> list[str]:
        if capabilities is not None and not capabilities.images:
            return [f"method {method!r} shows the model frames as images; model {model!r} takes no images "
                    f"(use a vision-language model config, e.g. ParaVT-8B's)"]
        return []

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        self.main_frames = int(config.get("main_nframes", 64))
        self.max_turns = int(config.get("max_turns", 3))
        self.max_parallel = int(config.get("max_parallel", 5))
        self.crop_fps = float(config.get("crop_fps", 1.0))
        self.crop_frames = (int(config.get("crop_min_frames", 1)), int(config.get("crop_max_frames", 16)))
        self.crop_size = pixel_rule(int(config.get("crop_min_pixels", 784)), int(config.get("crop_max_pixels", 50176)))
        self.main_size = pixel_rule(int(config.get("main_min_pixels", 128 * 784)),
                                    int(config.get("main_max_pixels", 602112)))
        self.jpeg_quality = int(config.get("jpeg_quality", 85))
        self.forced_tokens = int(config.get("forced_max_tokens", 64))
        self.text = self.prompts()
        self._overview: list[ImagePart] | None = None

    # --------------------------------------------------------------------------------------------- frames
    def images(self, indices: Sequence[int], size: SizeRule) -> list[ImagePart]:
        """The source frames ``indices`` resized by ``size`` (:meth:`CropSeeker.decode`), JPEG at
        ``jpeg_quality`` as the release sends them."""
        from senri.decode import encode_jpeg

        return [ImagePart(encode_jpeg(image, quality=self.jpeg_quality)) for image in self.decode(indices, size)]

    def overview(self) -> list[ImagePart]:
        if self._overview is None:
            self._overview = self.images(overview_indices(self.n_frames, self.main_frames), self.main_size)
        return self._overview

    def crop_indices(self, start_s: float, end_s: float) -> list[int]:
        """A crop's source frames (P-T1); [] for a window without frames (the release's decoders raise: P3b)."""
        try:
            return window_indices(start_s, end_s, self.fps, self.n_frames, self.crop_fps, *self.crop_frames)
        except ValueError:
            return []

    def crop(self, start_s: float, end_s: float) -> list[ImagePart]:
        """A crop's frames, decoded (those that fail to decode left out, as the release's empty list)."""
        return self.images(self.crop_indices(start_s, end_s), self.crop_size)

    # ----------------------------------------------------------------------------------------------- loop
    def _complete(self, messages: list[Message], max_tokens: int, purpose: str, tally: CallTally,
                  calls: list[dict[str, Any]]) -> str | None:
        sent = self.send(messages, max_tokens, purpose, tally, calls)
        return None if sent is None else sent[0]

    def answer(self, question: Question) -> MethodAnswer:
        tally, calls, crops = CallTally(), [], []
        # P-I4: the suffix goes after the whole question block (options and instruction included), unless the
        # block already mentions a video path (D:442-444 test and extend the block load_samples built)
        block = self.text.render("question", question=question.question, options=format_options(question.options))
        if "video path" not in block.lower():
            block += f" The video path for this video is: {Path(str(self.context.pixels)).name}"
        overview = self.overview()
        tally.did("frames_seen", len(overview))
        if len(overview) < self.main_frames:  # frames that did not decode: the question sees fewer
            tally.count("black_frames", self.main_frames - len(overview))
        messages = [Message.text("system", self.text.render("system")),
                    Message("user", (*overview, block))]
        final, forced = "", False
        max_tokens = self.role_max_tokens("answer")
        for turn in range(self.max_turns + 1):
            reply = self._complete(messages, max_tokens, f"paravt:turn{turn}", tally, calls)
            if reply is None:  # the history outgrew the model: no answer (context_overflows)
                break
            tally.did("rounds")
            windows, dropped = read_calls(reply)
            windows = windows[:self.max_parallel]
            if dropped:
                tally.count("unparsed_tool_calls", dropped)
            if not windows:
                final = reply
                break
            messages.append(Message.text("assistant", reply))
            for start_s, end_s in windows:
                indices = self.crop_indices(start_s, end_s)
                frames = self.images(indices, self.crop_size)
                if len(frames) < len(indices):
                    tally.count("black_frames", len(indices) - len(frames))
                tally.did("tool_calls")
                tally.did("frames_seen", len(frames))
                crops.append({"turn": turn, "start_s": start_s, "end_s": end_s, "frames": len(frames)})
                note = (self.text.render("crop_result", n=len(frames), start=f"{start_s:.1f}", end=f"{end_s:.1f}")
                        if frames else self.text.render("crop_error", start=f"{start_s:.1f}", end=f"{end_s:.1f}"))
                if not frames:
                    tally.count("rejected_tool_calls")
                messages.append(Message("user", (*frames, note)))
            if turn == self.max_turns - 1:
                messages.append(Message.text("user", self.text.render("forced")))
                final = self._complete(messages, self.forced_tokens, "paravt:forced", tally, calls) or ""
                forced = True
                tally.count("forced_answers")
                break
        letter = extract_letter(final)
        pred = letter if letter in ("A", "B", "C", "D") else None
        trace = {"crops": crops, "calls": calls, "forced": forced, "final": final[:2000],
                 "overview_frames": len(overview)}
        return MethodAnswer(pred, final, pred is not None, tally, trace)
