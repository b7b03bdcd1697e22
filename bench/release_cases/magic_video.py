"""MAGIC-Video's deterministic kinds, computed by the release's own functions on Hypothesis-drawn inputs.

    python bench/release_cases/magic_video.py [--src /work/wt/_src/magic_video] [--n 400]

Needs a checkout of github lijiazheng0917/MAGIC-video at ``COMMIT``. Loads ``src/worldmm/memory/memory.py`` and
``src/worldmm/memory/visual/memory.py`` from it with stand-ins for the package imports they make but these
functions do not use (the LLM, embedding and sibling memory packages) and for ``decord`` (it reports a frame rate
and a frame count and returns black frames of the indices asked for). Writes
``tests/reference/generated/magic_video/``.

Kinds:
- ``extract_frames`` — ``VisualMemory._extract_frames(video, fps, max_frames, start_sec, end_sec)``: the frame
  indices decord is asked for (``[]`` where the release returns no frame, its exceptions included);
- ``time_reference_reply`` — ``parse_time_reference(query)`` with the time-extraction model's reply scripted:
  ``[start, end]`` or ``None``;
- ``qa_frame_budget`` — ``unified/memory.py`` ``UnifiedMemory.format_results`` over visual-clip nodes: each clip's
  frames under the per-clip cap and the total left (igraph 1.0.0 is imported by ``unified/graph.py``);
- ``graph_build`` — ``unified/graph.py`` ``MultimodalGraph.add_*_nodes`` on drawn caption, NER and snapshot files;
- ``filter_by_time`` — ``MultimodalGraph.filter_by_time`` on drawn nodes and edges;
- ``ppr_retrieve`` — ``build_igraph`` + ``unified/retrieval.py`` ``cross_modal_retrieve`` with fixed vectors
  (rank_bm25 0.2.2 needed);
- ``time_bypass`` — ``memory.py`` ``WorldMemory.retrieve_by_time`` over captions loaded by the episodic memory's
  ``_process_caption_data`` (compiled from the checkout's text);
- ``chain_facts`` — ``unified/memory.py`` ``UnifiedMemory.load`` (the chain loader; the graph file is an empty
  graph) + ``get_chain_facts_for_results`` with a vocabulary embedding stand-in, rerun under ``PYTHONHASHSEED``
  1-8 for the release's hash-ordered picks.

``--kinds`` regenerates only the kinds named and keeps the others as stored.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SRC, examples, kept_kinds, outcome, release_functions, write_cases  # noqa: E402

COMMIT = "0f2273f7f07360cc58588399553b5a6ea758b084"
RELEASE = {"release": "github lijiazheng0917/MAGIC-video", "commit": COMMIT}


class _Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return _Anything


class Decord:
    """decord's VideoReader: the registered rate and frame count; ``get_batch`` records the indices asked for."""

    fps = 30.0
    frames = 0
    asked: list = []

    class VideoReader:
        def __init__(self, path, ctx=None):
            pass

        def get_avg_fps(self):
            return Decord.fps

        def __len__(self):
            return Decord.frames

        def get_batch(self, indices):
            import numpy as np

            Decord.asked.append(list(indices))
            return types.SimpleNamespace(asnumpy=lambda: np.zeros((len(indices), 2, 2, 3), dtype=np.uint8))


def load(src: Path) -> dict:
    package = src / "src" / "worldmm"
    for name, path in (("worldmm", package), ("worldmm.memory", package / "memory"),
                       ("worldmm.memory.visual", package / "memory" / "visual"),
                       ("worldmm.memory.unified", package / "memory" / "unified")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    stub = {"worldmm.llm": {"LLMModel": _Anything, "PromptTemplateManager": _Anything},
            "worldmm.embedding": {"EmbeddingModel": _Anything},
            "worldmm.memory.episodic": {"EpisodicMemory": _Anything, "CaptionEntry": _Anything},
            "worldmm.memory.semantic": {"SemanticMemory": _Anything, "SemanticTripleEntry": _Anything},
            "decord": {"VideoReader": Decord.VideoReader, "cpu": lambda n=0: None}}
    for name, attrs in stub.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    sys.modules["worldmm.memory.unified"].UnifiedMemory = _Anything  # the graph backend: not used here
    visual = importlib.import_module("worldmm.memory.visual.memory")
    sys.modules["worldmm.memory.visual"].VisualMemory = visual.VisualMemory
    utils = importlib.import_module("worldmm.memory.utils")
    del utils
    memory = importlib.import_module("worldmm.memory.memory")
    logging.disable(logging.CRITICAL)
    return {"visual": visual, "memory": memory}


def extract_frames(mods: dict, n: int, video: Path) -> list[dict]:
    from hypothesis import strategies as st

    seconds = st.one_of(st.floats(-10, 4000, allow_nan=False), st.sampled_from([0.0, 0.5, 10.0, 29.99, 30.0, 599.5,
                                                                                   600.0, float("inf"),
                                                                                   float("-inf")]),
                        st.integers(0, 700).map(float))
    strategy = st.fixed_dictionaries({
        "video_fps": st.one_of(st.sampled_from([30.0, 29.97002997002997, 25.0, 24.0, 1.0, 0.5, 60.0, 2.0, 0.0]),
                               st.floats(0.1, 120)),
        "n_frames": st.one_of(st.sampled_from([0, 1, 2, 16, 17, 600, 601, 18000]), st.integers(0, 40000)),
        "fps": st.sampled_from([1.0, 1.0, 1.0, 0.5, 2.0, 3.0]),
        "max_frames": st.sampled_from([16, 16, 64, 1, 2, 5]),
        "start_sec": seconds, "end_sec": seconds})
    cases = []
    extract = mods["visual"].VisualMemory._extract_frames
    for inp in examples(strategy, n):
        Decord.fps, Decord.frames, Decord.asked = inp["video_fps"], inp["n_frames"], []

        def run():
            frames = extract(object(), str(video), inp["fps"], inp["max_frames"], inp["start_sec"], inp["end_sec"])
            return {"indices": [f.frame_index for f in frames], "asked": Decord.asked}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def qa_frame_budget(mods: dict, n: int, video: Path) -> list[dict]:
    """``UnifiedMemory.format_results`` over retrieved visual-clip nodes (no episode node: the release's branch
    then shows the clip's caption, empty here) with the release's ``VisualMemory._extract_frames``: each clip's
    frames under the per-clip cap and the 64-frame total, starting from the frames earlier rounds spent."""
    from hypothesis import strategies as st

    nodes = importlib.import_module("worldmm.memory.unified.nodes")
    unified = importlib.import_module("worldmm.memory.unified.memory")
    extract = mods["visual"].VisualMemory._extract_frames
    span = st.tuples(st.integers(0, 700).map(float), st.integers(0, 120).map(float)).map(lambda p: [p[0], p[0] + p[1]])
    strategy = st.fixed_dictionaries({
        "video_fps": st.sampled_from([30.0, 25.0, 1.0, 0.5, 29.97002997002997]),
        "n_frames": st.sampled_from([600, 18000, 21000, 30]), "clips": st.lists(span, min_size=0, max_size=8),
        "per_clip": st.sampled_from([16, 16, 4, 1]), "total": st.sampled_from([64, 64, 20, 0]),
        "used": st.sampled_from([0, 0, 10, 60, 64, 70])})
    cases = []
    for inp in examples(strategy, n):
        Decord.fps, Decord.frames = inp["video_fps"], inp["n_frames"]
        per_clip: list = []

        def extracting(**kwargs):
            frames = extract(object(), **kwargs)
            per_clip.append([kwargs["start_sec"], [f.frame_index for f in frames]])
            return frames

        results = [(nodes.GraphNode(id=f"vis_{k}", node_type=nodes.NodeType.VISUAL_CLIP, text="", start_ts=k,
                                    end_ts=k, metadata={"video_path": str(video), "start_sec": a, "end_sec": b}), 1.0)
                   for k, (a, b) in enumerate(inp["clips"])]
        memory = types.SimpleNamespace(_full_graph=None)

        def run():
            unified.UnifiedMemory.format_results(memory, results, types.SimpleNamespace(_extract_frames=extracting),
                                                 max_frames_per_clip=inp["per_clip"], max_total_frames=inp["total"],
                                                 _current_total_frames=inp["used"])
            return per_clip

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def time_reference_reply(mods: dict, n: int) -> list[dict]:
    from hypothesis import strategies as st

    number = st.one_of(st.integers(-100, 100000), st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from(['"40"', '"x"', "null", "true", "[1]", '"1e3"', "NaN", "Infinity", "1e400"]))
    obj = st.builds(lambda s, e, order, extra: "{" + ", ".join(
        ([f'"start": {_num(s)}', f'"end": {_num(e)}'] if order else [f'"end": {_num(e)}', f'"start": {_num(s)}'])
        + extra) + "}", number, number, st.booleans(),
        st.lists(st.sampled_from(['"note": "x"', '"start_s": 1']), max_size=1))
    wrapped = st.builds(lambda pre, o, post: f"{pre}{o}{post}", st.sampled_from(["", " ", "\n", "```json\n",
                                                                                "Sure: ", "["]),
                        obj, st.sampled_from(["", " ", "\n", "\n```", ".", "]", " null"]))
    strategy = st.one_of(obj, wrapped, st.sampled_from(["null", " NULL ", "Null", "None", "", "   ", "nil", "{}",
                                                        '{"start": 1}', '{"end": 2}', "[]", "0", '"null"',
                                                        '{"start": 1, "end": 2}{"start": 3, "end": 4}']),
                         st.text(max_size=12))
    memory = mods["memory"]
    cases = []
    for reply in examples(strategy, n):
        memory._time_extract_llm = types.SimpleNamespace(generate=lambda prompt, r=reply: r)
        out = outcome(lambda: memory.parse_time_reference("what happens at 0:45"))
        if "value" in out and out["value"] is not None:
            out = {"value": list(out["value"])}
        cases.append({"input": {"reply": reply}, "output": out})
    return cases


# ---------------------------------------------------------------------------------------------- graph kinds
_WORDS = ["Alice", "alice", " Bob ", "I", "me", "My", "", "  ", "Kühne", "Bob's", "x-y", "the cup", "東京", "cup"]


def _captions(level_s: float):
    """One granularity's caption entries (MM-Lifelong layout): starts on the level's grid or off it, spans of
    the window, zero or shorter; repeated spans, gaps past the 6-h temporal limit, int or float seconds; text
    repeated, empty or unicode; ``video_path`` present, empty or missing."""
    from hypothesis import strategies as st

    entry = st.builds(
        lambda k, jump, off, length, as_int, text, path: {
            **{"start_sec": (int if as_int else float)(k * level_s + jump + off),
               "end_sec": (int if as_int else float)(k * level_s + jump + off + length), "text": text},
            **({} if path is None else {"video_path": path})},
        st.integers(0, 6), st.sampled_from([0, 0, 0, 21600, 25000]), st.sampled_from([0, 0, 0, 0.5, 10.25]),
        st.sampled_from([level_s, level_s, 0, level_s / 2, level_s + 1]), st.booleans(),
        st.sampled_from(["a walk", "a walk", "cup on table", "", "Alice talks to Bob", "東京 at night"]),
        st.sampled_from(["v.mp4", "v.mp4", "", None]))
    return st.lists(entry, max_size=5 if level_s == 30.0 else 3)


def graph_build_strategy():
    from hypothesis import strategies as st

    name = st.one_of(st.sampled_from(_WORDS), st.sampled_from([None, 0]))
    triple = st.lists(st.sampled_from(_WORDS[:12] + ["likes", "holds"]), min_size=2, max_size=4)
    return st.fixed_dictionaries({
        "captions": st.fixed_dictionaries({"30sec": _captions(30.0), "3min": _captions(180.0),
                                           "10min": _captions(600.0), "1h": _captions(3600.0)}),
        # NER keys: indices of 30-s captions (their text's chunk key) or a key matching none
        "ner": st.lists(st.tuples(st.one_of(st.integers(0, 5), st.just(-1)), st.lists(name, max_size=4)),
                        max_size=4),
        "snapshots": st.lists(st.tuples(st.sampled_from(["0", "30", "111040000", "600"]),
                                        st.lists(triple, max_size=4)), max_size=2),
        "person": st.sampled_from(["I", "I", "A1_JAKE"])})


def graph_build(mods: dict, n: int, tmp: Path) -> list[dict]:
    """``MultimodalGraph.add_episode_nodes`` → ``add_visual_nodes`` (no clip embeddings) → ``add_entity_nodes``
    → ``add_semantic_nodes``, in the order ``preprocess/build_unified_graph.py`` calls them, on files written
    from the drawn captions, NER results and snapshots: every node (id, type, text, start_ts, end_ts) and every
    edge (src, dst, type, weight) in the order the release adds them."""
    import json

    graph_mod = importlib.import_module("worldmm.memory.unified.graph")
    cases = []
    for inp in examples(graph_build_strategy(), n):
        files = graph_case_files(inp, tmp)

        def run():
            g = graph_mod.MultimodalGraph()
            g.add_episode_nodes({k: str(v) for k, v in files["captions"].items()})
            base = json.loads(files["captions"]["30sec"].read_text())
            g.add_visual_nodes(base, {})
            g.add_entity_nodes(str(files["openie"]), base, person=inp["person"])
            g.add_semantic_nodes(str(files["semantic"]), person=inp["person"])
            return {"nodes": [[n.id, n.node_type.value, n.text, n.start_ts, n.end_ts] for n in g.nodes.values()],
                    "edges": [[e.src_id, e.dst_id, e.edge_type.value, e.weight] for e in g.edges]}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def graph_case_files(inp: dict, folder: Path) -> dict:
    """The release's input files of a ``graph_build`` case (also what the conformance adapter reads): one caption
    JSON per granularity, ``openie_results.json`` (NER keyed by the chunk key of the n-th 30-s caption's text,
    ``-1`` a key matching no caption) and the semantic consolidation snapshots."""
    import hashlib
    import json

    folder.mkdir(parents=True, exist_ok=True)
    captions = {}
    for level, entries in inp["captions"].items():
        captions[level] = folder / f"video_{level}.json"
        captions[level].write_text(json.dumps(entries))
    base = inp["captions"]["30sec"]
    ner = {}
    for index, names in inp["ner"]:
        text = base[index]["text"] if 0 <= index < len(base) else "no caption has this text"
        ner["chunk-" + hashlib.md5(text.encode()).hexdigest()] = names
    openie = folder / "openie_results.json"
    openie.write_text(json.dumps({"ner_results": ner}))
    semantic = folder / "semantic_consolidation_results.json"
    semantic.write_text(json.dumps({k: {"consolidated_semantic_triples": t} for k, t in inp["snapshots"]}))
    return {"captions": captions, "openie": openie, "semantic": semantic}


_TYPES = ["episode", "visual_clip", "entity", "semantic"]


def filter_by_time_strategy():
    """Nodes of every type with times on a small grid (ties with the query time), semantic snapshots sharing a
    time, and edges between any two (self-loops, repeats); MM-Lifelong float seconds or EgoLife TS9 ints (frames
    ``FF`` 00 or not), the query time in the same format."""
    from hypothesis import strategies as st

    def ts9(seconds: int, ff: int) -> int:
        h, m, s = seconds // 3600 % 24, seconds % 3600 // 60, seconds % 60
        return int(f"{seconds // 86400 + 1}{h:02d}{m:02d}{s:02d}{ff:02d}")

    grid = st.sampled_from([0, 30, 60, 90, 180, 86400 + 30])
    node = st.tuples(st.sampled_from(_TYPES), grid, st.sampled_from([0, 0, 30, 150]), st.sampled_from([0, 0, 50]))
    return st.builds(
        lambda fmt, nodes, edges, until: {
            "format": fmt,
            "nodes": [[f"n{k}", t, *((float(a), float(a + d)) if fmt == "seconds" else (ts9(a, ff), ts9(a + d, ff)))]
                      for k, (t, a, d, ff) in enumerate(nodes)],
            "edges": [[f"n{u}", f"n{v}", w] for u, v, w in edges if u < len(nodes) and v < len(nodes)],
            "until": float(until[0]) if fmt == "seconds" else ts9(until[0], until[1])},
        st.sampled_from(["seconds", "ts9"]), st.lists(node, min_size=1, max_size=8),
        st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.sampled_from([1.0, 0.5, 0.8])), max_size=8),
        st.tuples(st.sampled_from([0, 30, 60, 89, 90, 180, 240, 86400 + 30, 86400 + 200]),
                  st.sampled_from([0, 0, 50, 99])))


def filter_by_time(mods: dict, n: int) -> list[dict]:
    """``MultimodalGraph.filter_by_time(until_time)`` on a graph of the drawn nodes and edges: the visible node
    ids in order and the edges kept (by their index in the full list)."""
    graph_mod = importlib.import_module("worldmm.memory.unified.graph")
    nodes = importlib.import_module("worldmm.memory.unified.nodes")
    cases = []
    def frames_zeroed(inp: dict) -> dict:
        def zero(ts):
            return ts - ts % 100
        return {**inp, "nodes": [[nid, kind, zero(a), zero(b)] for nid, kind, a, b in inp["nodes"]],
                "until": zero(inp["until"])}

    for inp in examples(filter_by_time_strategy(), n):
        def run(inp=inp):
            g = graph_mod.MultimodalGraph()
            for nid, kind, start, end in inp["nodes"]:
                g.nodes[nid] = nodes.GraphNode(id=nid, node_type=nodes.NodeType(kind), text=nid, start_ts=start,
                                               end_ts=end)
            g.edges = [nodes.GraphEdge(u, v, nodes.EdgeType.CONTAINS, w) for u, v, w in inp["edges"]]
            sub = g.filter_by_time(inp["until"])
            kept = {id(e) for e in sub.edges}
            return {"nodes": list(sub.nodes), "edges": [k for k, e in enumerate(g.edges) if id(e) in kept]}

        case = {"input": inp, "output": outcome(run)}
        if inp["format"] == "ts9" and frames_zeroed(inp) != inp:  # the reference for senri's whole-second times
            case["output_frames_zeroed"] = outcome(lambda: run(frames_zeroed(inp)))
        cases.append(case)
    return cases


def ppr_strategy():
    """A small graph (1-10 nodes of every type and granularity, texts from a few words so BM25 ties, 3-d text
    vectors of small integers — zero rows, equal rows —, clip vectors for some clips or none), weighted edges
    (self-loops and repeated pairs), a query with its text and clip-space vectors, and the retrieval settings."""
    from hypothesis import strategies as st

    vec = st.lists(st.sampled_from([-1, 0, 0, 1, 1, 2]), min_size=3, max_size=3)
    kind = st.sampled_from([("episode", "30sec"), ("episode", "30sec"), ("episode", "3min"), ("episode", "10min"),
                            ("episode", "1h"), ("semantic", ""), ("entity", ""), ("visual_clip", "")])
    text = st.sampled_from(["cup on table", "Alice walks", "cup", "", "alice cup cup", "東京 night", "Bob"])
    node = st.tuples(kind, text, vec, st.one_of(st.none(), vec), st.integers(0, 20))
    return st.builds(
        lambda nodes, edges, query, qv, qvis, settings: {
            "nodes": [{"id": f"n{k}", "type": t, "granularity": g, "text": x, "vector": v,
                       "spo": (x.split() + ["", "", ""])[:3] if t == "semantic" else None,
                       "clip_vector": cv if t == "visual_clip" else None,
                       # the graph filter_by_time leaves: one semantic snapshot (its time on every triple)
                       "start": 600.0 if t == "semantic" else float(30 * s),
                       "end": 600.0 if t == "semantic" else float(30 * s + 30)}
                      for k, ((t, g), x, v, cv, s) in enumerate(nodes)],
            "edges": [[f"n{u}", f"n{w}", weight] for u, w, weight in edges if u < len(nodes) and w < len(nodes)],
            "query": query, "query_vector": qv, "query_clip_vector": qvis, **settings},
        st.lists(node, min_size=1, max_size=10),
        st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.sampled_from([1.0, 1.0, 0.5, 0.8, 1 / 31])),
                 max_size=14),
        st.sampled_from(["cup", "where is the cup?", "Alice", "night", "nothing here", ""]), vec, vec,
        st.fixed_dictionaries({"seed_top_k": st.sampled_from([5, 5, 1, 3]),
                               "bm25_weight": st.sampled_from([0.3, 0.3, 0.0]),
                               "damping": st.sampled_from([0.85, 0.85, 0.5]), "top_k": st.sampled_from([16, 16, 3])}))


class _Embedder:
    """The embedding model's two query encoders, returning the case's fixed vectors."""

    def __init__(self, text, clip):
        import numpy as np

        self.text, self.clip = np.asarray(text, dtype=np.float32), np.asarray(clip, dtype=np.float32)

    def encode_text(self, query):
        return self.text

    def encode_vis_query(self, query):
        return self.clip


def ppr_retrieve(mods: dict, n: int) -> list[dict]:
    """``MultimodalGraph.build_igraph`` then ``cross_modal_retrieve`` (text, BM25 and clip seeds, igraph prpack
    PPR, the hybrid PPR x (cos+1)/2, the multiscale quotas) with the caller's target types (episode, semantic,
    clip), alpha 0.7, on the drawn graph with its fixed vectors: the returned (id, score) and every target
    node's hybrid score (the reference for ties)."""
    import numpy as np
    import rank_bm25  # noqa: F401  (build_igraph drops its BM25 seeds silently without it)

    graph_mod = importlib.import_module("worldmm.memory.unified.graph")
    nodes = importlib.import_module("worldmm.memory.unified.nodes")
    retrieval = importlib.import_module("worldmm.memory.unified.retrieval")
    targets = [nodes.NodeType.EPISODE, nodes.NodeType.SEMANTIC, nodes.NodeType.VISUAL_CLIP]
    cases = []
    for inp in examples(ppr_strategy(), n):
        def run():
            g = graph_mod.MultimodalGraph()
            for d in inp["nodes"]:
                kind = nodes.NodeType(d["type"])
                meta = {"granularity": d["granularity"]} if kind == nodes.NodeType.EPISODE else {}
                if kind == nodes.NodeType.SEMANTIC:
                    meta = dict(zip(("subject", "predicate", "object"), d["spo"]))
                g.nodes[d["id"]] = nodes.GraphNode(
                    id=d["id"], node_type=kind, text=d["text"], start_ts=d["start"], end_ts=d["end"],
                    text_embedding=np.asarray(d["vector"], dtype=np.float32),
                    visual_embedding=None if d["clip_vector"] is None else np.asarray(d["clip_vector"], np.float32),
                    metadata=meta)
            g.edges = [nodes.GraphEdge(u, v, nodes.EdgeType.CONTAINS, w) for u, v, w in inp["edges"]]
            g.build_igraph()
            model = _Embedder(inp["query_vector"], inp["query_clip_vector"])
            found = retrieval.cross_modal_retrieve(g, inp["query"], model, top_k=inp["top_k"],
                                                   target_node_types=targets, seed_top_k=inp["seed_top_k"],
                                                   damping=inp["damping"], bm25_weight=inp["bm25_weight"])
            reset = retrieval.build_reset_vector(g, inp["query"], model, 0.7, inp["seed_top_k"],
                                                 bm25_weight=inp["bm25_weight"])
            ppr = retrieval._run_ppr(g, reset, inp["damping"])
            sims = retrieval._compute_text_sims(g, inp["query"], model)
            return {"ranked": [[node.id, score] for node, score in found],
                    "ppr": {nid: float(p) for nid, p in zip(g._all_node_ids, ppr)},
                    "hybrid": {nid: float(p) * float(s) for nid, p, s in zip(g._all_node_ids, ppr, sims)
                               if g.nodes[nid].node_type in targets}}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def time_bypass_strategy():
    """Captions of the 30-s, 3-min and 10-min levels (ints or floats, on and off the grid, zero-length, repeated
    spans, blank and unicode text, in time order or not) and a time range (inside, touching, reversed, past the
    end, NaN or infinite bounds, as the time extractor's reply may give them)."""
    from hypothesis import strategies as st

    def level(window: float):
        entry = st.builds(lambda k, off, length, as_int, text: {
            "start_sec": (int if as_int else float)(k * window + off),
            "end_sec": (int if as_int else float)(k * window + off + length), "text": text},
            st.integers(0, 40), st.sampled_from([0, 0, 0, 0.5, 12.25]), st.sampled_from([window, window, 0, 7.5]),
            st.booleans(), st.sampled_from(["a walk", "cup on table", "", "  ", "東京 at night", "a walk"]))
        return st.one_of(st.lists(entry, max_size=6).map(lambda es: sorted(es, key=lambda e: e["start_sec"])),
                         st.lists(entry, max_size=4))

    bound = st.one_of(st.integers(0, 1300).map(float), st.sampled_from([0.0, 30.0, 59.5, 600.0, 3599.0, 3600.0,
                                                                         float("nan"), float("inf"), -5.0]))
    return st.fixed_dictionaries({"captions": st.fixed_dictionaries(
        {"30sec": level(30.0), "3min": level(180.0), "10min": level(600.0)}), "range": st.tuples(bound, bound)})


def time_bypass(mods: dict, n: int, src: Path) -> list[dict]:
    """``WorldMemory.retrieve_by_time(start, end)`` (G-R6: a query with a time range returns the overlapping
    30-s and 3-min captions as text, no PPR) over captions loaded by ``EpisodicMemory._process_caption_data``
    (compiled from ``episodic/memory.py``; ``CaptionEntry`` a plain record): the text the round retrieves."""
    import types
    from typing import Any, Dict, List

    load_captions = release_functions(src / "src" / "worldmm" / "memory" / "episodic" / "memory.py",
                                      ["_process_caption_data"], {"CaptionEntry": types.SimpleNamespace,
                                                                  "List": List, "Dict": Dict, "Any": Any},
                                      owner="EpisodicMemory")["_process_caption_data"]
    retrieve = mods["memory"].WorldMemory.retrieve_by_time
    cases = []
    for inp in examples(time_bypass_strategy(), n):
        episodic = types.SimpleNamespace(captions={}, caption_id_to_entry={}, text_to_entry={})
        for level, entries in inp["captions"].items():
            episodic.captions[level] = []
            load_captions(episodic, entries, level)
        me = types.SimpleNamespace(episodic_memory=episodic)
        cases.append({"input": inp, "output": outcome(lambda: retrieve(me, *inp["range"]))})
    return cases


# ------------------------------------------------------------------------------------------------ chain facts

#: The embedding stand-in's words: a text's vector is how often each occurs in its lower-cased text, L2-normalised
#: (zero stays zero). The vocabulary is stored in every case, so the conformance test feeds senri the same function.
EMBED_VOCAB = ["cup", "bob", "dog", "walk", "night", "東京", "coffee", "ice"]


def embed_counts(texts, vocab):
    import numpy as np

    rows = np.asarray([[str(t).lower().count(w) for w in vocab] for t in texts], dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def chain_facts_strategy():
    """Chain files as the release's loader reads them (MM-Lifelong: float-second episodes, steps with no day):
    topic chains keyed by entity (with/without ``has_lifecycle``; facts with HH:MM:SS, HH:MM, fractional, blank or
    unreadable times, blank or unicode text), event chains (key entities, 0-4 steps, times that read 0, reversed
    spans, missing descriptions), the retrieved nodes (episodes of every granularity, some other types), the
    question, the query time (none, seconds) and the limits and thresholds the caller passes."""
    from hypothesis import strategies as st

    def clock(seconds: int) -> str:
        return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"

    grid = st.one_of(st.integers(0, 20).map(lambda k: 60 * k), st.integers(0, 3000))  # steps and episodes meet
    time_text = st.one_of(grid.map(clock), grid.map(clock), grid.map(clock),
                          st.sampled_from(["", "00:05", "0:10:30", "later", "00:10:30.5", "00:00:00", "DAY1 00:10:00"]))
    entity = st.sampled_from(["cup", "coffee-cup", "ice cream", "Bob", "dog", "東京", "cups"])
    text = st.sampled_from(["Bob holds the cup", "the dog walks at night", "coffee cup on table", "", "東京 night walk",
                            "ice cream and coffee-cup", "Bob", "cups and dogs", " ", "Bob holds the cup"])
    fact = st.fixed_dictionaries({"time": time_text.filter(lambda t: not t.startswith("DAY")), "fact": text})
    topic = st.dictionaries(entity, st.fixed_dictionaries({"has_lifecycle": st.sampled_from([True, True, False]),
                                                           "facts": st.tuples(st.lists(fact, min_size=1, max_size=4), st.booleans()).map(
                                                               lambda p: p[0] + p[0][:1] if p[1] else p[0])}),
                            min_size=1, max_size=4)
    spanned = st.builds(lambda start, length, description: {
        "day": "", "start_time": clock(start), "end_time": clock(max(0, start + length)), "description": description},
        grid, st.sampled_from([300, 300, 600, 60, 0, -120]), text)
    step = st.one_of(spanned, spanned, spanned, st.fixed_dictionaries(
        {"day": st.just(""), "start_time": time_text, "end_time": time_text, "description": text}))
    event = st.fixed_dictionaries({"name": st.sampled_from(["morning walk", "coffee break", "dog walk", "stream"]),
                                   "key_entities": st.lists(entity, max_size=2),
                                   "steps": st.lists(step, min_size=1, max_size=5)})
    # episodes' texts mostly name an entity, so topics reach their hits
    node = st.fixed_dictionaries({
        "type": st.sampled_from(["episode", "episode", "episode", "semantic"]),
        "granularity": st.sampled_from(["30sec", "30sec", "30sec", "3min", "10min", "1h"]), "text": text,
        "start": st.one_of(grid.map(float), grid.map(float), st.floats(0, 3000, allow_nan=False)),
        "length": st.sampled_from([30.0, 180.0, 0.0, 600.0])})
    return st.fixed_dictionaries({
        "topic_chains": topic, "event_chains": st.lists(event, min_size=1, max_size=3), "results": st.lists(node, min_size=1, max_size=10),
        "query_text": st.sampled_from(["Where is the cup?", "What did Bob do?", "dogs at night", "東京", "coffee cups",
                                       "what happened", "", "ice cream on the morning walk", "the cup and the dog"]),
        "query_time": st.one_of(st.none(), st.integers(0, 3600).map(float), st.just(2_000_000.0)),
        "min_hits": st.sampled_from([1, 1, 2, 3]), "max_topic_chains": st.sampled_from([3, 3, 1, 0]),
        "max_event_chains": st.sampled_from([2, 2, 1, 0]),
        "topic_sim_threshold": st.sampled_from([0.5, 0.5, 0.7, 0.0]),
        "event_chain_sim_threshold": st.sampled_from([0.5, 0.5, 0.7, 0.0]),
        "event_chain_min_hits": st.sampled_from([1, 1, 2]), "embed_vocab": st.just(EMBED_VOCAB)})


def run_chain_facts(mods: dict, inp: dict, folder: Path) -> dict:
    """The release's ``UnifiedMemory.load`` (its chain loader; the graph file is the one stand-in: an empty
    graph) then ``get_chain_facts_for_results`` over the case's retrieved nodes, the embedding model the
    vocabulary stand-in."""
    import json

    import numpy as np

    unified = importlib.import_module("worldmm.memory.unified.memory")
    graph_mod = importlib.import_module("worldmm.memory.unified.graph")
    nodes = importlib.import_module("worldmm.memory.unified.nodes")
    folder.mkdir(parents=True, exist_ok=True)
    topic, event = folder / "topic_chains.json", folder / "event_chain_step3_enriched.json"
    topic.write_text(json.dumps(inp["topic_chains"], ensure_ascii=False), encoding="utf-8")
    event.write_text(json.dumps(inp["event_chains"], ensure_ascii=False), encoding="utf-8")
    unified.MultimodalGraph = types.SimpleNamespace(load=lambda path: graph_mod.MultimodalGraph())

    class Embedder:
        def encode_text(self, texts):
            return embed_counts(texts, inp["embed_vocab"])

    def run():
        mem = unified.UnifiedMemory(Embedder(), "unused.pkl")
        mem.load(topic_chain_facts_path=str(topic), event_chain_path=str(event))
        results = []
        for k, d in enumerate(inp["results"]):
            kind = nodes.NodeType(d["type"])
            meta = {"granularity": d["granularity"]} if kind == nodes.NodeType.EPISODE else {}
            results.append((nodes.GraphNode(id=f"n{k}", node_type=kind, text=d["text"], start_ts=d["start"],
                                            end_ts=d["start"] + d["length"], text_embedding=np.zeros(3),
                                            metadata=meta), 1.0))
        return mem.get_chain_facts_for_results(
            results, query_time=inp["query_time"], query_text=inp["query_text"], min_hits=inp["min_hits"],
            max_topic_chains=inp["max_topic_chains"], max_event_chains=inp["max_event_chains"],
            embedding_model=Embedder(), topic_sim_threshold=inp["topic_sim_threshold"],
            event_chain_sim_threshold=inp["event_chain_sim_threshold"],
            event_chain_min_hits=inp["event_chain_min_hits"])

    return outcome(run)


def chain_facts(mods: dict, n: int, tmp: Path) -> list[dict]:
    """``get_chain_facts_for_results`` (G-R7) on drawn chain files and retrieved nodes. The release picks among
    equally-hit topics in the order of a Python set of strings (hash-seeded), so each case is also run under
    ``PYTHONHASHSEED`` 1-8 (:func:`replay_chain_facts` in a subprocess): ``alternatives`` holds the outputs
    that differ from ``output`` (empty: the output does not depend on the hash seed)."""
    import json
    import os
    import subprocess

    inputs = examples(chain_facts_strategy(), n)
    cases = [{"input": inp, "output": run_chain_facts(mods, inp, tmp / str(k))} for k, inp in enumerate(inputs)]
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "inputs.json").write_text(json.dumps(inputs, ensure_ascii=False), encoding="utf-8")
    for seed in map(str, range(1, 9)):
        subprocess.run([sys.executable, __file__, "--src", str(CHAIN_SRC[0]), "--chain-replay", str(tmp / "inputs.json"),
                        str(tmp / f"out{seed}.json")], check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        outs = json.loads((tmp / f"out{seed}.json").read_text(encoding="utf-8"))
        for case, out in zip(cases, outs):
            alts = case.setdefault("alternatives", [])
            if out != json.loads(json.dumps(case["output"])) and out not in alts:
                alts.append(out)
    return cases


CHAIN_SRC: list = []


def replay_chain_facts(mods: dict, inputs: Path, out: Path) -> None:
    import json

    with tempfile.TemporaryDirectory() as tmp:
        outs = [run_chain_facts(mods, inp, Path(tmp) / str(k))
                for k, inp in enumerate(json.loads(inputs.read_text(encoding="utf-8")))]
    out.write_text(json.dumps(outs, ensure_ascii=False), encoding="utf-8")


def _num(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else \
            ("NaN" if value != value else ("Infinity" if value > 0 else "-Infinity"))
    return str(value)


#: Each kind: its generator, its share of ``--n`` and what else it is given (the empty video, a scratch folder).
KINDS = {"extract_frames": (extract_frames, 1, "video"), "time_reference_reply": (time_reference_reply, 1, ""),
         "qa_frame_budget": (qa_frame_budget, 0.5, "video"), "graph_build": (graph_build, 0.75, "tmp"),
         "filter_by_time": (filter_by_time, 1, ""), "ppr_retrieve": (ppr_retrieve, 1, ""),
         "time_bypass": (time_bypass, 1, "src"), "chain_facts": (chain_facts, 1, "tmp")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=SRC / "magic_video")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--kinds", nargs="*", default=list(KINDS),
                        help="the kinds to regenerate (the others are kept as stored); default: all")
    parser.add_argument("--chain-replay", nargs=2, type=Path, metavar=("INPUTS", "OUT"),
                        help="(internal) run chain_facts on stored inputs under this process' hash seed")
    args = parser.parse_args()
    mods = load(args.src.resolve())
    CHAIN_SRC.append(args.src.resolve())
    if args.chain_replay:
        replay_chain_facts(mods, *args.chain_replay)
        return
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "video.mp4"
        video.write_bytes(b"")
        made = {}
        for kind in args.kinds:
            fn, share, extra = KINDS[kind]
            extras = {"video": [video], "tmp": [Path(tmp) / kind], "src": [args.src.resolve()], "": []}
            made[kind] = fn(mods, int(args.n * share), *extras[extra])
    kinds = kept_kinds("magic_video", made, list(KINDS))
    path = write_cases("magic_video", RELEASE, kinds)
    print(path, {k: len(v) for k, v in kinds.items()})


if __name__ == "__main__":
    main()
