"""VideoARM's tool machinery (spec ``videoarm.md`` §3): frame indices and their source seconds, the frame
sampler with its index overlay, the 3×2 snapshot mosaics, the proportional frame split, and the parsers for
tool arguments, JSON actions and the clip analyzer's answer, and the audio transcriber's time mapping.

VideoARM's unit of time is the global frame index (A-M1). Here the index is the position of a frame in the
video's packet index (presentation order), so frame ``i`` is exactly the frame senri's decoder returns for
its timestamp, and :meth:`FrameClock.seconds` gives the source time every trace entry records: on a
variable-frame-rate video that is the frame's real timestamp, not ``i / fps``.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

#: The snapshot mosaic layout (A1, A-T2): 3 columns × 2 rows, frames row-major.
MOSAIC_COLS, MOSAIC_ROWS = 3, 2
TILES_PER_MOSAIC = MOSAIC_COLS * MOSAIC_ROWS
#: The frame counts scene_snapper accepts (A-T2); anything else becomes the first.
SNAPPER_COUNTS = (30, 60, 90, 150)


@dataclass(frozen=True)
class FrameClock:
    """Every frame's source time, by global frame index (from one demux pass, no decoding)."""

    times_s: tuple[float, ...]

    @classmethod
    def of(cls, path: str | Path) -> "FrameClock":
        import av

        from senri.decode import build_index
        from senri.media import MediaError

        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                index = build_index(container, stream)
        except (av.error.FFmpegError, IndexError, ValueError, OSError) as exc:
            raise MediaError(f"{path}: not a readable video ({exc})") from exc
        return cls(tuple(index.seconds(p) for p in index.pts))

    @property
    def total_frames(self) -> int:
        return len(self.times_s)

    @property
    def duration_s(self) -> float:
        """First frame to the end of the last (one median frame period past its start)."""
        if len(self.times_s) < 2:
            return 0.0
        gaps = sorted(b - a for a, b in zip(self.times_s, self.times_s[1:]))
        return self.times_s[-1] - self.times_s[0] + gaps[len(gaps) // 2]

    @property
    def fps(self) -> float:
        """The average rate (frames / duration): what VideoARM's video info states (A-M1)."""
        return self.total_frames / self.duration_s if self.duration_s > 0 else 0.0

    def clamp(self, index: int) -> int:
        return max(0, min(self.total_frames - 1, int(index)))

    def seconds(self, index: int) -> float:
        return self.times_s[self.clamp(index)]

    def interval_s(self, start: int, end: int) -> list[float]:
        """A frame range ``[start, end]`` (inclusive) as source seconds: start of ``start``'s frame to that of
        ``end``'s, rounded to the millisecond."""
        return [round(self.seconds(start), 3), round(self.seconds(end), 3)]

    def end_s(self, index: int) -> float:
        """Where frame ``index`` stops showing: the next frame's time, or the video's end for the last frame."""
        index = self.clamp(index)
        if index + 1 < self.total_frames:
            return self.times_s[index + 1]
        return self.times_s[0] + self.duration_s

    def frame_at(self, seconds: float) -> int:
        """The frame showing at source time ``seconds`` (the last one starting at or before it)."""
        return self.clamp(bisect.bisect_right(self.times_s, seconds) - 1)


def audio_segments_to_frames(segments: Sequence[dict[str, Any]], ranges: Sequence[tuple[int, int]],
                             clock: FrameClock) -> list[dict[str, Any]]:
    """A-T4: segment times of the concatenated audio of ``ranges`` (each range's audio from the start of its first
    frame to the end of its last, in order) → global frame ranges, through the cumulative range durations.

    A time falls in the range whose cumulative span holds it (the last range takes anything past the end); its
    offset into that range is added to the range's source start and read back as a frame, kept inside the range."""
    spans = [(clock.seconds(s), clock.end_s(e)) for s, e in ranges]
    offsets = [0.0]
    for a, b in spans:
        offsets.append(offsets[-1] + (b - a))

    def frame(t: float) -> int:
        k = max(0, min(len(ranges) - 1, bisect.bisect_right(offsets, t) - 1))
        start, end = ranges[k]
        return max(start, min(end, clock.frame_at(spans[k][0] + max(0.0, t - offsets[k]))))

    out = []
    for seg in segments:
        first = frame(float(seg["start"]))
        # The end is exclusive in time: a segment ending exactly on a range boundary ends in the range before it.
        last = frame(max(float(seg["start"]), float(seg["end"]) - 1e-6))
        out.append({"start_frame": first, "end_frame": max(first, last), "text": str(seg.get("text", ""))})
    return out


def sample_indices(start: int, end: int, wanted: int) -> list[int]:
    """A-T1: ``n = min(wanted, end − start + 1)`` indices spread over ``[start, end]``, truncated to ints as the
    released sampler does (``int(s + (e − s)·i / (n − 1))``)."""
    n = max(0, min(int(wanted), end - start + 1))
    if n <= 0:
        return []
    if n == 1:
        return [start]
    return [int(start + (end - start) * i / (n - 1)) for i in range(n)]


def split_frames(ranges: Sequence[tuple[int, int]], total: int) -> list[int]:
    """A-T2: ``total`` frames shared among ``ranges`` in proportion to their lengths; every range but the
    last gets ``max(1, int(total · len / all))``, the last range gets the remainder (at least 1)."""
    lengths = [e - s + 1 for s, e in ranges]
    whole = sum(lengths)
    counts = [max(1, int(total * length / whole)) for length in lengths[:-1]]
    return counts + [max(1, total - sum(counts))] if ranges else []


def draw_index(image: np.ndarray, index: int) -> np.ndarray:
    """The frame's global index written white near its top-left corner (A-T1), with a dark outline so it reads
    on bright frames too; the text height follows the image (a 256-px snapshot and a 512-px clip frame both
    carry a legible label)."""
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.fromarray(image)
    size = max(10, min(picture.size) // 9)
    font = ImageFont.load_default(size=size)
    ImageDraw.Draw(picture).text((max(2, size // 3), max(2, size // 3)), str(index), fill=(255, 255, 255),
                                 font=font, stroke_width=max(1, size // 12), stroke_fill=(0, 0, 0))
    return np.asarray(picture)


def mosaic(tiles: Sequence[np.ndarray]) -> np.ndarray:
    """Up to 6 frames tiled 3 columns × 2 rows, row-major (A-T2): every tile resized to the smallest height and
    width among them, cells without a frame left black."""
    from PIL import Image

    if not tiles or len(tiles) > TILES_PER_MOSAIC:
        raise ValueError(f"a mosaic holds 1 to {TILES_PER_MOSAIC} frames, got {len(tiles)}")
    height = min(t.shape[0] for t in tiles)
    width = min(t.shape[1] for t in tiles)
    canvas = np.zeros((MOSAIC_ROWS * height, MOSAIC_COLS * width, 3), dtype=np.uint8)
    for k, tile in enumerate(tiles):
        if tile.shape[:2] != (height, width):
            tile = np.asarray(Image.fromarray(tile).resize((width, height), Image.Resampling.BILINEAR))
        row, col = divmod(k, MOSAIC_COLS)
        canvas[row * height:(row + 1) * height, col * width:(col + 1) * width] = tile[:, :, :3]
    return canvas


def mosaics(frames: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Frames in chunks of 6, each chunk one mosaic."""
    return [mosaic(frames[k:k + TILES_PER_MOSAIC]) for k in range(0, len(frames), TILES_PER_MOSAIC)]


def read_indexed_frames(path: str | Path, clock: FrameClock, indices: Sequence[int],
                        short_side: int) -> tuple[list[np.ndarray], int]:
    """The frames at ``indices`` from senri's exact decoder (each target is its frame's own timestamp), each
    with its index drawn on; a frame that fails to decode becomes a black frame of the same size (A-T1).
    Returns the frames and how many decoded."""
    from senri.decode import read_frames

    wanted = [clock.clamp(i) for i in indices]
    sampled = list(read_frames(path, [clock.seconds(i) for i in wanted], accuracy="exact", short_side=short_side))
    good = [s.image for s in sampled if s.image is not None]
    shape = good[0].shape if good else (short_side, short_side, 3)
    frames = [draw_index(s.image if s.image is not None else np.zeros(shape, dtype=np.uint8), i)
              for s, i in zip(sampled, wanted)]
    return frames, len(good)


# ------------------------------------------------------------------------------------------- parsing


_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


def parse_arguments(text: str | dict | None) -> dict[str, Any]:
    """A tool call's arguments (A-T6): a JSON object, after stripping a code fence and closing brackets the
    model left open. Raises ValueError naming the problem when it is not an object."""
    if isinstance(text, dict):
        return text
    body = _FENCE.sub("", text or "").strip() or "{}"
    for candidate in (body, _close_brackets(body)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise ValueError(f"tool arguments are not a JSON object: {body[:200]}")
    raise ValueError(f"tool arguments are not valid JSON: {body[:200]}")


def _close_brackets(text: str) -> str:
    """``text`` with the brackets and string it leaves open closed, in the right order."""
    stack, in_string, escaped = [], False, False
    for char in text:
        if in_string:
            escaped = not escaped and char == "\\"
            if char == '"' and not escaped:
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    return text + ('"' if in_string else "") + "".join(reversed(stack))


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array in ``text`` (nested ones included in their parent), in order."""
    decoder, found, position = json.JSONDecoder(), [], 0
    while True:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            return found
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        found.append(value)
        position = end


def json_actions(text: str) -> list[dict[str, Any]]:
    """The tool calls of a reply in the JSON action form: objects ``{"tool": name, "arguments": {...}}``, alone,
    in a list, or under ``"tool_calls"``; each returned as ``{"name", "arguments"}`` with the arguments as JSON
    text, like a function call. A reply with none is an answer (A-L3)."""
    calls = []

    def visit(value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            if isinstance(value.get("tool_calls"), list):
                visit(value["tool_calls"])
            elif isinstance(value.get("tool"), str):
                arguments = value.get("arguments", {})
                calls.append({"name": value["tool"],
                              "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)})

    for value in json_values(text):
        visit(value)
    return calls


_ANSWER_LINE = re.compile(r"^\s*\**answer\**\s*[:：]\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_CONFIDENCE_LINE = re.compile(r"^\s*\**confidence\**\s*[:：]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
DEFAULT_CONFIDENCE = 0.5


def parse_clip_reply(text: str) -> tuple[str, float, str]:
    """The clip analyzer's ``Answer:`` and ``Confidence:`` lines (A-T5). Fallbacks: no Answer line → the whole
    text is the answer; no Confidence line → the first number in the text, else 0.5; clamped to [0, 1].
    Returns (answer, confidence, rule) with rule naming which fallbacks applied."""
    text = (text or "").strip()
    answer_match = _ANSWER_LINE.search(text)
    answer = answer_match.group(1).strip() if answer_match else text
    confidence_match = _CONFIDENCE_LINE.search(text)
    if confidence_match:
        confidence, rule = float(confidence_match.group(1)), "lines"
    else:
        number = _NUMBER.search(text)
        confidence, rule = (float(number.group(0)), "first_number") if number else (DEFAULT_CONFIDENCE, "default")
    if not answer_match:
        rule += "+whole_text"
    return answer, min(1.0, max(0.0, confidence)), rule


_ERROR_LIKE = ("error:", "exception:", "analysis failed", "api call failed")


def is_error_like(text: str) -> bool:
    """A-L3: a tool-less reply that is no answer (empty, "none", or an error message)."""
    body = (text or "").strip().lower()
    return not body or body == "none" or any(body.startswith(m) or m in body[:80] for m in _ERROR_LIKE)


def first_caption_line(text: str) -> str:
    """A-T2: the caption model's first non-empty line, without a leading "Caption:"."""
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
    return re.sub(r"^\**caption\**\s*[:：]\s*", "", line, flags=re.IGNORECASE).strip()
