"""Personalized PageRank on a weighted undirected graph, shared by WorldMM and MAGIC-Video.

Both systems rank memory by a random walk with restart: WorldMM's episodic retrieval runs HippoRAG-2's PPR over
an entity/passage graph (damping 0.5, W-R1) and its semantic retrieval a PPR over the triple graph (0.85,
W-R3); MAGIC-Video runs one PPR over its node graph (0.85, G-R3). The papers' code calls igraph's prpack
solver; this is a plain power iteration with the same conventions, so neither system needs igraph:

* the graph is undirected: an edge ``(u, v, w)`` lets the walker move both ways, in proportion to ``w``
  among the node's edges (a self-loop ``(u, u, w)`` counts twice, as igraph counts it for an undirected
  graph: ``2w`` to ``u``'s strength and to its walk back to ``u``; MAGIC-Video's generated cases found it);
* a node with no edges (a *dangling* node) hands its mass back along the reset distribution, as prpack does
  for personalized PageRank;
* a pair listed twice keeps its FIRST weight by default (MAGIC-Video's graph builder adds an edge once, G-C6);
  ``duplicates="sum"`` adds them instead (a multigraph, as igraph treats repeated edges);
* the reset vector is normalised to sum 1; it must be non-negative and not all zero.

The result is the stationary distribution (sums to 1) of ``x = (1-d)·r + d·(Pᵀx + dangling(x)·r)``.
"""

from __future__ import annotations

from typing import Literal, Mapping, Sequence

import numpy as np

#: How a pair of nodes given more than once is treated (in either order: the graph is undirected).
DuplicateRule = Literal["first", "sum"]


def reset_vector(n_nodes: int, reset: Mapping[int, float] | np.ndarray | Sequence[float]) -> np.ndarray:
    """The reset (personalisation) distribution as a length-``n_nodes`` vector summing to 1.

    Raises ValueError for a wrong length, an out-of-range node, a negative or non-finite weight, or an
    all-zero reset: a walk with nowhere to restart has no meaning, and silently falling back to uniform would
    hide a retriever that found no seed.
    """
    if isinstance(reset, Mapping):
        vector = np.zeros(n_nodes, dtype=float)
        for node, weight in reset.items():
            if not 0 <= int(node) < n_nodes:
                raise ValueError(f"reset node {node} is outside 0..{n_nodes - 1}")
            vector[int(node)] += float(weight)
    else:
        vector = np.asarray(reset, dtype=float).reshape(-1).copy()
        if vector.shape[0] != n_nodes:
            raise ValueError(f"reset has {vector.shape[0]} entries for {n_nodes} nodes")
    if not np.all(np.isfinite(vector)) or np.any(vector < 0):
        raise ValueError("reset weights must be finite and non-negative")
    total = vector.sum()
    if total <= 0:
        raise ValueError("reset weights are all zero: no node to restart from")
    return vector / total


def undirected_edges(n_nodes: int, edges: Sequence[tuple[int, int, float]],
                     duplicates: DuplicateRule = "first") -> dict[tuple[int, int], float]:
    """Edges keyed by their unordered pair ``(min, max)`` with the duplicate rule applied.

    Raises ValueError for a node outside the graph, a negative or non-finite weight, or an unknown rule.
    Zero-weight edges are kept (they carry no walk mass but still take the pair's first weight).
    """
    if duplicates not in ("first", "sum"):
        raise ValueError(f"duplicates must be 'first' or 'sum', not {duplicates!r}")
    pairs: dict[tuple[int, int], float] = {}
    for u, v, weight in edges:
        u, v, weight = int(u), int(v), float(weight)
        if not (0 <= u < n_nodes and 0 <= v < n_nodes):
            raise ValueError(f"edge ({u}, {v}) has a node outside 0..{n_nodes - 1}")
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"edge ({u}, {v}) has weight {weight}; weights must be finite and non-negative")
        key = (u, v) if u <= v else (v, u)
        if key in pairs:
            if duplicates == "sum":
                pairs[key] += weight
        else:
            pairs[key] = weight
    return pairs


def personalized_pagerank(n_nodes: int, edges: Sequence[tuple[int, int, float]],
                          reset: Mapping[int, float] | np.ndarray, damping: float = 0.85,
                          tol: float = 1e-10, max_iter: int = 1000,
                          duplicates: DuplicateRule = "first") -> np.ndarray:
    """PPR scores of every node (a vector summing to 1), by power iteration until the L1 change is < ``tol``.

    ``damping`` is the probability of following an edge (prpack's ``damping``; 1 - damping restarts at the
    reset distribution). Raises ValueError for a damping outside [0, 1), bad edges or a bad reset, and
    RuntimeError if ``max_iter`` iterations do not converge (a wrong answer must not pass as a ranking).
    """
    if n_nodes <= 0:
        raise ValueError("the graph has no nodes")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), not {damping}")
    restart = reset_vector(n_nodes, reset)
    pairs = undirected_edges(n_nodes, edges, duplicates)
    if pairs:
        ends = np.array(list(pairs), dtype=np.int64)
        weights = np.fromiter(pairs.values(), dtype=float, count=len(pairs))
        loops = ends[:, 0] == ends[:, 1]
        # Each non-loop pair is walkable both ways; a self-loop is both its ends at once (twice its weight).
        sources = np.concatenate([ends[:, 0], ends[~loops, 1]])
        targets = np.concatenate([ends[:, 1], ends[~loops, 0]])
        flows = np.concatenate([np.where(loops, 2.0 * weights, weights), weights[~loops]])
    else:
        sources = targets = np.zeros(0, dtype=np.int64)
        flows = np.zeros(0, dtype=float)
    strength = np.bincount(sources, weights=flows, minlength=n_nodes)
    dangling = strength <= 0
    share = np.divide(flows, strength[sources], out=np.zeros_like(flows), where=strength[sources] > 0)

    scores = restart.copy()
    for _ in range(max_iter):
        walked = np.bincount(targets, weights=scores[sources] * share, minlength=n_nodes)
        updated = (1.0 - damping) * restart + damping * (walked + scores[dangling].sum() * restart)
        updated /= updated.sum()
        change = np.abs(updated - scores).sum()
        scores = updated
        if change < tol:
            return scores
    raise RuntimeError(f"personalized PageRank did not converge in {max_iter} iterations (tol {tol})")
