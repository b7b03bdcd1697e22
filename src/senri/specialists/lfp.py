"""Cambrian-S-7B-LFP's streaming memory as pure functions over block lengths and surprises (L-M2…L-M8, L-D1).

The release runs this policy inline in its generate loop over KV caches (lmms-eval ``cambrians_vsr.py``); here
it is a plain computation over :class:`Block` records — which frames a block holds (with the averaging weights
of merged blocks), its token length and its surprise — so the same code can drive the worker's cache
operations and be tested on CPU against the cases the release itself computed (``lfp_memory``, ``retrieval``,
``lfp_decode``, ``downsample_cache_states``). The memory depends only on the video (S2), so senri builds it once
per video and copies it per question (L-M9).

Where the release cases and the spec disagree, the cases win (README §7.4): with r = 2 the pooled grid is
floor(h/2) × floor((w+1)/2), which drops the newline column (L-M4); ``drop_merge`` removes at least one block
after its merge pass even when the merges alone brought the memory under the budget (L-M5).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

TEXT = "text"
CONSOLIDATIONS = ("drop", "drop_merge")


@dataclass(frozen=True)
class Preset:
    """L-M8: one VSI-SUPER split's settings (sensory window W, consolidation, retrieval top-k, τ, budget B)."""

    window: int
    method: str
    topk: int
    threshold: float
    budget: int
    ratio: int = 2


#: L-M8, by split length in minutes.
PRESETS: Mapping[int, Preset] = {
    10: Preset(32, "drop_merge", 32, 0.35, 16384),
    30: Preset(64, "drop", 256, 0.30, 32768),
    60: Preset(64, "drop", 512, 0.25, 16384),
    120: Preset(32, "drop_merge", 128, 0.25, 32768),
    240: Preset(32, "drop", 32, 0.35, 16384),
}


def preset_for(duration_s: float, name: str | int = "auto") -> Preset:
    """D2: ``auto`` takes the shortest split at least as long as the video (over 120 min: the 240-min preset);
    a split length (10, 30, 60, 120, 240) names one."""
    if name != "auto":
        minutes = int(name)
        if minutes not in PRESETS:
            raise ValueError(f"LFP preset {name!r}: one of auto, {', '.join(map(str, PRESETS))}")
        return PRESETS[minutes]
    minutes = duration_s / 60.0
    return next((PRESETS[m] for m in sorted(PRESETS) if minutes <= m), PRESETS[240])


@dataclass(frozen=True)
class Block:
    """One block of the cache: its frames ({frame: weight}; ``{"text": 1}`` for the prompt prefix), length in
    tokens and surprise."""

    frames: Mapping[str, float]
    length: int
    surprise: float

    @property
    def is_text(self) -> bool:
        return TEXT in self.frames


def merge(a: Block, b: Block) -> Block:
    """Average two blocks (keys, values and surprise; L-M5): each frame's weight halves."""
    weights: dict[str, float] = {}
    for part in (a.frames, b.frames):
        for frame, weight in part.items():
            weights[frame] = weights.get(frame, 0.0) + weight / 2
    return Block(weights, a.length, (a.surprise + b.surprise) / 2)


def pooled_length(rows: int, cols_with_newline: int, ratio: int) -> int:
    """L-M4: the length of a rows × (cols+1) block after r×r average pooling (floors: r = 2 drops the newline
    column; an odd row count loses its last row). A grid that pools to nothing raises as avg_pool2d does."""
    if rows <= 0 or cols_with_newline <= 0:
        raise RuntimeError(f"cannot pool a {rows}×{cols_with_newline} block")
    out_rows, out_cols = rows // ratio, cols_with_newline // ratio
    if out_rows == 0 or out_cols == 0:
        raise RuntimeError(f"pooling a {rows}×{cols_with_newline} block by {ratio} leaves nothing")
    return out_rows * out_cols


def pool_block(values: np.ndarray, rows: int, cols_with_newline: int, ratio: int) -> np.ndarray:
    """The r×r average pool of one block's per-token values (tokens row-major over rows × (cols+1); extra
    leading axes kept): what the release does to a low-surprise block's keys and values (L-M4)."""
    pooled_length(rows, cols_with_newline, ratio)
    grid = values.reshape(*values.shape[:-2], rows, cols_with_newline, values.shape[-1])
    out_rows, out_cols = rows // ratio, cols_with_newline // ratio
    grid = grid[..., :out_rows * ratio, :out_cols * ratio, :]
    grid = grid.reshape(*grid.shape[:-3], out_rows, ratio, out_cols, ratio, grid.shape[-1])
    return grid.mean(axis=(-4, -2)).reshape(*values.shape[:-2], out_rows * out_cols, values.shape[-1])


class BudgetError(RuntimeError):
    """The memory went over its budget with nothing left to consolidate, or with consolidation disabled."""


def _least_surprise(blocks: Sequence[Block]) -> int:
    """The frame block of least surprise, ties to the oldest (``np.argmin``); block 0 (text) never."""
    candidates = [i for i, block in enumerate(blocks) if not block.is_text]
    if not candidates:
        raise BudgetError("attempt to get argmin of an empty sequence")
    return min(candidates, key=lambda i: (blocks[i].surprise, i))


def _mergeable(blocks: Sequence[Block], i: int, j: int, threshold: float) -> bool:
    return (0 <= i < len(blocks) and 0 <= j < len(blocks) and not blocks[i].is_text and not blocks[j].is_text
            and blocks[i].surprise >= threshold and blocks[j].surprise >= threshold)


@dataclass(frozen=True)
class Op:
    """One step of the memory policy, applied alike to :class:`Block` records and to a worker's KV tensors
    (:func:`apply_op`): ``evict`` moves the oldest sensory block to the end of long-term memory (``pool``: r×r
    average-pooled first, L-M4); ``merge`` replaces long-term block ``index`` by the average of it and the next
    one, which is removed (L-M5); ``drop`` removes long-term block ``index`` (L-M5)."""

    kind: str
    index: int = 0
    pool: bool = False


def apply_op(op: Op, sensory: list, memory: list, pool: Callable, average: Callable) -> None:
    """Apply ``op`` in place to parallel lists (``sensory`` without block 0, ``memory`` with it), whatever their
    items are: ``pool(item)`` and ``average(a, b)`` say how to pool and average one kind of item."""
    if op.kind == "evict":
        item = sensory.pop(0)
        memory.append(pool(item) if op.pool else item)
    elif op.kind == "merge":
        memory[op.index] = average(memory[op.index], memory.pop(op.index + 1))
    elif op.kind == "drop":
        del memory[op.index]
    else:
        raise ValueError(f"unknown memory op {op.kind!r}")


def _unchanged(block: Block) -> Block:
    return block


def consolidation_ops(blocks: Sequence[Block], budget: int, method: str, threshold: float) -> list[Op]:
    """L-M5, run after each move into long-term memory: nothing when the total is within ``budget``; else
    ``drop`` removes the least-surprise frame block until the total is strictly below it, and ``drop_merge``
    first collapses every run of adjacent frame blocks with surprise ≥ τ into one (a running average), then
    removes at least one block, merging the two new neighbours when both are ≥ τ, until strictly below."""
    total = sum(b.length for b in blocks)
    if total <= budget:
        return []
    if method not in CONSOLIDATIONS:
        raise BudgetError(f"consolidation method {method!r} over the budget ({total} > {budget})")
    blocks, ops = list(blocks), []

    def do(op: Op) -> None:
        ops.append(op)
        apply_op(op, [], blocks, _unchanged, merge)

    if method == "drop_merge":
        i = 0
        while i < len(blocks) - 1:
            if _mergeable(blocks, i, i + 1, threshold):
                do(Op("merge", i))
            else:
                i += 1
    while True:
        at = _least_surprise(blocks)
        do(Op("drop", at))
        if method == "drop_merge" and _mergeable(blocks, at - 1, at, threshold):
            do(Op("merge", at - 1))
        if sum(b.length for b in blocks) < budget:
            return ops


def consolidate(blocks: list[Block], budget: int, method: str, threshold: float) -> list[Block]:
    """The blocks after :func:`consolidation_ops`."""
    blocks = list(blocks)
    for op in consolidation_ops(blocks, budget, method, threshold):
        apply_op(op, [], blocks, _unchanged, merge)
    return blocks


@dataclass
class StreamMemory:
    """The memory after a stream (L-M2…L-M6): the long-term blocks in order, and for each frame the length of
    the sensory cache it attended to (prefix + the frames of its window)."""

    blocks: list[Block]
    frame_calls: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lengths(self) -> list[int]:
        return [b.length for b in self.blocks]

    @property
    def total(self) -> int:
        return sum(self.lengths)


class StreamPolicy:
    """L-M2…L-M6 one frame at a time: what the release's loop does to its caches, as :class:`Op` steps.

    The caller keeps its own parallel lists (a worker: each layer's KV blocks) and, after appending frame t's own
    block to its sensory list, applies the ops :meth:`add_frame` returns; :meth:`finish` gives the end-of-stream
    moves. The policy's decisions depend only on the surprises and the block lengths, so they are the same for
    every layer (the release recomputes them per layer and gets the same). ``sensory_length`` is the length of the
    sensory cache the next frame attends to (block 0 + the window)."""

    def __init__(self, grid_hw: tuple[int, int], prefix_len: int, window: int, threshold: float, ratio: int,
                 method: str, budget: int) -> None:
        rows, cols = grid_hw
        self.grid_hw, self.window, self.threshold, self.ratio = (rows, cols), window, threshold, ratio
        self.method, self.budget = method, budget
        self.full_length = rows * (cols + 1)
        self.prefix_len = prefix_len
        self.memory: list[Block] = [Block({TEXT: 1.0}, prefix_len, 1.0)]
        self.sensory: list[Block] = []
        self.frames = 0

    @property
    def sensory_length(self) -> int:
        return self.prefix_len + sum(b.length for b in self.sensory)

    def _pool(self, block: Block) -> Block:
        rows, cols = self.grid_hw
        return replace(block, length=pooled_length(rows, cols + 1, self.ratio))

    def _apply(self, ops: list[Op]) -> list[Op]:
        for op in ops:
            apply_op(op, self.sensory, self.memory, self._pool, merge)
        return ops

    def _move(self) -> list[Op]:
        block = self.sensory[0]
        ops = self._apply([Op("evict", pool=block.surprise < self.threshold and self.ratio > 1)])
        return ops + self._apply(consolidation_ops(self.memory, self.budget, self.method, self.threshold))

    def add_frame(self, surprise: float) -> list[Op]:
        """Frame t (t = 0, 1, …) entered the sensory cache with ``surprise`` (s_0 is 1 whatever is given): the
        ops to apply, an eviction and its consolidation when the window overflows (L-M4, L-M5)."""
        t = self.frames
        self.frames += 1
        self.sensory.append(Block({str(t): 1.0}, self.full_length, 1.0 if t == 0 else float(surprise)))
        return self._move() if len(self.sensory) > self.window else []

    def finish(self) -> list[Op]:
        """L-M6: every frame still in the sensory cache moves to long-term memory in order, pooled and
        consolidated the same way."""
        ops: list[Op] = []
        while self.sensory:
            ops += self._move()
        return ops


def build_memory(surprises: Sequence[float], grid_hw: tuple[int, int], prefix_len: int, window: int,
                 threshold: float, ratio: int, method: str, budget: int) -> StreamMemory:
    """The long-term memory of a stream whose frame t has surprise ``surprises[t]`` (s_0 is 1 whatever is given),
    each frame a ``grid_hw`` crop plus its newline column, by :class:`StreamPolicy` — the same steps a worker
    applies to its KV caches: frames enter the sensory cache (block 0 + at most W frames, at full length); the
    oldest moves to long-term memory when there are more than W, pooled r×r if its surprise is below τ, and the
    memory is consolidated after every move (L-M4, L-M5); at the end of the stream every frame still in the
    sensory cache moves the same way (L-M6)."""
    policy = StreamPolicy(grid_hw, prefix_len, window, threshold, ratio, method, budget)
    calls = []
    for t, surprise in enumerate(surprises):
        calls.append((t, policy.sensory_length))
        policy.add_frame(surprise)
    policy.finish()
    return StreamMemory(policy.memory, calls)


# -------------------------------------------------------------------------------------------------- retrieval
def retrieval_scores(block_keys: Sequence[np.ndarray], is_text: Sequence[bool], query: np.ndarray) -> np.ndarray:
    """L-M7: each block's mean key (heads flattened, GQA-expanded) against the question's mean query, cosine
    with norms clamped at 1e-8, times 0 for text blocks."""
    q = np.asarray(query, dtype=np.float64).ravel()
    scores = []
    for key, text in zip(block_keys, is_text):
        k = np.asarray(key, dtype=np.float64).ravel()
        cosine = float(np.dot(q / max(np.linalg.norm(q), 1e-8), k / max(np.linalg.norm(k), 1e-8)))
        scores.append(0.0 if text else cosine)
    return np.array(scores)


def retrieve(scores: Sequence[float], is_text: Sequence[bool], topk: int) -> list[int]:
    """L-M7: the top-k blocks by score (a text block's 0 competes: it can take a slot) plus every text block,
    in cache order. Ties go to the earlier block here; torch.topk's order among equal scores is unspecified."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:topk]
    return sorted(set(order) | {i for i, text in enumerate(is_text) if text})


def expand_gqa(keys: np.ndarray, heads: int) -> np.ndarray:
    """[kv_heads, D] → [heads, D]: each key head repeated for its group of query heads (``repeat_kv``)."""
    keys = np.asarray(keys, dtype=np.float64)
    return np.repeat(keys, heads // keys.shape[0], axis=0)


# ------------------------------------------------------------------------------------------------ decoding
def penalised(logits: Sequence[float], used: Sequence[int], penalty: float) -> np.ndarray:
    """L-D1: every used id's logit divided by ``penalty`` if positive, multiplied if not."""
    out = np.array(logits, dtype=np.float64)
    for token in set(used):
        out[token] = out[token] / penalty if out[token] > 0 else out[token] * penalty
    return out


def greedy_decode(first_logits: Sequence[float], step_logits: Callable[[int, int], Sequence[float]],
                  eos_id: int, pad_id: int, max_new_tokens: int = 16, penalty: float = 1.1
                  ) -> tuple[list[int], int]:
    """L-D1's hand-rolled loop: the first token is the arg-max of the question forward; then up to
    ``max_new_tokens − 1`` steps, stopping when the previous token is EOS, each step's logits
    (``step_logits(step, previous_token)``) penalised on every id already in the output buffer, which starts
    with the pad id. Returns the generated ids (EOS included when produced) and the number of decode steps."""
    token = int(np.argmax(first_logits))
    buffer, generated, steps = [pad_id, token], [token], 0
    for step in range(1, max_new_tokens):
        if generated[-1] == eos_id:
            break
        token = int(np.argmax(penalised(step_logits(step, generated[-1]), buffer, penalty)))
        steps += 1
        buffer.append(token)
        generated.append(token)
    return generated, steps
