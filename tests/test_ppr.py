"""Personalized PageRank (src/senri/memory/ppr.py) against two independent references: networkx's pagerank
(dangling mass to the personalisation, as prpack) and a dense linear solve of the same fixed point."""

from __future__ import annotations

import numpy as np
import pytest

from senri.memory.ppr import personalized_pagerank, reset_vector, undirected_edges

networkx = pytest.importorskip("networkx")


def dense_reference(n_nodes, pairs, restart, damping):
    """Solve x = (1-d) r + d (Pᵀ x + (dangling·x) r) exactly (the walk matrix built densely from the pairs)."""
    adjacency = np.zeros((n_nodes, n_nodes))
    for (u, v), weight in pairs.items():
        adjacency[u, v] += weight
        adjacency[v, u] += weight  # a self-loop twice, as igraph counts it
    strength = adjacency.sum(axis=1)
    walk = np.zeros_like(adjacency)
    for node in range(n_nodes):
        walk[node] = adjacency[node] / strength[node] if strength[node] > 0 else restart
    system = np.eye(n_nodes) - damping * walk.T
    return np.linalg.solve(system, (1 - damping) * restart)


def networkx_reference(n_nodes, pairs, restart, damping):
    graph = networkx.Graph()
    graph.add_nodes_from(range(n_nodes))
    for (u, v), weight in pairs.items():
        graph.add_edge(u, v, weight=2 * weight if u == v else weight)  # igraph counts a self-loop twice
    scores = networkx.pagerank(graph, alpha=damping, personalization=dict(enumerate(restart)),
                               dangling=dict(enumerate(restart)), weight="weight", tol=1e-14, max_iter=10000)
    return np.array([scores[node] for node in range(n_nodes)])


def random_graph(seed, n_nodes=30, n_edges=70):
    rng = np.random.default_rng(seed)
    edges = [(int(rng.integers(n_nodes)), int(rng.integers(n_nodes)), float(rng.uniform(0.1, 3.0)))
             for _ in range(n_edges)]
    # Two isolated (dangling) nodes beyond every edge.
    n_nodes += 2
    seeds = rng.choice(n_nodes, size=4, replace=False)
    reset = {int(node): float(rng.uniform(0.5, 2.0)) for node in seeds}
    return n_nodes, edges, reset


def test_two_nodes_match_the_closed_form():
    # Reset on node 0: x0 = (1-d) + d·x1 and x1 = d·x0, so x0 = 1/(1+d).
    for damping in (0.5, 0.85):
        scores = personalized_pagerank(2, [(0, 1, 2.5)], {0: 1.0}, damping=damping)
        assert scores == pytest.approx([1 / (1 + damping), damping / (1 + damping)], abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("damping", [0.5, 0.85])
@pytest.mark.parametrize("duplicates", ["first", "sum"])
def test_random_graphs_match_networkx_and_a_dense_solve(seed, damping, duplicates):
    n_nodes, edges, reset = random_graph(seed)
    scores = personalized_pagerank(n_nodes, edges, reset, damping=damping, duplicates=duplicates)
    pairs = undirected_edges(n_nodes, edges, duplicates)
    restart = reset_vector(n_nodes, reset)
    assert scores.sum() == pytest.approx(1.0, abs=1e-12)
    assert scores == pytest.approx(dense_reference(n_nodes, pairs, restart, damping), abs=1e-9)
    assert scores == pytest.approx(networkx_reference(n_nodes, pairs, restart, damping), abs=1e-8)


def test_a_pair_given_twice_keeps_its_first_weight_in_either_order():
    first = personalized_pagerank(3, [(0, 1, 1.0), (1, 2, 4.0), (1, 0, 9.0)], {0: 1.0})
    only_first = personalized_pagerank(3, [(0, 1, 1.0), (1, 2, 4.0)], {0: 1.0})
    summed = personalized_pagerank(3, [(0, 1, 1.0), (1, 2, 4.0), (1, 0, 9.0)], {0: 1.0}, duplicates="sum")
    as_sum = personalized_pagerank(3, [(0, 1, 10.0), (1, 2, 4.0)], {0: 1.0})
    assert first == pytest.approx(only_first, abs=1e-12)
    assert summed == pytest.approx(as_sum, abs=1e-12)
    assert not np.allclose(first, summed)


def test_dangling_nodes_return_mass_to_the_reset_and_an_edgeless_graph_is_the_reset():
    assert personalized_pagerank(4, [], {1: 1.0, 3: 3.0}) == pytest.approx([0, 0.25, 0, 0.75], abs=1e-12)
    # A reset on an isolated node keeps all its mass there; the connected pair gets nothing.
    assert personalized_pagerank(3, [(0, 1, 1.0)], {2: 1.0}) == pytest.approx([0, 0, 1], abs=1e-12)


def test_array_reset_equals_mapping_reset_and_is_normalised():
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 0, 0.5)]
    by_map = personalized_pagerank(3, edges, {0: 2.0, 2: 6.0})
    by_array = personalized_pagerank(3, edges, np.array([0.25, 0.0, 0.75]))
    assert by_map == pytest.approx(by_array, abs=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], {}), "all zero"),
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], {5: 1.0}), "outside"),
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], np.array([1.0])), "entries"),
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], {0: -1.0}), "non-negative"),
    (lambda: personalized_pagerank(2, [(0, 2, 1.0)], {0: 1.0}), "outside"),
    (lambda: personalized_pagerank(2, [(0, 1, -1.0)], {0: 1.0}), "weight"),
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], {0: 1.0}, damping=1.0), "damping"),
    (lambda: personalized_pagerank(2, [(0, 1, 1.0)], {0: 1.0}, duplicates="max"), "duplicates"),
    (lambda: personalized_pagerank(0, [], {}), "no nodes"),
])
def test_bad_inputs_raise_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_non_convergence_is_an_error_not_a_ranking():
    with pytest.raises(RuntimeError, match="converge"):
        personalized_pagerank(3, [(0, 1, 1.0), (1, 2, 1.0)], {0: 1.0}, damping=0.99, tol=1e-15, max_iter=2)
