"""VideoChat3-4B (V): frame indices and rate, the two-stage resize, the LVBench / Video-MME texts and parsers.

Restated from shared/spec/direct_specialists.md §4 and checked against the release cases
(``release_cases/videochat3``). Where a case and the spec disagree the case wins (README §7.4): the capped
indices are ``int(i · (N / (L + 1)))`` in floating point (one frame low where i·N/(L+1) is an integer, unlike
:func:`senri.resample.capped_rate_indices`), and the reported rate is L / duration whenever exactly L
frames result, capped or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from senri.resample import smart_resize, video_frame_max_pixels

TARGET_FPS = 2.0
PATCH = 14
MERGE = 28          # 2×2 spatial merge of 14-px patches: a token covers 28×28 px of a 4-frame clip
STAGE1_FACTOR = 56  # qwen-vl-utils' fetch_image at image_patch_size 28 (V-I3's library quirk)
MIN_PIXELS = 784
MAX_PIXELS = 200704
CLIP_FRAMES = 4


@dataclass(frozen=True)
class VideoPreset:
    """V-I1: a dataset preset of the release (VD)."""

    frames_limit: int
    total_pixels: int
    text: str  # lvbench | videomme


#: V-I1 / D3.
PRESETS: Mapping[str, VideoPreset] = {
    "lvbench": VideoPreset(2048, 80000 * 2 * 4 * 14 * 14, "lvbench"),
    "videomme": VideoPreset(1024, 80000 * 2 * 4 * 14 * 14, "videomme"),
    "longvideobench": VideoPreset(2048, 64000 * 2 * 4 * 14 * 14, "lvbench"),
}


def frame_rate(rate: str) -> float:
    """ffprobe's avg_frame_rate "num/den" as a float ("0/0" raises ZeroDivisionError, as in the release)."""
    num, _, den = rate.partition("/")
    return float(num) / float(den or 1)


def sample_indices(n_frames: int, fps: float, frames_limit: int, target_fps: float = TARGET_FPS,
                   duration_s: float | None = None) -> tuple[list[int], float]:
    """V-I2: int(N / fps · target) frames required; over ``frames_limit`` L, int(i · (N / (L + 1))) for
    i = 1…L in floating point, else int(i · (fps / target)) for each required i. The reported rate is
    L / duration when exactly L frames result, else ``target_fps``; ``duration_s`` is the container's (LVBench's
    ffprobe), N / fps when not given (Video-MME's decord)."""
    if target_fps <= 0:
        raise AssertionError("the video preset's fps must be > 0 for a video model")
    required = int(n_frames / fps * target_fps)
    if required > frames_limit:
        step = n_frames / (frames_limit + 1)
        indices = [int(i * step) for i in range(1, frames_limit + 1)]
    else:
        step = fps / target_fps
        indices = [int(i * step) for i in range(required)]
    duration = n_frames / fps if duration_s is None else duration_s
    rate = frames_limit / duration if len(indices) == frames_limit else target_fps
    return indices, rate


def stage1_size(height: int, width: int) -> tuple[int, int]:
    """V-I3 stage 1: fetch_image at factor 56 within [784, 200704] px."""
    return smart_resize(height, width, STAGE1_FACTOR, MIN_PIXELS, MAX_PIXELS)


def padded_count(n_frames: int) -> int:
    """The frame count padded to even by repeating the last frame (V-I3)."""
    return n_frames + n_frames % 2


def stage2_max_pixels(n_frames: int, total_pixels: int) -> int:
    """V-I3 stage 2's per-frame ceiling: max(min(768·784, total / n · 2), 823) for the padded n, then ≤ 200704."""
    return min(video_frame_max_pixels(total_pixels, padded_count(n_frames), 768 * 784, int(MIN_PIXELS * 1.05)),
               MAX_PIXELS)


def frame_sizes(sizes_hw: Sequence[tuple[int, int]], total_pixels: int) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """V-I3: every frame's stage-1 size and the final size all frames share. Frames whose stage-1 sizes differ
    cannot be stacked (RuntimeError, as torch.stack); a side of 0 cannot be resized (ValueError)."""
    sizes = {size: stage1_size(*size) for size in set(sizes_hw)}
    stage1 = [sizes[size] for size in sizes_hw]
    for h, w in stage1:
        if h <= 0 or w <= 0:
            raise ValueError("height and width must be > 0")
    if len(set(stage1)) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, got stage-1 sizes {sorted(set(stage1))}")
    h1, w1 = stage1[0]
    final = smart_resize(h1, w1, MERGE, MIN_PIXELS, stage2_max_pixels(len(sizes_hw), total_pixels))
    return stage1, final


def tokens_per_clip(height: int, width: int) -> int:
    """Visual tokens of one 4-frame clip at ``height`` × ``width`` (14-px patches, 2×2 × 4 merge)."""
    return (height // MERGE) * (width // MERGE)


def visual_tokens(n_frames: int, height: int, width: int) -> int:
    clips = -(-padded_count(n_frames) // CLIP_FRAMES)
    return clips * tokens_per_clip(height, width)


# --------------------------------------------------------------------------------------------------- prompts
def lvbench_question(question: str, options: Sequence[str]) -> str:
    """A question in LVBench's own combined form: the stem, then "(A) text" lines."""
    return question + "\n" + "\n".join(f"({chr(ord('A') + i)}) {text}" for i, text in enumerate(options))


def split_lvbench(combined: str) -> tuple[str, str]:
    """V-P1: the stem is everything before the first "(A)" (its trailing newline kept: a blank line follows
    it), the choices everything from there; a question without "(A)" is refused (AssertionError)."""
    if "(A)" not in combined:
        raise AssertionError("an LVBench question has its options as (A) … lines")
    at = combined.index("(A)")
    return combined[:at], combined[at:]


# ----------------------------------------------------------------------------------------------------- parsers
_POLISH = (re.compile(r"\(([A-D])\)"), re.compile(r"\[([A-D])\]"), re.compile(r"\b([A-D])[.)]"),
           re.compile(r"[:\s]([A-D])\b"), re.compile(r"(?<![A-Z])([A-D])(?![A-Z])"))


def lvbench_letter(reply: str) -> str:
    """V-A1 (LVBench's rule): on the upper-cased reply, the first match of a letter in parentheses, in
    brackets, a word-initial letter before "." or ")", a letter after ":" or whitespace with a word boundary
    after it, a lone letter with no Latin letter either side; "" when none."""
    text = reply.upper()
    for pattern in _POLISH:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return ""


_VIDEOMME_PREFIXES = ("The best answer is", "The correct answer is", "The answer is", "The answer",
                      "The best option is" "The correct option is", "Best answer:" "Best option:", "Answer:",
                      "Option:")


def videomme_letter(reply: str) -> str:
    """V-A1's Video-MME preset: C-A1's rule with "Answer:" and "Option:" among the prefixes."""
    from senri.specialists.cambrian import videomme_letter as first_capital

    return first_capital(reply, _VIDEOMME_PREFIXES)
