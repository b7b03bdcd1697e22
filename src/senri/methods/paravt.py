"""ParaVT's agentic evaluation loop (issue 38; ``shared/spec/evidence_seekers.md`` §1, P-*): a uniform overview,
then up to three turns of parallel ``crop_video`` calls re-sampled from the source video, then a forced answer.

- P-I1..I4: 64 overview frames at round(linspace(0, N − 1, 64)) of the source's frames (none for a video
  of fewer than 64 frames), resized as qwen-vl-utils resizes them (factor 28, 100352–602112 px), JPEG
  quality 85, as separate images without timestamps, then the question with the suffix " The video path for
  this video is: <basename>";
- P-L1..L4: each turn one completion; a reply with no readable call is the final answer; otherwise its first
  5 calls (``<tool_call>`` JSON values, then ``<tool_code>crop_video(k=v, …)</tool_code>``; a body that does
  not parse is dropped; name and path are not checked) run one after another, each its own user message:
  the crop's frames, then the "N frames from S s to E s." line (P3), or the error line (P3b) for a window
  without frames; after the third tool turn's tools, the forced question (P4) with max_tokens 64; a call
  that is not an object, or whose ``arguments`` is not one, loses the question as the release's raise does
  (``malformed_tool_calls: drop`` drops it instead);
- P-T1/T2: a crop is 1 fps, 2–16 frames (even), ≤ 50176 px per frame, indices by the shared rule
  (:mod:`senri.resample`) on senri's exact decoder, torchvision's fallback where torchcodec refuses (its
  window compared in the stream's time-base units, the probe's ``VideoInfo.time_base``);
- P-A1: the letter is read by the release's cascade (:func:`extract_letter`; ``answer_reader: senri`` reads
  it with the project's parser).

The raw assistant text (its ``<think>`` included) stays in the history, and the whole history is sent every
turn, as the release does. Prompts are senri's restatement (``config/prompts/paravt/``).
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from senri.answers import format_options
from senri.backends.base import ImagePart, Message
from senri.methods.base import CallTally, MethodAnswer, RunContext
from senri.resample import overview_indices, torchvision_fallback, window_indices
from senri.methods.seeker import CropSeeker, SizeRule, pixel_rule
from senri.records import Question

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_TOOL_CODE = re.compile(r"<tool_code>\s*(.*?)\s*</tool_code>", re.DOTALL)
_CROP_CALL = re.compile(r"crop_video\s*\((.*)\)\s*", re.DOTALL)
_NEXT_KEY = re.compile(r",\s*(?=[a-zA-Z_]+\s*=)")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
#: ``malformed_tool_calls``: ``lose_question`` (the release: a call that is not an object, or whose arguments
#: are not one, raises inside its loop and the sample ends with an error) or ``drop`` (senri: such a block is
#: dropped as an unparsable one is and counted ``unparsed_tool_calls``; a JSON string of arguments is read).
MALFORMED_TOOL_CALLS = ("lose_question", "drop")
#: ``answer_reader``: ``release`` (P-A1's cascade) or ``senri`` (the project's parser, senri.answers.parse_answer).
ANSWER_READERS = ("release", "senri")


#: The options whose non-default value departs from the release (option -> the release's value): the report marks
#: a run that set one (the registry ``senri.methods.DEVIATIONS`` reads this mapping).
DEVIATIONS = {"malformed_tool_calls": "lose_question", "answer_reader": "release"}


class MalformedCall(ValueError):
    """A parsed ``<tool_call>`` the release cannot run: its body or its ``arguments`` is not a JSON object."""


def parse_time(value: Any) -> float:
    """A crop bound as the release reads it (U:90-107): a number (a bool too: ``True`` is 1.0), anything
    Python's float() reads ("4.5", "1e2", "1_000", "nan"), MM:SS or HH:MM:SS; anything else is 0.0."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    if isinstance(value, str) and ":" in value:
        parts = value.split(":")
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            return 0.0
        if len(numbers) == 2:
            return numbers[0] * 60 + numbers[1]
        if len(numbers) == 3:
            return numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    return 0.0


def _tool_code_call(body: str) -> dict[str, Any] | None:
    """A ``<tool_code>`` body as the release reads it (D:209-242): ``crop_video(k=v, …)`` (spaces allowed before
    the parenthesis), split before each ``name=``, values unquoted and made float where they parse; no call
    when the body starts with ``<|im_end|>``, names another function or has no k=v pair (positional
    arguments)."""
    body = body.strip()
    if not body or body.startswith("<|im_end|>"):
        return None
    match = _CROP_CALL.match(body)
    if not match:
        return None
    arguments: dict[str, Any] = {}
    for pair in _NEXT_KEY.split(match.group(1)):
        if "=" not in pair:
            continue
        key, value = pair.split("=", 1)
        value = value.strip().strip("\"'")
        try:
            arguments[key.strip()] = float(value)
        except ValueError:
            arguments[key.strip()] = value
    return {"name": "crop_video", "arguments": arguments} if arguments else None


def read_calls(text: str) -> tuple[list[Any], int]:
    """The calls of a reply as the release parses them (P-L2, ``parse_tool_calls``) and how many
    ``<tool_call>`` blocks were dropped because their body is not JSON (the release drops them silently; senri
    counts them ``unparsed_tool_calls``): every JSON value of a ``<tool_call>`` block (an object or not), then
    every ``<tool_code>`` crop call."""
    calls: list[Any] = []
    dropped = 0
    for body in _TOOL_CALL.findall(text or ""):
        try:
            calls.append(json.loads(body))
        except ValueError:
            dropped += 1
    for body in _TOOL_CODE.findall(text or ""):
        call = _tool_code_call(body)
        if call is not None:
            calls.append(call)
    return calls, dropped


def call_window(call: Any, lenient: bool = False) -> tuple[float, float]:
    """The crop a parsed call asks for (P-L2, D:486-490): ``arguments`` (absent: {}) start_time|start (default
    0) and end_time|end (default start + 10, only when both keys are absent: ``"end_time": null`` is 0.0).
    A call that is not an object, or whose ``arguments`` is not one, raises :class:`MalformedCall` (the
    release's ``.get`` fails there); ``lenient`` reads a JSON string of arguments first."""
    if not isinstance(call, dict):
        raise MalformedCall(f"{type(call).__name__!r} object has no attribute 'get'")
    arguments = call.get("arguments", {})
    if lenient and isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    if not isinstance(arguments, dict):
        raise MalformedCall(f"{type(arguments).__name__!r} object has no attribute 'get'")
    try:
        start = parse_time(arguments.get("start_time", arguments.get("start", 0)))
        end = parse_time(arguments.get("end_time", arguments.get("end", start + 10)))
    except OverflowError as exc:  # an integer past float's range (10**400): the release's float() raises too
        raise MalformedCall(str(exc)) from None
    return start, end


def plan_calls(text: str, max_parallel: int, lenient: bool = False) -> tuple[list[Any], int]:
    """The calls one turn runs (P-L2, P-L3; D:462-482): :func:`read_calls`, under ``lenient`` without the calls
    :func:`call_window` refuses (counted with the dropped blocks), then the first ``max_parallel`` of them — all
    of them where ``max_parallel`` is 0 or less, as the release's ``if max_parallel > 0`` has it. No call: the
    reply is the final answer."""
    calls, dropped = read_calls(text)
    if lenient:
        readable = []
        for call in calls:
            try:
                call_window(call, lenient=True)
                readable.append(call)
            except MalformedCall:
                dropped += 1
        calls = readable
    return (calls[:max_parallel] if max_parallel > 0 else calls), dropped


def parse_calls(text: str) -> list[tuple[float, float]]:
    """The crops of :func:`read_calls` (MalformedCall for a call the release cannot run)."""
    return [call_window(call) for call in read_calls(text)[0]]


def extract_letter(text: str) -> str:
    """ParaVT's answer cascade (P-A1, U:110-129), quirks kept: inside the first ``<answer>`` a bare letter A–J,
    else its first word-bounded one; the whole text one letter; ``(answer|Answer)\\s*(is|:)\\s*X`` (case-
    sensitive, no word boundary after the letter: "The answer is a" falls through to the first character "T",
    "The answer is Definitely B" gives "D"); the first word-bounded A–J; the first character; "" for none."""
    text = (text or "").strip()
    match = _ANSWER.search(text)
    if match:
        inner = match.group(1).strip()
        if len(inner) == 1 and inner in "ABCDEFGHIJ":
            return inner
        found = re.search(r"\b([A-J])\b", inner)
        if found:
            return found.group(1)
    if len(text) == 1 and text in "ABCDEFGHIJ":
        return text
    for pattern in (r"(?:answer|Answer)\s*(?:is|:)\s*([A-J])", r"\b([A-J])\b"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    return text[:1]


def answer_letter(final: str, question: Question, reader: str = "release") -> str | None:
    """The prediction a final reply gives: read by the release's cascade (:func:`extract_letter`) or senri's
    parser (``answer_reader: senri``), kept only when it is one of the question's letters — A–D for four options,
    as the release counts anything else wrong; E on a five-option question is E, C on a two-option one nothing."""
    if reader == "senri":
        from senri.answers import parse_answer

        letter = parse_answer(final, question.options).letter
    else:
        letter = extract_letter(final)
    return letter if letter in question.letters else None


def crop_plan(start_s: float, end_s: float, fps: float, n_frames: int, target_fps: float = 1.0,
              min_frames: int = 1, max_frames: int = 16, time_base: Fraction | None = None) -> list[int]:
    """A crop's source frames (P-T1, P-T2) as crop_frames picks them: the torchcodec rule; where that refuses
    the window (its first frame not before its last), torchvision's fallback (:func:`torchvision_fallback`:
    a span between two frames still gives them both); [] where that fails too (P3b). ``time_base`` is the video
    stream's (the probe's ``VideoInfo.time_base``): torchvision compares the window with frame timestamps in
    its units, so a bound within one unit of a frame takes that frame in; without it the comparison is in
    seconds (the same frames except there)."""
    try:
        return window_indices(start_s, end_s, fps, n_frames, target_fps, min_frames, max_frames)
    except ValueError:
        pass
    try:
        return torchvision_fallback(start_s, end_s, fps, n_frames, target_fps, min_frames, max_frames, time_base)
    except ValueError:
        return []


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
        self.malformed_calls = str(config.get("malformed_tool_calls", "lose_question"))
        self.answer_reader = str(config.get("answer_reader", "release"))
        for key, value, allowed in (("malformed_tool_calls", self.malformed_calls, MALFORMED_TOOL_CALLS),
                                    ("answer_reader", self.answer_reader, ANSWER_READERS)):
            if value not in allowed:
                raise ValueError(f"method {context.method_name!r}: {key} must be one of {', '.join(allowed)}, "
                                 f"got {value!r}")
        #: The stream's time base from the probe: torchvision's fallback compares timestamps in its units (P-T2).
        self.time_base = context.video.stream_time_base
        self.text = self.prompts()
        self._overview: list[ImagePart] | None = None

    # --------------------------------------------------------------------------------------------- frames
    def images(self, indices: Sequence[int], size: SizeRule) -> list[ImagePart]:
        """The source frames ``indices`` resized by ``size`` (:meth:`CropSeeker.decode`), JPEG at
        ``jpeg_quality`` as the release sends them."""
        from senri.decode import encode_jpeg

        return [ImagePart(encode_jpeg(image, quality=self.jpeg_quality)) for image in self.decode(indices, size)]

    def overview_indices(self) -> list[int]:
        """The overview's source frames (P-I1); [] for a video with fewer frames than the overview asks for
        (qwen-vl-utils refuses it in both backends and get_frames returns none: the question goes without)."""
        try:
            return overview_indices(self.n_frames, self.main_frames)
        except ValueError:
            return []

    def overview(self) -> list[ImagePart]:
        if self._overview is None:
            try:
                self._overview = self.images(self.overview_indices(), self.main_size)
            except ValueError:  # a frame resized to a side of 0: get_frames fails soft
                self._overview = []
        return self._overview

    def crop_indices(self, start_s: float, end_s: float) -> list[int]:
        """A crop's source frames (:func:`crop_plan`)."""
        return crop_plan(start_s, end_s, self.fps, self.n_frames, self.crop_fps, *self.crop_frames,
                         time_base=self.time_base)

    def crop(self, start_s: float, end_s: float) -> list[ImagePart]:
        """A crop's frames, decoded (those that fail to decode left out); [] where a frame would be resized to
        a side of 0 (crop_frames fails soft)."""
        try:
            return self.images(self.crop_indices(start_s, end_s), self.crop_size)
        except ValueError:
            return []

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
        planned = len(self.overview_indices())
        if len(overview) < planned:  # frames that did not decode: the question sees fewer
            tally.count("black_frames", planned - len(overview))
        messages = [Message.text("system", self.text.render("system")),
                    Message("user", (*overview, block))]
        final, forced, lost = "", False, None
        max_tokens = self.role_max_tokens("answer")
        lenient = self.malformed_calls == "drop"
        for turn in range(self.max_turns + 1):
            reply = self._complete(messages, max_tokens, f"paravt:turn{turn}", tally, calls)
            if reply is None:  # the history outgrew the model: no answer (context_overflows)
                break
            tally.did("rounds")
            parsed, dropped = plan_calls(reply, self.max_parallel, lenient)
            if dropped:
                tally.count("unparsed_tool_calls", dropped)
            if not parsed:
                final = reply
                break
            messages.append(Message.text("assistant", reply))
            for call in parsed:
                try:
                    start_s, end_s = call_window(call, lenient=lenient)
                except MalformedCall as exc:  # the release's loop raises here: the sample ends with an error
                    lost = f"paravt: tool call {json.dumps(call)[:200]} cannot run ({exc}; the release loses the question)"
                    break
                indices = self.crop_indices(start_s, end_s)
                try:
                    frames = self.images(indices, self.crop_size)
                except ValueError:  # a frame resized to a side of 0: crop_frames fails soft (P3b)
                    indices, frames = [], []
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
            if lost:
                break
            if turn == self.max_turns - 1:
                messages.append(Message.text("user", self.text.render("forced")))
                final = self._complete(messages, self.forced_tokens, "paravt:forced", tally, calls) or ""
                forced = True
                tally.count("forced_answers")
                break
        if lost:
            tally.errors.append(lost)
            final = ""
        pred = answer_letter(final, question, self.answer_reader) if not lost else None
        trace = {"crops": crops, "calls": calls, "forced": forced, "final": final[:2000],
                 "overview_frames": len(overview), "lost": lost}
        return MethodAnswer(pred, final, pred is not None, tally, trace)
