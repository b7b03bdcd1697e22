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

import numpy as np

#: Frames one analyzer call sees (MAX_FRAMES_FOR_MLLM, lg 44).
MAX_FRAMES = 50
#: Candidates each query takes per window (EgoLife's topk; the Video-MME path uses 50).
TOP_K = 100
#: Windows one frame step searches (their analyzer calls run in parallel in the release).
MAX_WINDOWS = 4
ORDERS = ("release", "similarity")


@dataclass(frozen=True)
class RankedFrame:
    """One kept frame: its row in the window's table, how many queries hit it, its best cosine."""

    row: int
    hits: int
    best: float


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def rank_frames(query_vectors: np.ndarray, frame_vectors: np.ndarray, top_k: int = TOP_K,
                keep: int = MAX_FRAMES, order: str = "release") -> list[RankedFrame]:
    """The frames of one window (``frame_vectors``: its rows in time order) an analyzer call sees, in order.

    Each query's top ``min(top_k, N)`` by cosine (the release's unordered top-k: which frames, not their order)
    joins the candidates; candidates are ordered by hit count (descending), ties by reversed row order
    (``release``) or by best cosine then row (``similarity``); the first ``keep`` are returned."""
    if order not in ORDERS:
        raise ValueError(f"frame order {order!r}: one of {', '.join(ORDERS)}")
    frames = np.asarray(frame_vectors, dtype=np.float32)
    queries = np.asarray(query_vectors, dtype=np.float32)
    if frames.ndim != 2 or not len(frames) or queries.ndim != 2 or not len(queries):
        return []
    if frames.shape[1] != queries.shape[1]:
        raise ValueError(f"query vectors of dimension {queries.shape[1]} against frame vectors of "
                         f"{frames.shape[1]}: not the model the frames were embedded by")
    scores = _normalised(queries) @ _normalised(frames).T  # queries × frames
    k = min(int(top_k), frames.shape[0])
    hits = np.zeros(frames.shape[0], dtype=np.int64)
    for row in scores:
        top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        hits[top] += 1
    best = scores.max(axis=0)
    candidates = np.flatnonzero(hits)  # row order
    if order == "release":
        # stable ascending by hits, then reversed: most hits first, and among equals the later row first
        ranked = candidates[np.argsort(hits[candidates], kind="stable")[::-1]]
    else:
        ranked = np.array(sorted(candidates, key=lambda r: (-hits[r], -float(best[r]), int(r))), dtype=np.int64)
    return [RankedFrame(int(r), int(hits[r]), float(best[r])) for r in ranked[:keep]]
