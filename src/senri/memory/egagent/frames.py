"""EG-Agent's frame ranking (E-R2): which ≤ 50 frames of a window the frame analyzer sees.

Per window the release keeps the frames whose timestamps lie in it (closed), L2-normalises the query vectors
and the stored frame vectors at query time and scores by cosine; each text query takes its top ``k`` =
min(topk, N) frames unordered (``argpartition``), the sets are merged, and the merged frames are ordered by how
many queries hit them, most first, ties by reversed row order (later frames first); the first 50 are kept.
With one query every candidate has one hit, so the kept 50 are the *latest* 50 of the top 100, not the most
similar: the spec's quirk. ``order="release"`` (the default) keeps it; ``order="similarity"`` breaks ties by
the best cosine instead (named option, recorded in the store's config and ``docs/protocol.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: Frames one analyzer call sees (MAX_FRAMES_FOR_MLLM, lg 44).
MAX_FRAMES = 50
#: Candidates each query takes per window (EgoLife's topk; the Video-MME path uses 50).
TOP_K = 100
#: Windows one frame step searches at once (the release's thread pool; every window of the reply runs).
PARALLEL_WINDOWS = 4
ORDERS = ("release", "similarity")
#: How a window's bounds select frames: ``text`` as the release's merged table does (its ``timestamp`` column
#: is TEXT, so ``BETWEEN`` compares the T8 digits as strings), ``numeric`` by time.
WINDOW_COMPARES = ("text", "numeric")


def window_rows(frame_t8s: Sequence[int], start_hms6: int, end_hms6: int, compare: str = "text") -> np.ndarray:
    """The rows (in order) of the frames a window ``[start_hms6, end_hms6]`` (HHMMSS ints, closed) selects (E-R2).

    ``text`` (the release): the merged frames table stores each T8 as TEXT and the bounds ``int(f"{t:06d}00")``
    are compared with it as strings, so a window crossing 10:00 selects nothing ("9595500" sorts after
    "10000500") and 0–235959 drops every frame whose digits sort after "23595900" (03:00–09:59). ``numeric``
    compares the times (senri's option)."""
    if compare not in WINDOW_COMPARES:
        raise ValueError(f"window compare {compare!r}: one of {', '.join(WINDOW_COMPARES)}")
    low, high = int(f"{int(start_hms6):06d}00"), int(f"{int(end_hms6):06d}00")
    if compare == "numeric":
        keep = [low <= int(t) <= high for t in frame_t8s]
    else:
        keep = [str(low) <= str(int(t)) <= str(high) for t in frame_t8s]
    return np.flatnonzero(np.asarray(keep, dtype=bool))


@dataclass(frozen=True)
class RankedFrame:
    """One kept frame: its row in the window's table, how many queries hit it, its best cosine."""

    row: int
    hits: int
    best: float


def _normalised(vectors: np.ndarray) -> np.ndarray:
    """Each vector over its norm, as the release divides (a zero vector gives NaN cosines: such a frame or query
    ranks after every real score, as ``argpartition`` places NaN, and its best cosine is NaN)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def _finite(score: float) -> float:
    """A cosine for ordering: NaN (a zero vector) below every real score."""
    return float("-inf") if np.isnan(score) else float(score)


def rank_frames(query_vectors: np.ndarray, frame_vectors: np.ndarray, top_k: int = TOP_K,
                keep: int = MAX_FRAMES, order: str = "release") -> list[RankedFrame]:
    """The frames of one window (``frame_vectors``: its rows in time order) an analyzer call sees, in order.

    Each query's top ``min(top_k, N)`` by cosine (the release's unordered top-k: which frames, not their order)
    joins the candidates; candidates are ordered by hit count (descending), ties by reversed row order
    (``release``) or by best cosine then row (``similarity``); the first ``keep`` are returned.

    The release orders equal hit counts with numpy's default (unstable) ``argsort``, so its order among ties —
    and which tied frames make the 50 — depends on numpy's CPU dispatch (its release cases give two orders for
    one input). ``release`` is one order that sort can give (a stable sort, reversed: later frames first),
    the same on every machine; a test checks it against both recorded orders."""
    if order not in ORDERS:
        raise ValueError(f"frame order {order!r}: one of {', '.join(ORDERS)}")
    frames = np.asarray(frame_vectors, dtype=np.float32)
    queries = np.asarray(query_vectors, dtype=np.float32)
    if frames.ndim != 2 or not len(frames) or queries.ndim != 2 or not len(queries):
        return []
    if frames.shape[1] != queries.shape[1]:
        raise ValueError(f"query vectors of dimension {queries.shape[1]} against frame vectors of "
                         f"{frames.shape[1]}: not the model the frames were embedded by")
    with np.errstate(invalid="ignore"):
        scores = _normalised(queries) @ _normalised(frames).T  # queries × frames
    k = min(int(top_k), frames.shape[0])
    hits = np.zeros(frames.shape[0], dtype=np.int64)
    for row in scores:
        top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        hits[top] += 1
    best = scores.max(axis=0)  # NaN where a zero vector made one (numpy's max propagates it, as the release's)
    candidates = np.flatnonzero(hits)  # row order
    if order == "release":
        # stable ascending by hits, then reversed: most hits first, and among equals the later row first
        ranked = candidates[np.argsort(hits[candidates], kind="stable")[::-1]]
    else:
        ranked = np.array(sorted(candidates, key=lambda r: (-hits[r], -_finite(best[r]), int(r))), dtype=np.int64)
    return [RankedFrame(int(r), int(hits[r]), float(best[r])) for r in ranked[:keep]]
