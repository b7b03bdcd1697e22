"""WorldMM's multiscale windows (W-C3), its controller's reply reader (W-L1), its HippoRAG level search (W-R1)
and its semantic search (W-R3), computed by the release's own
``_summarize_level`` and ``WorldMemory._parse_reasoning_response`` on Hypothesis-drawn inputs.

    python bench/release_cases/worldmm.py [--src /work/wt/_src/worldmm] [--n 400]

Needs a checkout of github wgcyeo/WorldMM at ``COMMIT``. Loads ``src/worldmm/memory/episodic/gen_multiscale.py``
from it with a stand-in for its one package import (``worldmm.llm.LLMModel``, an annotation) and a scripted LLM
that echoes the ids of a batch's captions (only the batching is reference data, as in the shared release
cases). Each case chains the levels as ``gen_multiscale`` does (each level reads the level below's output) and
records every window's direct members, its ``start_time``/``end_time`` strings; ``raised`` where the release
raises. Also ``graph_search`` (HippoRAG's level search after its filter: ``graph_search_with_fact_entities`` /
``dense_passage_retrieval``) and ``semantic_retrieval`` (``SemanticMemory.index`` + ``retrieve``), both compiled
from the checkout's text (igraph 1.0.0 on ``PYTHONPATH``). ``--kinds`` regenerates only the kinds named and keeps
the others as stored. Also ``hipporag_graph`` (HippoRAG's graph construction). Writes
``tests/reference/generated/worldmm/``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SRC, examples, kept_kinds, outcome, release_functions, write_cases  # noqa: E402

COMMIT = "1e6901d104259251457fad3df864794f9639be5f"
RELEASE = {"release": "github wgcyeo/WorldMM", "commit": COMMIT}


def load(src: Path):
    """``gen_multiscale`` and ``memory/memory.py`` from the checkout; the sibling packages they import for other
    work (the LLM and embedding clients, the three memories) are stand-in names."""
    import importlib

    package = src / "src" / "worldmm"
    for name, path in (("worldmm", package), ("worldmm.memory", package / "memory"),
                       ("worldmm.memory.episodic", package / "memory" / "episodic")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    stubs = {"worldmm.llm": ("LLMModel", "PromptTemplateManager"), "worldmm.embedding": ("EmbeddingModel",),
             "worldmm.memory.semantic": ("SemanticMemory", "SemanticTripleEntry"),
             "worldmm.memory.visual": ("VisualMemory",)}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update({a: object for a in attrs})
        sys.modules[name] = module
    episodic = sys.modules["worldmm.memory.episodic"]
    episodic.EpisodicMemory = episodic.CaptionEntry = object
    gm = importlib.import_module("worldmm.memory.episodic.gen_multiscale")
    memory = importlib.import_module("worldmm.memory.memory")
    import logging

    logging.disable(logging.CRITICAL)
    return gm, memory


class EchoLLM:
    """A batch's summary is the ``+``-joined text of its inputs (their ids), in braces."""

    def generate(self, messages):
        context = messages[-1]["content"].removeprefix("All descriptions: ")
        return "{" + "+".join(context.split("\n")) + "}"


def multiscale(gm, n: int) -> list[dict]:
    from hypothesis import strategies as st

    centis = st.one_of(st.integers(0, 3000 * 100), st.sampled_from([0, 500, 1000, 2999, 3000, 17999, 18000,
                                                                      59999, 60000, 8639900, 8640000]),
                       st.integers(0, 100).map(lambda s: s * 1000))
    timeline = st.lists(centis, max_size=40).map(sorted)
    windows = st.one_of(st.just([30, 180, 600]), st.lists(st.sampled_from([1, 7, 10, 30, 60, 180, 600, 3600]),
                                                          min_size=1, max_size=3))
    strategy = st.tuples(timeline, windows)
    cases = []
    for starts, levels in examples(strategy, n):
        items = [{"text": f"c{k}", "start_time": _hhmmssff(c), "video_path": "v.mp4"} for k, c in enumerate(starts)]

        def run():
            below, out = items, []
            for window in levels:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    made = gm._summarize_level(below, window, "", EchoLLM(), "DAY1")
                out.append([{"members": m["text"], "start_time": m["start_time"], "end_time": m["end_time"]}
                            for m in made])
                below = made
            return out

        cases.append({"input": {"start_centis": starts, "windows": levels}, "output": outcome(run)})
    return cases


def reasoning_reply(memory, n: int) -> list[dict]:
    """``WorldMemory._parse_reasoning_response(reply)`` (W10's reader): the decision and the selected memory, or
    the exception it raises (the loop then counts an error)."""
    import json

    from hypothesis import strategies as st

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                       st.sampled_from(["", "episodic", "Semantic", "VISUAL", "visual ", "other", "search", "Search",
                                        "answer", "ANSWER", "retrieve", "who?", "a {brace}"]), st.text(max_size=6))
    selected = st.one_of(
        st.fixed_dictionaries({}, optional={"memory_type": scalar, "search_query": scalar, "extra": scalar}),
        scalar, st.lists(scalar, max_size=2))
    decision = st.fixed_dictionaries({}, optional={
        "decision": st.one_of(st.sampled_from(["search", "answer", "Search", "ANSWER", "retrieve", ""]), scalar),
        "selected_memory": selected, "reason": scalar})
    as_json = decision.map(lambda d: json.dumps(d, ensure_ascii=False))
    wrapped = st.builds(lambda pre, body, post: pre + body + post,
                        st.sampled_from(["", "Reply: ", "```json\n", "<think>{draft}</think>", "{", "}"]), as_json,
                        st.sampled_from(["", "\n```", " Done.", " {\"x\": 1}", "}", "{"]))
    strategy = st.one_of(as_json, wrapped, st.sampled_from(["", "answer", "null", "[]", "[1, 2]", "42", '"search"',
                                                            "{not json}", '{"decision": "search"'] ),
                         st.text(max_size=12))
    cases = []
    for reply in examples(strategy, n):
        def run():
            out = memory.WorldMemory._parse_reasoning_response(object(), reply)
            chosen = out.selected_memory
            return {"decision": out.decision,
                    "selected_memory": None if chosen is None else {"memory_type": chosen.memory_type,
                                                                     "search_query": chosen.search_query}}
        cases.append({"input": {"reply": reply}, "output": outcome(run)})
    return cases


def hipporag(src: Path) -> dict:
    """HippoRAG's ``graph_search_with_fact_entities``, ``get_top_k_weights``, ``dense_passage_retrieval`` and
    ``run_ppr`` (``src/HippoRAG/src/hipporag/HippoRAG.py``) and the two helpers they call
    (``utils/misc_utils.py``), compiled from the checkout's text: the module's other imports (LLM, OpenIE,
    embedding store, DSPy filter) are not used by them."""
    import logging

    import igraph  # noqa: F401  (the release's PPR: igraph 1.0.0, prpack)
    import numpy as np

    root = src / "src" / "HippoRAG" / "src" / "hipporag"
    from hashlib import md5
    helpers = release_functions(root / "utils" / "misc_utils.py", ["min_max_normalize", "compute_mdhash_id"],
                                {"np": np, "md5": md5})
    from typing import Dict, List, Tuple
    return release_functions(root / "HippoRAG.py", ["get_top_k_weights", "graph_search_with_fact_entities",
                                                   "dense_passage_retrieval", "run_ppr"],
                             {"np": np, "logger": logging.getLogger("hipporag"), "Dict": Dict, "List": List,
                              "Tuple": Tuple, **helpers}, owner="HippoRAG") | helpers


def graph_search_strategy():
    """A level's graph as senri's ``GranularityIndex`` holds it and HippoRAG's igraph is built from it: entities
    (lower-case names, one empty), passages (1-6) with 3-d vectors of small integers (ties, zero rows), the
    entities each passage names, the ordered-pair edge table (fact pairs both ways, passage links, synonymy
    weights, repeats); the facts shown to the filter (distinct facts of the level, so of its entities) with their
    scores (ties, zeros) and the facts it kept (a fact twice); ``link_top_k``, ``passage_node_weight``, damping."""
    from hypothesis import strategies as st

    names = ["alice", "bob", "cup", "kitchen", "東京", "x"]
    vec = st.lists(st.sampled_from([-1, 0, 0, 1, 1, 2]), min_size=3, max_size=3)

    def build(n_ent, passages, links, extra, facts, kept_idx, settings, qv):
        entities = names[:n_ent]
        n_p = len(passages)
        entity_passages = [sorted({p for p, e in links if e == k and p < n_p}) for k in range(n_ent)]
        edges = [[n_ent + p, e, 1.0] for p, e in links if p < n_p and e < n_ent]
        edges += [[u % n_ent, v % n_ent, w] for u, v, w in extra if n_ent]
        # the candidates are distinct facts (HippoRAG's fact list holds each once)
        # of the level's graph, so their entities are its entities
        candidates = list({(names[s % n_ent], names[o % n_ent]): [[names[s % n_ent], "rel", names[o % n_ent]], score]
                           for s, o, score in facts}.values())
        kept = [candidates[k][0] for k in kept_idx if k < len(candidates)]
        return {"entities": entities, "passages": [f"p{k}" for k in range(n_p)], "passage_vectors": passages,
                "entity_passages": entity_passages, "edges": edges, "candidates": candidates, "kept": kept,
                "query_vector": qv, **settings}

    return st.builds(
        build, st.integers(1, 6), st.lists(vec, min_size=1, max_size=6),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1.0, 2.0, 0.9, 0.95])),
                 max_size=8),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1.0, 0.5, 0.0, 0.25, 0.5])),
                 min_size=1, max_size=5),
        st.lists(st.integers(0, 4), min_size=1, max_size=4),
        st.fixed_dictionaries({"link_top_k": st.sampled_from([5, 5, 1, 2]),
                               "passage_node_weight": st.sampled_from([0.05, 0.05, 1.0]),
                               "damping": st.sampled_from([0.5, 0.5, 0.85])}), vec)


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def get_row(self, key):
        return {"content": self.rows[key]}


def graph_search(fns: dict, n: int) -> list[dict]:
    """HippoRAG's ``retrieve`` after its filter: no fact kept → ``dense_passage_retrieval``, else
    ``graph_search_with_fact_entities``, on a stand-in ``self`` holding the case's graph (igraph, vertices:
    entities by their ``entity-`` md5 key, then passages), the entity → passages map, the passages' vectors and
    the query's; the filter's kept facts with their candidate scores: every passage's index and score in the
    release's order, or what it raised."""
    import types

    import igraph as ig
    import numpy as np

    cases = []
    for inp in examples(graph_search_strategy(), n):
        def run():
            keys = [fns["compute_mdhash_id"](e, prefix="entity-") for e in inp["entities"]]
            pkeys = [fns["compute_mdhash_id"](p, prefix="chunk-") for p in inp["passages"]]
            graph = ig.Graph(n=len(keys) + len(pkeys), directed=False)
            graph.vs["name"] = keys + pkeys
            graph.add_edges([(u, v) for u, v, _ in inp["edges"]])
            graph.es["weight"] = [w for _, _, w in inp["edges"]]
            me = types.SimpleNamespace(
                graph=graph, node_name_to_vertex_idx={k: i for i, k in enumerate(keys + pkeys)},
                ent_node_to_chunk_ids={k: {pkeys[p] for p in ps} for k, ps in zip(keys, inp["entity_passages"])},
                passage_node_keys=pkeys, passage_node_idxs=list(range(len(keys), len(keys) + len(pkeys))),
                chunk_embedding_store=_Rows(dict(zip(pkeys, inp["passages"]))),
                passage_embeddings=np.asarray(inp["passage_vectors"], dtype=float),
                query_to_embedding={"passage": {"q": np.asarray(inp["query_vector"], dtype=float)}},
                global_config=types.SimpleNamespace(damping=inp["damping"]))
            for name in ("get_top_k_weights", "dense_passage_retrieval", "run_ppr"):
                setattr(me, name, types.MethodType(fns[name], me))
            facts = [tuple(f) for f, _ in inp["candidates"]]
            kept = [tuple(f) for f in inp["kept"]]
            if not kept:  # retrieve()'s branch: no fact after the filter → dense passage retrieval
                ids, scores = me.dense_passage_retrieval("q")
                return {"ids": [int(i) for i in ids], "scores": [float(s) for s in scores]}
            ids, scores = fns["graph_search_with_fact_entities"](
                me, "q", link_top_k=inp["link_top_k"], query_fact_scores=np.array([s for _, s in inp["candidates"]]),
                top_k_facts=kept, top_k_fact_indices=[facts.index(f) for f in kept],
                passage_node_weight=inp["passage_node_weight"])
            return {"ids": [int(i) for i in ids], "scores": [float(s) for s in scores]}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def semantic_memory(src: Path) -> dict:
    """``SemanticMemory.index`` and ``.retrieve`` and the ``SemanticTripleEntry`` record
    (``src/worldmm/memory/semantic/memory.py``), compiled from the checkout's text: the module's package import
    (the embedding model) is not used by them."""
    import logging
    from dataclasses import dataclass
    from typing import Any, Dict, List, Optional, Set, Tuple, Union

    import igraph as ig
    import torch
    import torch.nn.functional as F

    path = src / "src" / "worldmm" / "memory" / "semantic" / "memory.py"
    scope = {"torch": torch, "F": F, "ig": ig, "logger": logging.getLogger("semantic"), "dataclass": dataclass,
             "Dict": Dict, "List": List, "Any": Any, "Optional": Optional, "Set": Set, "Tuple": Tuple,
             "Union": Union}
    record = release_functions(path, ["SemanticTripleEntry"], scope)
    scope["SemanticTripleEntry"] = record["SemanticTripleEntry"]
    return release_functions(path, ["index", "retrieve", "retrieve_triples_as_str"], scope,
                             owner="SemanticMemory") | record


def semantic_strategy():
    """A snapshot's triples (1-8; empty subjects or objects, a subject that is its object, repeated triples,
    entities shared between triples), each text's 3-d vector of small integers (ties, zero rows), the query's
    vector and ``top_k``."""
    from hypothesis import strategies as st

    names = ["I", "cup", "kitchen", "Anna", "", "東京"]
    vec = st.lists(st.sampled_from([-1, 0, 0, 1, 1, 2]), min_size=3, max_size=3)
    triple = st.tuples(st.sampled_from(names), st.sampled_from(["likes", "is in", "holds"]), st.sampled_from(names))
    return st.builds(
        lambda triples, vectors, qv, k: {"triples": [list(t) for t in triples],
                                         "vectors": {" ".join(t): vectors[i % len(vectors)]
                                                     for i, t in enumerate(triples)},
                                         "query_vector": qv, "top_k": k},
        st.lists(triple, min_size=1, max_size=8), st.lists(vec, min_size=1, max_size=8), vec,
        st.sampled_from([10, 10, 1, 2, 3, 5]))


class _TextEncoder:
    def __init__(self, vectors: dict, query: list):
        self.vectors, self.query = vectors, query

    def encode_text(self, texts):
        import numpy as np

        if isinstance(texts, str):
            return np.asarray(self.query, dtype=np.float32)
        return np.asarray([self.vectors[t] for t in texts], dtype=np.float32)


def semantic_retrieval(fns: dict, n: int) -> list[dict]:
    """W-R3: ``SemanticMemory.index(t)`` over one snapshot of the drawn triples (the embedding model returns the
    case's vectors) then ``retrieve(query, top_k, as_context=False)`` (cosine top-k seeds, igraph prpack PPR over
    the entity graph, triples by the sum of their entities' scores): the returned triples' positions and every
    triple's score (the reference for ties), or what it raised."""
    import types

    cases = []
    for inp in examples(semantic_strategy(), n):
        def run():
            entries = [fns["SemanticTripleEntry"](id=f"t{i}", subject=s, predicate=p, object=o, timestamp=100)
                       for i, (s, p, o) in enumerate(inp["triples"])]
            me = types.SimpleNamespace(available_timestamps=[100], timestamp_to_triples={100: entries},
                                       indexed_timestamp=None, indexed_entries=[], embeddings=None, graph=None,
                                       embedding_model=_TextEncoder(inp["vectors"], inp["query_vector"]))
            fns["index"](me, 100)
            found = fns["retrieve"](me, "q", top_k=inp["top_k"], as_context=False)
            return {"positions": [int(e.id[1:]) for e in found]}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def hipporag_build(src: Path) -> dict:
    """HippoRAG's graph construction: ``add_fact_edges``, ``add_passage_edges``, ``add_synonymy_edges``
    (``HippoRAG.py``), ``retrieve_knn`` (``utils/embed_utils.py``), ``text_processing``, ``extract_entity_nodes``,
    ``compute_mdhash_id`` (``utils/misc_utils.py``) and ``filter_invalid_triples`` (``utils/llm_utils.py``),
    compiled from the checkout's text (their modules import an LLM client and the embedding stores)."""
    import logging
    import re
    from hashlib import md5
    from typing import Dict, List, Set, Tuple

    import numpy as np
    import torch

    root = src / "src" / "HippoRAG" / "src" / "hipporag"
    log = logging.getLogger("hipporag")
    quiet = lambda items, **kwargs: items  # noqa: E731  (tqdm)
    scope = {"np": np, "re": re, "md5": md5, "logger": log, "List": List, "Dict": Dict, "Set": Set, "Tuple": Tuple,
             "Triple": Tuple[str, str, str], "torch": torch, "tqdm": quiet}
    fns = release_functions(root / "utils" / "misc_utils.py",
                            ["text_processing", "extract_entity_nodes", "compute_mdhash_id"], scope)
    fns |= release_functions(root / "utils" / "llm_utils.py", ["filter_invalid_triples"], scope)
    fns |= release_functions(root / "utils" / "embed_utils.py", ["retrieve_knn"], scope)
    return fns | release_functions(root / "HippoRAG.py", ["add_fact_edges", "add_passage_edges", "add_synonymy_edges"],
                                   scope | fns, owner="HippoRAG")


#: Triple parts as an extractor writes them (case, punctuation, possessives, CJK, an alias of another).
RAW_NAMES = ["Cup", "cup!", "the Kitchen", "I", "tv", "Anna's mug", "東京", "x-y", "Red mug", "red-mug", "kettle"]


def hipporag_strategy():
    """Passages (1-5, distinct texts) with their extracted triples (three parts from :data:`RAW_NAMES`, repeats,
    a two- or four-part one), a 3-d vector per processed entity name (ties, parallel and zero vectors) and the
    synonymy threshold."""
    from hypothesis import strategies as st

    part = st.sampled_from(RAW_NAMES)
    triple = st.one_of(*[st.tuples(part, st.sampled_from(["holds", "is in"]), part).map(list)] * 4,
                       st.lists(part, min_size=2, max_size=2), st.lists(part, min_size=4, max_size=4))
    vec = st.lists(st.sampled_from([0.0, 1.0, 1.0, 2.0, -1.0, 0.5]), min_size=3, max_size=3)
    return st.fixed_dictionaries({
        "passages": st.lists(st.lists(triple, max_size=4), min_size=1, max_size=5),
        "vectors": st.lists(vec, min_size=len(RAW_NAMES), max_size=len(RAW_NAMES)),
        "threshold": st.sampled_from([0.8, 0.8, 0.95, 0.5])})


def hipporag_graph(fns: dict, n: int) -> list[dict]:
    """HippoRAG's ``index`` graph steps on the drawn passages: each passage's triples through
    ``filter_invalid_triples`` and ``text_processing``, ``extract_entity_nodes``, then the fact, passage and
    synonymy edges (an embedding store stand-in holds the entities in the order ``extract_entity_nodes`` gives
    them, with the case's vectors): every edge ``add_new_edges`` would add ([from, to, weight], entities as
    ``e:<name>``, passages as ``p:<index>``) and each entity's passages."""
    import types

    import numpy as np

    cases = []
    for inp in examples(hipporag_strategy(), n):
        processed = list(dict.fromkeys(fns["text_processing"](name) for name in RAW_NAMES))
        vectors = {name: inp["vectors"][k] for k, name in enumerate(processed)}
        inp = {**inp, "entity_vectors": vectors}
        del inp["vectors"]

        def run():
            chunk_ids = [fns["compute_mdhash_id"](f"passage {k}", prefix="chunk-") for k in range(len(inp["passages"]))]
            chunk_triples = [[fns["text_processing"](t) for t in fns["filter_invalid_triples"](raw)]
                             for raw in inp["passages"]]
            entity_nodes, chunk_entities = fns["extract_entity_nodes"](chunk_triples)
            keys = {fns["compute_mdhash_id"](e, prefix="entity-"): e for e in entity_nodes}
            store = types.SimpleNamespace(
                get_all_id_to_rows=lambda: {k: {"hash_id": k, "content": e} for k, e in keys.items()},
                get_embeddings=lambda ids: [np.asarray(vectors[keys[i]], dtype=np.float32) for i in ids])
            me = types.SimpleNamespace(
                graph=__import__("igraph").Graph(directed=False), node_to_node_stats={}, ent_node_to_chunk_ids={},
                entity_embedding_store=store, global_config=types.SimpleNamespace(
                    synonymy_edge_topk=2047, synonymy_edge_sim_threshold=inp["threshold"],
                    synonymy_edge_query_batch_size=1000, synonymy_edge_key_batch_size=10000))
            fns["add_fact_edges"](me, chunk_ids, chunk_triples)
            fns["add_passage_edges"](me, chunk_ids, chunk_entities)
            fns["add_synonymy_edges"](me)
            name = {**{k: f"e:{e}" for k, e in keys.items()}, **{c: f"p:{i}" for i, c in enumerate(chunk_ids)}}
            return {"edges": [[name[a], name[b], float(w)] for (a, b), w in me.node_to_node_stats.items() if a != b],
                    "entity_passages": {keys[k]: sorted(int(name[c][2:]) for c in cs)
                                        for k, cs in me.ent_node_to_chunk_ids.items()}}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def _hhmmssff(centis: int) -> str:
    seconds, ff = divmod(centis, 100)
    return f"{seconds // 3600:02d}{seconds % 3600 // 60:02d}{seconds % 60:02d}{ff:02d}"


KINDS = ["multiscale_windows", "reasoning_reply", "graph_search", "semantic_retrieval", "hipporag_graph"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=SRC / "worldmm")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--kinds", nargs="*", default=KINDS, help="the kinds to regenerate (the others are kept as "
                                                                 "stored); default: all")
    args = parser.parse_args()
    gm, memory = load(args.src.resolve())
    made = {}
    if "multiscale_windows" in args.kinds:
        made["multiscale_windows"] = multiscale(gm, args.n)
    if "reasoning_reply" in args.kinds:
        made["reasoning_reply"] = reasoning_reply(memory, args.n)
    if "graph_search" in args.kinds:
        made["graph_search"] = graph_search(hipporag(args.src.resolve()), args.n)
    if "hipporag_graph" in args.kinds:
        made["hipporag_graph"] = hipporag_graph(hipporag_build(args.src.resolve()), args.n)
    if "semantic_retrieval" in args.kinds:
        made["semantic_retrieval"] = semantic_retrieval(semantic_memory(args.src.resolve()), args.n)
    kinds = kept_kinds("worldmm", made, KINDS)
    path = write_cases("worldmm", RELEASE, kinds)
    print(path, {k: len(v) for k, v in kinds.items()})


if __name__ == "__main__":
    main()
