"""The crop/re-sample arithmetic ParaVT and Video-o3 share (issue 38; ``shared/spec/evidence_seekers.md`` S3,
P-I1/I2, P-T1/T3, O-I1/I2, O-T1/T2, worked vectors V1–V3, V6), and the direct-perception specialists' resize rules
reuse (issue 61): below the methods and the specialists' release rules, so both import it downward.

Both releases decode a requested window again from the source video with qwen-vl-utils' rules, so a faithful
re-implementation must pick the same frame indices and the same pixel sizes (on senri's exact decoder, which
reads the source's frame count and average rate):

- :func:`window_indices` — start = ceil(clamp(s)·fps), end = min(floor(clamp(e)·fps), N − 1), n frames at
  round(linspace(start, end, n)), the linspace in float32 as torch's CPU kernel computes it
  (:func:`torch_linspace`; float64 gives another frame at a few positions of long spans) and rounded half to
  even;
- :func:`torchvision_fallback` — the frames qwen-vl-utils' torchvision path reads where torchcodec refuses a
  window that holds no whole frame span;
- :func:`smart_nframes` — n = frames in range / fps · target fps, clamped to [min, max] (min rounded up to an
  even number, max down, max at most the frames in range), then floored to even;
- :func:`smart_resize` — both sides multiples of ``factor`` (28 for Qwen2.5-VL's 14-px patches merged 2×2; 32 for
  Qwen3-VL's 16-px ones), scaled down to ``max_pixels`` or up to ``min_pixels`` keeping the aspect ratio;
- the token counts the servers will see (:func:`qwen3_image_tokens`, :func:`qwen25_video_tokens`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: qwen-vl-utils' frame factor: frame counts are even (two frames per temporal patch).
FRAME_FACTOR = 2


def _ceil_by(value: float, factor: int) -> int:
    return int(math.ceil(value / factor) * factor)


def _floor_by(value: float, factor: int) -> int:
    return int(math.floor(value / factor) * factor)


def torch_linspace(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps)`` in float32 as ATen's CPU kernel computes it: the step in float32;
    the first half start + step·i, the second half end − step·(steps − 1 − i); in vector lanes of 8 (AVX2)
    each lane base + k·step from its vector's first element, the tail past the last full pair of vectors
    element by element. The release cases record that torch's AVX-512 and scalar variants agree with this on
    every case; numpy's float64 linspace gives another frame at a few positions of long spans (a 3-h overview's
    59th frame, 3 of 768 frames of a 1-h coarse crop)."""
    f32 = np.float32
    if steps <= 0:
        return np.zeros(0, dtype=f32)
    if steps == 1:
        return np.array([start], dtype=f32)
    first, last = f32(start), f32(end)
    step = f32((last - first) / f32(steps - 1))
    halfway, lanes = steps // 2, 8

    def scalar(i: int) -> np.float32:
        return f32(first + step * f32(i)) if i < halfway else f32(last - step * f32(steps - 1 - i))

    out = np.empty(steps, dtype=f32)
    vectorised = (steps // (2 * lanes)) * 2 * lanes
    for base in range(0, vectorised, lanes):
        head = scalar(base)
        for k in range(lanes):
            out[base + k] = head if k == 0 else f32(head + f32(k) * step)
    for i in range(vectorised, steps):
        out[i] = scalar(i)
    return out


def round_linspace(start: float, end: float, steps: int) -> list[int]:
    """round(torch.linspace(start, end, steps)) as qwen-vl-utils picks frames (float32, half to even)."""
    return [int(i) for i in np.round(torch_linspace(start, end, steps))]


def frame_bounds(start_s: float, end_s: float, fps: float, n_total: int) -> tuple[int, int]:
    """The first and last source frame of a window (S3): ceil of the clamped start × fps, and the floor of the
    clamped end × fps bounded by the last frame."""
    duration = n_total / fps
    start = math.ceil(max(0.0, min(float(start_s), duration)) * fps)
    end = min(math.floor(max(0.0, min(float(end_s), duration)) * fps), n_total - 1)
    return start, end


def smart_nframes(frames_in_range: int, fps: float, target_fps: float, min_frames: int = 4,
                  max_frames: int = 768) -> int:
    """qwen-vl-utils' frame count for a window of ``frames_in_range`` source frames at ``fps``, sampled at
    ``target_fps`` (S3, P-T1, O-T1)."""
    low = _ceil_by(min_frames, FRAME_FACTOR)
    high = _floor_by(min(max_frames, frames_in_range), FRAME_FACTOR)
    n = frames_in_range / fps * target_fps
    n = min(min(max(n, low), high), frames_in_range)
    count = _floor_by(n, FRAME_FACTOR)
    if count < FRAME_FACTOR:
        raise ValueError(f"a window of {frames_in_range} frame(s) gives {count} frames (at least {FRAME_FACTOR})")
    return count


def window_indices(start_s: float, end_s: float, fps: float, n_total: int, target_fps: float,
                   min_frames: int = 4, max_frames: int = 768) -> list[int]:
    """The source frame indices a crop of ``[start_s, end_s]`` decodes (S3): :func:`smart_nframes` frames at
    round(linspace(first, last, n)). A window with no frame (first ≥ last) raises ValueError, as the releases'
    decoders do."""
    first, last = frame_bounds(start_s, end_s, fps, n_total)
    if first >= last:
        raise ValueError(f"window {start_s}–{end_s} s holds no frames (first {first} ≥ last {last})")
    n = smart_nframes(last - first + 1, fps, target_fps, min_frames, max_frames)
    return round_linspace(first, last, n)


def fixed_nframes(requested: int, n_total: int) -> int:
    """qwen-vl-utils' count for an explicit ``nframes``: rounded to even; outside [2, N] it raises ValueError
    (so a 50-frame video gets no 64-frame overview at all)."""
    count = round(requested / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= count <= n_total:
        raise ValueError(f"nframes should be in [{FRAME_FACTOR}, {n_total}], got {count}")
    return count


def overview_indices(n_total: int, n: int) -> list[int]:
    """A uniform overview of the whole video (P-I1): round(linspace(0, N − 1, n)); ValueError where the video
    has fewer than ``n`` frames (:func:`fixed_nframes`)."""
    return round_linspace(0, n_total - 1, fixed_nframes(n, n_total))


def torchvision_window(start_s: float, end_s: float, fps: float, n_total: int,
                       time_base: Fraction | None = None) -> list[int]:
    """The frames ``torchvision.io.read_video`` decodes for [start, end] s (see :func:`torchvision_fallback`).
    With the stream's ``time_base`` it compares as torchvision does, in stream units (start floored, end
    ceiled, frame i at round(i / fps / time_base)); without, in seconds (the same frames unless a bound falls
    within one unit of a frame)."""
    if end_s < start_s:
        raise ValueError(f"end_pts should be larger than start_pts, got {start_s} and {end_s}")
    if time_base is not None:
        units = 1 / time_base
        first = math.floor(start_s * units)
        last = math.inf if end_s == math.inf else math.ceil(end_s * units)
        pts = [round(i * float(units) / fps) for i in range(n_total)]
        decoded = [i for i, p in enumerate(pts) if first <= p <= last]
        before = [i for i, p in enumerate(pts) if p < first]
        if first > 0 and first not in pts and before:
            decoded.insert(0, before[-1])
        return decoded
    eps = 1e-9
    times = np.arange(n_total) / fps
    decoded = [int(i) for i in np.flatnonzero((times >= start_s - eps) & (times <= end_s + eps))]
    exact = bool(decoded) and abs(times[decoded[0]] - start_s) <= eps
    before = np.flatnonzero(times < start_s - eps)
    if start_s > 0 and not exact and before.size:
        decoded.insert(0, int(before[-1]))
    return decoded


def torchvision_fallback(start_s: float, end_s: float, fps: float, n_total: int, target_fps: float,
                         min_frames: int, max_frames: int, time_base: Fraction | None = None) -> list[int]:
    """The frames qwen-vl-utils' torchvision path returns for a window torchcodec refused (S3, P-T2): torchvision
    decodes the frames whose time lies in [start, end] plus, when no frame starts exactly at ``start`` (and
    start > 0), the last frame before it; then :func:`smart_nframes` over those frames (below two it raises)
    and round(linspace) among them. A reversed window raises ValueError, as torchvision does. Frame times are
    compared in the stream's ``time_base`` units as torchvision compares them; without one, in seconds (the two
    differ only where a bound falls within one unit of a frame)."""
    decoded = torchvision_window(start_s, end_s, fps, n_total, time_base)
    n = smart_nframes(len(decoded), fps, target_fps, min_frames, max_frames)
    return [decoded[i] for i in round_linspace(0, len(decoded) - 1, n)]


def capped_rate_indices(n_total: int, fps: float, target_fps: float = 2.0, cap: int = 768
                        ) -> tuple[list[int], float]:
    """Video-o3's main video (O-I1): int(i · fps / target) for i < int(duration · target); over ``cap`` frames,
    int(i · N / (cap + 1)) for i = 1…cap instead. Returns the indices and the sample rate the header reports."""
    duration = n_total / fps
    count = int(duration * target_fps)
    if count <= cap:
        return [int(i * fps / target_fps) for i in range(count)], float(target_fps)
    return [int(i * n_total / (cap + 1)) for i in range(1, cap + 1)], cap / duration


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 14 * 14 * 4 * 1280) -> tuple[int, int]:
    """(height, width) as qwen-vl-utils resizes a frame: multiples of ``factor`` nearest the frame, scaled down
    to ``max_pixels`` or up to ``min_pixels`` (aspect ratio kept). As the releases' copies (qwen-vl-utils
    0.0.14, Video-o3's vision_process.py): an aspect ratio over 200 raises ValueError, and the scaled-down
    branch is not kept at ``factor`` or more, so a thin frame gets a side of 0 (32×4000 → 0×2492), which the
    resize then refuses."""
    if max_pixels < min_pixels:  # the releases assert this before anything else
        raise ValueError(f"max_pixels {max_pixels} must be at least min_pixels {min_pixels}")
    if min(height, width) <= 0:
        raise ValueError(f"a {width}×{height} frame has no pixels")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = _floor_by(height / beta, factor)
        w = _floor_by(width / beta, factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = _ceil_by(height * beta, factor)
        w = _ceil_by(width * beta, factor)
    return h, w


def video_frame_max_pixels(total_pixels: int, n_frames: int, per_frame_cap: int = 768 * 784,
                           floor: int = 16464) -> int:
    """A video's per-frame pixel ceiling under a total budget (O-I2, O-T2): max(min(cap, total / n · 2), floor)."""
    return int(max(min(per_frame_cap, total_pixels / n_frames * FRAME_FACTOR), floor))


def qwen3_image_tokens(height: int, width: int) -> int:
    """Tokens of one image once vLLM's Qwen3-VL processor snaps it to factor 32 within [65536, 16777216] pixels
    (P-T3): (h / 32) · (w / 32)."""
    h, w = smart_resize(height, width, factor=32, min_pixels=65536, max_pixels=16777216)
    return (h // 32) * (w // 32)


def qwen25_video_tokens(n_frames: int, height: int, width: int) -> int:
    """Tokens of a Qwen2.5-VL video of ``n_frames`` frames already resized to ``height`` × ``width`` (multiples
    of 28): one token per 2×2 patches of 14 px, per two frames."""
    return (n_frames // FRAME_FACTOR) * (height // 14) * (width // 14) // 4


def header_numbers(n_frames: int, fps: float, start_s: float, end_s: float) -> tuple[str, str, str, str]:
    """Video-o3's observation header fields (O3/O4): the rate to 2 decimals, the frame count to 1, the span to 1."""
    return f"{fps:.2f}", f"{float(n_frames):.1f}", f"{float(start_s):.1f}", f"{float(end_s):.1f}"

