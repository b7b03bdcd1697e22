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


def snapshot_counts(wanted: Any, limit: int) -> tuple[int, int]:
    """A-T2/A-T3, as the released code reads scene_snapper's ``num_frames`` argument (absent: 30): the frames
    the caption model gets (one of 30/60/90/150, anything else 30) and the frames attached for the controller
    (the raw argument as an integer, capped at ``limit``; unreadable or 0: ``limit``; a negative one stays
    negative and gets no frame, :func:`split_frames`). ``"60"`` is 30 for the
    caption and 60 for the controller, as in the release. ``60.0`` passes the release's membership test and
    stays a float, which its sampler cannot count with (``range(60.0)``): the call fails there, so it raises
    ValueError here (issue 60's generated cases; senri had read it as 60)."""
    if isinstance(wanted, float) and wanted in SNAPPER_COUNTS:
        raise ValueError(f"scene_snapper: num_frames {wanted!r} is a float; the released sampler needs an integer "
                         f"({', '.join(map(str, SNAPPER_COUNTS))})")
    caption = int(wanted) if wanted in SNAPPER_COUNTS and not isinstance(wanted, bool) else SNAPPER_COUNTS[0]
    try:
        raw = int(wanted)
    except (TypeError, ValueError, OverflowError):
        raw = 0
    return caption, min(raw or limit, limit)  # the release's min(num_frames or limit, limit): a negative stays


def split_frames(ranges: Sequence[tuple[int, int]], total: int, total_frames: int) -> list[list[int]]:
    """A-T2: the frame indices ``total`` frames spread over ``ranges`` (as the model wrote them, inclusive), one
    list per range, as the released code computes them: each range is clamped to ``[0, total_frames − 1]``;
    every range but the last gets ``max(1, int(total · ratio))`` frames with ``ratio`` = its clamped length over
    the sum of the *unclamped* lengths, the last gets what is left of ``total`` after the frames already taken
    (each range gives at most its own length, :func:`sample_indices`); the split stops once ``total`` frames
    are taken (later ranges get none) and never returns more. So it can return fewer than ``total`` (10
    one-frame ranges give 10), skip ranges (40 one-frame ranges stop after 30) and repeat indices where ranges
    overlap. A range that is empty after clamping raises ValueError (the release: "Invalid frame range.")."""
    ranges = [(int(s), int(e)) for s, e in ranges]
    if not ranges:
        return []
    total_length = sum(e - s + 1 for s, e in ranges)
    out: list[list[int]] = []
    taken = 0
    for k, (s, e) in enumerate(ranges):
        start, end = max(0, s), min(total_frames - 1, e)
        if total_length == 0:  # the release divides by it (ZeroDivisionError); a negative sum just gives 1 frame
            raise ValueError(f"Invalid frame ranges {ranges}: their lengths as written sum to 0")
        if end < start:
            raise ValueError(f"Invalid frame range: {s}–{e} (the video has frames 0–{total_frames - 1})")
        count = max(1, int(total * ((end - start + 1) / total_length)))
        if k == len(ranges) - 1:
            count = total - taken
        indices = sample_indices(start, end, count)[: max(0, total - taken)]
        out.append(indices)
        taken += len(indices)
        if taken >= total:
            break
    return out


def snapshot_summary(ranges: Sequence[tuple[int, int]], frames_loaded: int, fps: float) -> dict[str, Any]:
    """scene_snapper's result fields as the released code words them: ``total_duration`` is the ranges'
    ``(end − start) / fps`` as written (unclamped), and the message says how many frames came from how many
    ranges."""
    seconds = sum((int(e) - int(s)) / (fps or 30.0) for s, e in ranges)
    return {"status": "success", "frames_loaded": frames_loaded, "total_duration": f"{seconds:.1f}s",
            "message": f"Loaded {frames_loaded} frames from {len(ranges)} range(s). Duration: {seconds:.1f}s"}


def clip_range(start: int, end: int, total_frames: int) -> tuple[int, int]:
    """A-T5: clip_analyzer's range as the released code clamps it — the start into ``[0, total − 1]``, the end
    into ``[start, total − 1]`` — and refuses it when that leaves one frame (ValueError, the release's words
    first: "start_frame equals end_frame.")."""
    last = total_frames - 1
    start = max(0, min(int(start), last))
    end = max(start, min(int(end), last))
    if start == end:
        raise ValueError(f"start_frame equals end_frame. (clip_analyzer needs a range of more than one frame of "
                         f"the video's 0–{last}; got {start}–{end} after clamping)")
    return start, end


def clip_frame_range(value: Any, total_frames: int) -> tuple[int, int]:
    """A-T5: clip_analyzer's ``frame_range`` argument as the released code reads it, then :func:`clip_range`: an
    empty or missing one is refused ("No frame range provided."), a missing ``start_frame`` or ``end_frame`` is 0
    (``.get(key, 0)``), each made an int as Python's int() makes it (12.7 → 12, "12" → 12, True → 1); a value
    int() refuses (null, "12.5", a list) or an object that is not a mapping is refused with ValueError naming it
    (the release's tool runner turns its TypeError/ValueError/AttributeError into an error result)."""
    if not value:
        raise ValueError("No frame range provided.")
    if not isinstance(value, dict):
        raise ValueError(f"clip_analyzer's frame_range must be an object of start_frame and end_frame, got {value!r}")
    try:
        start, end = int(value.get("start_frame", 0)), int(value.get("end_frame", 0))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"clip_analyzer's frame_range {value!r} is not two frame indices ({exc})") from None
    return clip_range(start, end, total_frames)


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


def mosaics(frames: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Frames in chunks of 6, each chunk one mosaic (A-T2). As in the released code, a frame that cannot be
    read (None) is left out of its chunk, so the later frames of that chunk move one tile left, and a chunk
    with no readable frame gives no mosaic."""
    grids = []
    for k in range(0, len(frames), TILES_PER_MOSAIC):
        readable = [f for f in frames[k:k + TILES_PER_MOSAIC] if f is not None]
        if readable:
            grids.append(mosaic(readable))
    return grids


def read_indexed_frames(path: str | Path, clock: FrameClock, indices: Sequence[int],
                        short_side: int) -> tuple[list[np.ndarray], int]:
    """The frames at ``indices`` from senri's exact decoder (each target is its frame's own timestamp), each
    with its index drawn on; a frame that fails to decode becomes a black frame of the same size (A-T1).
    Returns the frames and how many decoded (the rest are black: counted ``black_frames``)."""
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
    """A tool call's arguments as senri's ``repair`` reader takes them (``tool_arguments_parser: repair``; the
    default is :func:`release_arguments`): a JSON object, after stripping a code fence and closing the brackets
    and the string the model left open, in the right order. Raises ValueError naming the problem when it is not
    an object."""
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


#: How a tool call's arguments are read (A-T6): ``release`` as the released code reads them
#: (:func:`release_arguments`); ``repair`` is senri's named alternative (:func:`parse_arguments`).
ARGUMENT_PARSERS = ("release", "repair")


def read_arguments(text: str, parser: str = "release") -> dict[str, Any]:
    """A tool call's arguments as an object, by the named parser (:data:`ARGUMENT_PARSERS`); ValueError when
    there is none (the call is then an error result that changes nothing, A-T6)."""
    if parser == "release":
        return release_arguments(text)
    if parser == "repair":
        return parse_arguments(text)
    raise ValueError(f"tool arguments parser {parser!r}: one of {', '.join(ARGUMENT_PARSERS)}")


def release_arguments(text: Any) -> dict[str, Any]:
    """A-T6 as the released code reads a tool call's arguments (its JSON reader, then its dispatcher's
    ``tool(**arguments)``, which refuses anything but an object). Issue 60's generated cases showed senri's
    repairing reader (:func:`parse_arguments`) taking other calls than the release, so this is the default.

    The reader: the text as JSON; else the text with every code fence marker removed; else the first ``{`` or
    ``[`` and the bracket that closes it, counting brackets only (brackets inside strings count too) and
    skipping a closer of the other kind — the first balanced piece is the value when it parses, and the first
    one that does not ends this step; else the longest prefix from that first bracket that parses once the
    ``}`` it leaves open and then the ``]`` are appended. So prose around an object is dropped, of two objects
    written back to back the first is taken, ``{"frame_ranges": [{...}`` cut off reads as ``{}``, and a cut-off
    string drops the key it belongs to. Not a string, blank, no value found, or a value that is not an object:
    ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"tool arguments are empty or not text: {text!r}"[:200])
    value = _release_json(text)
    if value is _UNREADABLE:
        raise ValueError(f"tool arguments are not valid JSON: {text[:200]}")
    if not isinstance(value, dict):
        raise ValueError(f"tool arguments are not a JSON object: {text[:200]}")
    return value


def _release_json(text: str) -> Any:
    """The released JSON reader's value for ``text`` (see :func:`release_arguments`), or :data:`_UNREADABLE`."""
    for candidate in (text, text.replace("```json", "").replace("```", "").strip()):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    first = next((i for i, char in enumerate(text) if char in "{["), -1)
    if first < 0:
        return _UNREADABLE
    open_brackets: list[str] = []
    for i in range(first, len(text)):
        char = text[i]
        if char in "{[":
            open_brackets.append(char)
        elif char in "}]" and open_brackets and (char == "}") == (open_brackets[-1] == "{"):
            open_brackets.pop()
            if not open_brackets:
                try:
                    return json.loads(text[first:i + 1])
                except json.JSONDecodeError:
                    break
    for end in range(len(text), first, -1):
        piece = text[first:end]
        braces, brackets = piece.count("{") - piece.count("}"), piece.count("[") - piece.count("]")
        if braces > 0 or brackets > 0:
            try:
                return json.loads(piece + "}" * braces + "]" * brackets)
            except json.JSONDecodeError:
                continue
    return _UNREADABLE


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


#: Markers of a tool call written into a reply's text: a Hermes/Qwen ``<tool_call>`` block, a Llama
#: ``<|python_tag|>``, a ``<function=…>`` tag, or a JSON/Python object keyed ``tool``/``name``/``function``.
_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_CALL_MARKERS = re.compile(r"<tool_call>|<\|python_tag\|>|<function[=\s>]"
                           r"|[{,]\s*[\"']?(?:tool|function|name)[\"']?\s*:")


def _balanced(text: str, start: int) -> int | None:
    """The index just past the bracket closing the ``{`` or ``[`` at ``start`` (strings in either quote
    skipped), or None when the text ends first (a cut-off object)."""
    stack, quote, escaped = [], None, False
    for i in range(start, len(text)):
        char = text[i]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "\"'":
            quote = char
        elif char in "{[":
            stack.append(char)
        elif char in "}]":
            if stack:
                stack.pop()
            if not stack:
                return i + 1
    return None


def _literal(text: str) -> Any:
    """A JSON value, or a Python literal (single quotes, True/None): what models write for a dict."""
    import ast

    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _UNREADABLE


_UNREADABLE = object()
#: How many bracketed pieces of one reply are tried at most.
MAX_BRACKET_SCANS = 400


def _objects(text: str) -> tuple[list[Any], list[str]]:
    """The top-level objects and arrays in ``text`` that parse (as JSON or a Python literal), in order, and the
    bracketed pieces that do not (unreadable, or cut off: the text ends inside them)."""
    found, bad, position, cut_from = [], [], 0, None
    for _ in range(MAX_BRACKET_SCANS):  # bounds the work on a long reply full of unclosed brackets
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        end = _balanced(text, start)
        if end is None:  # cut off (or a stray quote in prose): noted once, and the scan goes on after it
            if cut_from is None:
                cut_from = start
                bad.append(text[start:])
            position = start + 1
            continue
        value = _literal(text[start:end])
        if value is _UNREADABLE:
            bad.append(text[start:end])
            position = start + 1
        else:
            found.append(value)
            position = end
    return found, bad


def _as_calls(value: Any, tools: frozenset[str] | None) -> list[dict[str, Any]]:
    """The tool calls a parsed value holds: ``{"tool": name, "arguments"}`` (the JSON action form), a call
    under ``"name"`` naming a known tool (with ``arguments`` or ``parameters``), an OpenAI-style
    ``{"function": {"name", "arguments"}}``, lists of these, or any of them under ``"tool_calls"``."""
    calls: list[dict[str, Any]] = []
    if isinstance(value, list):
        for item in value:
            calls += _as_calls(item, tools)
        return calls
    if not isinstance(value, dict):
        return calls
    if isinstance(value.get("tool_calls"), list):
        return _as_calls(value["tool_calls"], tools)
    if isinstance(value.get("function"), dict) and isinstance(value["function"].get("name"), str):
        return _as_calls(value["function"], tools)
    name = value.get("tool") if isinstance(value.get("tool"), str) else None
    if name is None and isinstance(value.get("name"), str) and (tools is None or value["name"] in tools) \
            and set(value) <= {"name", "arguments", "parameters", "type", "id"}:
        name = value["name"]
    if name is None:
        return calls
    arguments = value.get("arguments", value.get("parameters", {}))
    calls.append({"name": name, "arguments": arguments if isinstance(arguments, str)
                  else json.dumps(arguments, ensure_ascii=False)})
    return calls


@dataclass(frozen=True)
class TextCalls:
    """What a reply's text holds as tool calls: the calls read from it, and why a tool call that is there could
    not be read (None when there is none)."""

    calls: list[dict[str, Any]]
    unreadable: str | None = None


def text_tool_calls(text: str, tools: Sequence[str] | None = None, truncated: bool = False) -> TextCalls:
    """The tool calls written into a reply's text (A-L3's "a reply without a tool call is the answer" must not
    take one for an answer): ``<tool_call>`` blocks (Hermes/Qwen, what a server without a tool-call parser
    passes on), JSON action objects ``{"tool", "arguments"}``, objects naming a known tool under ``"name"``
    (``tools``: the tool names; None accepts any name), OpenAI-style ``function`` objects and Python-literal
    dicts, each as ``{"name", "arguments"}`` with the arguments as JSON text. A call is taken only when it
    parses whole; a call-shaped piece that does not (invalid JSON, or cut off: the text ends inside it, or the
    reply was ``truncated`` at its token limit) is reported in ``unreadable`` instead, never guessed at."""
    known = frozenset(tools) if tools is not None else None
    text = text or ""
    blocks = [m.group(1) for m in _CALL_TAG.finditer(text)]
    calls: list[dict[str, Any]] = []
    problems: list[str] = []
    if blocks:
        for block in blocks:
            found, bad = _objects(block)
            block_calls = [c for value in found for c in _as_calls(value, None)]
            if block_calls and not bad:
                calls += block_calls
            else:
                problems.append(f"a <tool_call> block that is not a readable call: {block.strip()[:120]!r}")
    else:
        found, bad = _objects(text)
        for value in found:
            calls += _as_calls(value, known)
        for piece in bad:
            if _CALL_MARKERS.search(piece) and (known is None or any(name in piece for name in known)
                                                or re.search(r"[\"']tool[\"']\s*:", piece)):
                cut = _balanced(piece, 0) is None
                problems.append(("a tool call cut off before its end" if cut or truncated else
                                 "a tool call that is not valid JSON") + f": {piece.strip()[:120]!r}")
        if not calls and not problems and re.search(r"<\|python_tag\|>|<function[=\s>]", text):
            problems.append(f"a tool call in a form senri does not read: {text.strip()[:120]!r}")
    return TextCalls(calls, "; ".join(problems) or None)


def json_actions(text: str, tools: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The tool calls of a reply in the JSON action form (:func:`text_tool_calls`'s calls). A reply with none
    is an answer (A-L3)."""
    return text_tool_calls(text, tools).calls


_NUMBER = re.compile(r"([0-9]*\.?[0-9]+)")
DEFAULT_CONFIDENCE = 0.5
#: The clip analyzer's reply parsers (A-T5): ``release`` reads it as the released code does; ``lenient`` is
#: senri's named alternative.
CLIP_PARSERS = ("release", "lenient")


def parse_clip_reply(text: str, parser: str = "release") -> tuple[str, float, str]:
    """The clip analyzer's answer and confidence (A-T5). Returns (answer, confidence, rule), rule naming how
    they were found.

    ``release`` (the released code, line by line): a stripped line starting with ``Answer:`` (case-sensitive;
    ``**Answer:**`` is not one) sets the answer, so the last such line wins; one starting with
    ``Confidence:`` sets the confidence when the rest is a number (``80%`` is not). No answer line: the whole
    reply is the answer; no confidence: the first unsigned number anywhere in the reply (``2 cups`` → 2, 80%
    → 80), else 0.5; clamped to [0, 1]. So ``Answer: 2 cups`` has confidence 1.0 and an empty reply is the
    answer ``""`` at 0.5.

    ``lenient``: ``Answer``/``Confidence`` labels in any case and inside Markdown emphasis (``**Answer:**
    red``), the last answer line winning; a confidence only from a confidence label, ``80%`` or ``80`` read as
    0.8; none: 0.5 (never a number from the answer); an empty reply raises ValueError (no answer to keep)."""
    text = (text or "").strip()
    if parser == "lenient":
        return _parse_clip_lenient(text)
    if parser != "release":
        raise ValueError(f"clip reply parser {parser!r}: one of {', '.join(CLIP_PARSERS)}")
    answer: str | None = None
    confidence: float | None = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Answer:"):
            answer = line[len("Answer:"):].strip()
        elif line.startswith("Confidence:"):
            try:
                confidence = max(0.0, min(1.0, float(line[len("Confidence:"):].strip())))
            except ValueError:
                pass
    rule = "lines"
    if confidence is None:
        number = _NUMBER.search(text)
        confidence, rule = (max(0.0, min(1.0, float(number.group(1)))), "first_number") if number \
            else (DEFAULT_CONFIDENCE, "default")
    if answer is None:
        answer, rule = text, rule + "+whole_text"
    return answer, confidence, rule


_LENIENT_ANSWER = re.compile(r"^\s*[*_#>\s]*answer[*_\s]*[:：][*_\s]*(.*?)[*_\s]*$", re.IGNORECASE | re.MULTILINE)
_LENIENT_CONFIDENCE = re.compile(r"[(\[]?\s*[*_]*confidence[*_\s]*[:：=]?[*_\s]*(-?\d+(?:\.\d+)?)\s*(%?)[*_\s]*[)\]]?",
                                 re.IGNORECASE)


def _parse_clip_lenient(text: str) -> tuple[str, float, str]:
    if not text:
        raise ValueError("the clip analyzer's reply is empty")
    answers = _LENIENT_ANSWER.findall(text)
    confidences = list(_LENIENT_CONFIDENCE.finditer(text))
    if confidences:
        match = confidences[-1]
        value = float(match.group(1))
        if match.group(2) or value > 1:
            value /= 100
        confidence, rule = max(0.0, min(1.0, value)), "lines"
    else:
        confidence, rule = DEFAULT_CONFIDENCE, "default"
    if answers:
        answer = _LENIENT_CONFIDENCE.sub("", answers[-1]).strip() or answers[-1].strip()
    else:
        answer, rule = _LENIENT_CONFIDENCE.sub("", text).strip() or text, rule + "+whole_text"
    return answer, confidence, rule


_ERROR_LIKE = ("analysis failed", "api call failed", "error:", "exception:")


def is_error_like(text: str, chars: int | None = None) -> bool:
    """A-L3: a tool-less reply that is no answer: empty, "none", or holding an error text ("error:",
    "exception:", "analysis failed", "api call failed") anywhere, as the released code checks the whole
    reply (so an answer that mentions "error:" spends its step too). ``chars``: look for the error texts in
    the first ``chars`` characters only (senri's named alternative, ``error_check_chars``)."""
    body = (text or "").strip().lower()
    if not body or body == "none":
        return True
    scope = body if chars is None else body[:chars]
    return any(marker in scope for marker in _ERROR_LIKE)


def first_caption_line(text: str) -> str:
    """A-T2: the caption model's reply, stripped, cut to its first line, without a leading "Caption:" (any
    case), as the released code reads it."""
    line = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return line[len("caption:"):].strip() if line.lower().startswith("caption:") else line
