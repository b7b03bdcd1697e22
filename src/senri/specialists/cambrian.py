"""Cambrian-S-7B (C) and Cambrian-S-7B-LFP (L): frames, pixels, tokens, prompt and answer rules.

Restated from shared/spec/direct_specialists.md §1–2 and checked against the release cases
(``release_cases/cambrian_s``). Where a case and the spec disagree the case wins (README §7.4): the unpad crop
keeps ``side − 2·((side − int(H·side/W)) // 2)`` rows (an odd product keeps one more row, C-I4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: C-I1: the documented benchmark defaults (NUM_FRAMES 128, MIV_TOKEN_LEN 64 → an 8×8 grid), 1 fps.
MAX_FRAMES = 128
TOKEN_LEN = 64
VIDEO_FPS = 1
IMAGE_SIZE = 384
#: C-I3: the canvas grey, int(0.5 · 255).
PAD_GREY = (127, 127, 127)


def frame_indices(n_frames: int, avg_fps: float, max_frames: int = MAX_FRAMES, video_fps: float = VIDEO_FPS,
                  force_sample: bool = False) -> list[int]:
    """C-I2: every ``round(avg_fps / video_fps)``-th frame (Python's round, half to even), or, when that gives
    more than ``max_frames`` (or ``force_sample``), ``np.linspace(0, N − 1, max_frames, dtype=int)`` (truncated).
    ``max_frames`` ≤ 0: no cap (L-I1). A step of 0 (avg_fps < video_fps / 2) raises ValueError as ``range`` does
    in the release."""
    step = round(avg_fps / video_fps)
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    indices = list(range(0, n_frames, step))
    if max_frames > 0 and (len(indices) > max_frames or force_sample):
        indices = [int(i) for i in np.linspace(0, n_frames - 1, max_frames, dtype=int)]
    return indices


def stream_indices(n_frames: int, avg_fps: float, rate: float = 1.0) -> list[int]:
    """L-I1, senri's choice: a ``rate``-fps stream of the source, frame round(k · avg_fps / rate) for k = 0, 1, …
    while below N (the release reads every frame of a file assumed to be a 1-fps stream)."""
    out, k = [], 0
    while True:
        index = round(k * avg_fps / rate)
        if index >= n_frames:
            return out
        out.append(int(index))
        k += 1


@dataclass(frozen=True)
class SquareCanvas:
    """C-I3: where a W×H frame lands on its grey square canvas (``same`` for a square frame: no canvas)."""

    size: int
    paste_xy: tuple[int, int]
    same: bool


def square_canvas(width: int, height: int) -> SquareCanvas:
    if width == height:
        return SquareCanvas(width, (0, 0), True)
    if width > height:
        return SquareCanvas(width, (0, (width - height) // 2), False)
    return SquareCanvas(height, ((height - width) // 2, 0), False)


def pad_to_square(image: np.ndarray, grey: tuple[int, int, int] = PAD_GREY) -> np.ndarray:
    """An RGB frame pasted on its grey square canvas (C-I3)."""
    height, width = image.shape[:2]
    canvas = square_canvas(width, height)
    if canvas.same:
        return image
    out = np.empty((canvas.size, canvas.size, 3), dtype=np.uint8)
    out[:] = np.array(grey, dtype=np.uint8)
    x, y = canvas.paste_xy
    out[y:y + height, x:x + width] = image
    return out


def resize_square(image: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """``size``×``size`` by PIL bicubic on the uint8 frame (the SigLIP processor's resize, resample 3); the L path
    calls it on the unpadded frame, which squashes it (L-I2)."""
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((size, size), Image.BICUBIC))


def normalise(image: np.ndarray) -> np.ndarray:
    """Rescale by 1/255 and normalise with mean = std = 0.5 (C-I3), channels last, float32."""
    return ((image.astype(np.float32) / np.float32(255.0)) - np.float32(0.5)) / np.float32(0.5)


def model_pixels(image: np.ndarray, squash: bool = False) -> np.ndarray:
    """The 384² uint8 frame the model's tower sees: padded to a grey square first (C) or squashed (L)."""
    return resize_square(image if squash else pad_to_square(image))


@dataclass(frozen=True)
class UnpadGrid:
    rows: tuple[int, ...]
    cols: tuple[int, ...]

    @property
    def hw(self) -> tuple[int, int]:
        return len(self.rows), len(self.cols)

    @property
    def tokens(self) -> int:
        """Tokens per frame: the kept rows, each with its newline token (C-I4)."""
        height, width = self.hw
        return height * (width + 1)


def unpad_grid(width: int, height: int, side: int = 8) -> UnpadGrid:
    """C-I4 as the release computes it: the grid rows (landscape) or columns (portrait) that covered the
    content, from ``int(H · (side / W))`` in floating point and ``padding = (side − that) // 2`` per side."""
    every = tuple(range(side))
    if width / height > 1:
        kept = int(height * (side / width))
        padding = (side - kept) // 2
        return UnpadGrid(tuple(range(padding, side - padding)), every)
    if width / height < 1:
        kept = int(width * (side / height))
        padding = (side - kept) // 2
        return UnpadGrid(every, tuple(range(padding, side - padding)))
    return UnpadGrid(every, every)


def tokens_per_frame(width: int, height: int, token_len: int = TOKEN_LEN) -> int:
    return unpad_grid(width, height, int(round(token_len ** 0.5))).tokens


def sequence_length(width: int, height: int, frames: int, prompt_ids: int, token_len: int = TOKEN_LEN) -> int:
    """The input length once the single image placeholder is replaced by every frame's tokens (C-I4)."""
    return prompt_ids - 1 + frames * tokens_per_frame(width, height, token_len)


# --------------------------------------------------------------------------------------------------- prompts
def chatml(system: str, user_text: str, placeholder: str = "<image>") -> str:
    """C-P1: the Qwen ChatML prompt with a system turn and one user turn that starts with the image placeholder
    on its own line (mm_use_im_start_end False), ending in the assistant header."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{placeholder}\n{user_text}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def lettered(options: Sequence[str]) -> list[str]:
    """"A. text" option lines (Video-MME's own form, C-P2 / L-P1)."""
    return [f"{chr(ord('A') + i)}. {text}" for i, text in enumerate(options)]


# ----------------------------------------------------------------------------------------------------- parsers
#: C-A1's prefixes as the release lists them: two pairs are joined by missing commas, so each pair is one
#: prefix that matches only when both parts occur together.
_VIDEOMME_PREFIXES = ("The best answer is", "The correct answer is", "The answer is", "The answer",
                      "The best option is" "The correct option is", "Best answer:" "Best option:")


def videomme_letter(reply: str, prefixes: Sequence[str] = _VIDEOMME_PREFIXES) -> str:
    """C-A1 (Video-MME's extract rule): drop the listed prefixes; "" when over 10 words remain with no A–D
    capital; else the first capital A–D anywhere ("Clearly, B" → C). "" when there is none."""
    text = reply.strip()
    for prefix in prefixes:
        text = text.replace(prefix, "")
    if len(text.split()) > 10 and not re.search("[ABCD]", text):
        return ""
    match = re.search("[ABCD]", text)
    return match[0] if match else ""


def first_word(reply: str) -> str:
    """L-A1: the first space-separated word of the stripped reply, trailing dots removed ("B." → B)."""
    return reply.strip().split(" ")[0].rstrip(".")


def first_word_letter(reply: str, letters: Sequence[str]) -> str | None:
    """L-A1 as senri reads it: the first word when it is exactly one of the question's letters (compared
    case-insensitively, as the release's exact match is); "B)", "(B" and "Clearly," are no letter."""
    word = first_word(reply).upper()
    return word if word in tuple(letters) else None


def videomme_text(prompts, question: str, options: Sequence[str]) -> str:
    """C-P2: the Video-MME task text (instruction, the question as given, "A. text" lines, a blank line, the
    letter cue), from the ``videomme`` role of the ``cambrian_s`` prompt family."""
    return prompts.render("videomme", question=question, options="\n".join(lettered(options)))


def lfp_text(prompts, question: str, options: Sequence[str]) -> str:
    """L-P1: the VSI-SUPER task text (the stripped question, "Options:", the option lines, the letter cue)."""
    return prompts.render("vsr", question=question.strip(), options="\n".join(lettered(options)))
