"""InternVideo3-8B (I): frame count and indices, frame size, pair timestamps, MCQ text and answer parser.

Restated from shared/spec/direct_specialists.md §3 and checked against the release cases
(``release_cases/internvideo3``), which ran the release's SFT data code (its benchmark path is not published).
Where a case and the spec disagree the case wins (README §7.4): below 4 source frames the release repeats
indices (N = 2 → [0, 0, 1, 1]) rather than giving N.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from senri.resample import smart_resize

#: I-I1 / D4: the long-video scripts' arguments.
FPS = 4
MAX_FRAMES = 1024
MIN_FRAMES = 4
FRAME_PIXELS = 256 * 32 * 32
FACTOR = 32
TEMPORAL = 2
#: I-A1: the Video-MME-v2 script's letters.
PARSER_LETTERS = "ABCDEFGH"
#: I-D1: the scripts' completion limit.
MAX_NEW_TOKENS = 64


def sample_frames(n_frames: int, avg_fps: float, fps: float = FPS, min_frames: int = MIN_FRAMES,
                  max_frames: int = MAX_FRAMES) -> list[int]:
    """I-I2 as the release's data code computes it: n = int(N / avg_fps · fps) clamped to [min, max] and to N,
    then raised to ``min_frames`` again; indices round(linspace(0, N − 1, n)) in float64, half to even."""
    n = int(n_frames / avg_fps * fps)
    n = min(max(n, min_frames), max_frames, n_frames)
    n = max(n, min_frames)
    return [int(i) for i in np.round(np.linspace(0, n_frames - 1, n))]


def pair_times(indices: Sequence[int], avg_fps: float, merge: int = TEMPORAL) -> list[float]:
    """I-I4: one time per temporal pair, the mean of its first and last frame's index / avg_fps; an odd count
    repeats the last index."""
    padded = list(indices) + [indices[-1]] * ((-len(indices)) % merge) if indices else []
    times = [i / avg_fps for i in padded]
    return [(times[k] + times[k + merge - 1]) / 2 for k in range(0, len(times), merge)]


def stamp(seconds: float) -> str:
    """"<t seconds>" with one decimal (Python's format: 0.25 → 0.2)."""
    return f"<{seconds:.1f} seconds>"


def video_resize(n_frames: int, height: int, width: int, factor: int = FACTOR, min_pixels: int = FRAME_PIXELS,
                 max_pixels: int = FRAME_PIXELS, temporal: int = TEMPORAL) -> tuple[int, int]:
    """Qwen3-VL's video smart_resize (the release's copy): the pixel budget covers the whole video, so
    262,144 px over 1,024 frames collapses every frame to factor × factor (I-I3's quirk)."""
    if height < factor or width < factor:
        raise ValueError(f"height:{height} or width:{width} must be larger than factor:{factor}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")
    h, w = round(height / factor) * factor, round(width / factor) * factor
    t = math.ceil(n_frames / temporal) * temporal
    if t * h * w > max_pixels:
        beta = math.sqrt(n_frames * height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif t * h * w < min_pixels:
        beta = math.sqrt(min_pixels / (n_frames * height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def frame_size(n_frames: int, height: int, width: int, budget: str = "per_frame", factor: int = FACTOR,
               min_pixels: int = FRAME_PIXELS, max_pixels: int = FRAME_PIXELS) -> tuple[int, int]:
    """I-I3: the size every frame is resized to. ``per_frame`` (senri's default, qwen-vl-utils' convention):
    min/max pixels bound each frame (1920×1080 → 672×384). ``whole_video`` (Hugging Face's): they bound the
    whole video; a result of factor × factor is the collapse the spec names, refused with an error."""
    if budget == "per_frame":
        return smart_resize(height, width, factor, min_pixels, max_pixels)
    if budget != "whole_video":
        raise ValueError(f"frame_pixel_budget {budget!r}: per_frame or whole_video")
    size = video_resize(n_frames, height, width, factor, min_pixels, max_pixels)
    if size == (factor, factor) and (height, width) != (factor, factor):
        raise ValueError(f"frame_pixel_budget whole_video: {min_pixels}–{max_pixels} px over {n_frames} frames "
                         f"collapses every {width}×{height} frame to {factor}×{factor} (I-I3); use per_frame")
    return size


def tokens_per_pair(height: int, width: int, factor: int = FACTOR) -> int:
    return (height // factor) * (width // factor)


def layout(tokens: Sequence[Sequence[int]], stamps: Sequence[Sequence[float]], text: str,
           add_vision_id: bool = False, clip_range: Sequence[float] | None = None,
           placeholder: str = "<VIDEO_CONTEXT>") -> tuple[list[str], list[int], str]:
    """I-I4's layout of a message's videos: each placeholder becomes, per temporal pair, its stamp and vision
    block ("#" here), a "Video k: " label first with ``add_vision_id``, a "<a-b seconds>" clip stamp after with
    ``clip_range``. Returns the stamps in order, the tokens of each block and the text around them."""
    if text.count(placeholder) != len(tokens):
        raise AssertionError(f"VIDEO ERROR: total_image_idx: {text.count(placeholder)} != {len(tokens)}")
    shown, blocks, pieces = [], [], text.split(placeholder)
    out = pieces[0]
    for k, video in enumerate(tokens):
        times = stamps[k] if k < len(stamps) else []
        out += f"Video {k + 1}: " if add_vision_id else ""
        for j, count in enumerate(video):
            if j < len(times):
                shown.append(stamp(times[j]))
            blocks.append(count)
            out += "#"
        if clip_range is not None:
            clip = f"<{clip_range[0]:.1f}-{clip_range[1]:.1f} seconds>"
            shown.append(clip)
            out += clip
        out += pieces[k + 1]
    return shown, blocks, out


def parse_answer(reply: str, letters: str = PARSER_LETTERS) -> str:
    """I-A1: the stripped reply's first character upper-cased if it is one of ``letters``; else the first
    "answer is"/"answer:"-optional letter in range with a word boundary after it (no boundary needed before:
    "The answer is B" → E); else the first character upper-cased, whatever it is ("" for an empty reply)."""
    text = reply.strip()
    if not text:
        return ""
    if text[0].upper() in letters:
        return text[0].upper()
    match = re.search(rf"(?:answer is|answer:)?\s*([{letters[0]}-{letters[-1]}])\b", text, re.IGNORECASE)
    if match:
        return match.group(1).upper()
    return text[0].upper()
