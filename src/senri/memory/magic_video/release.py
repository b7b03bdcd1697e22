"""Importing a memory MAGIC-Video's released preprocessing wrote (G-F1..F5): captions per level, OpenIE, every
semantic snapshot (a search reads the newest by its query time), chains as the release's loader reads them,
the pickled graph read by :func:`senri.memory.release.load_release_pickle` (the
release's own classes become plain records, nothing of its code runs; a refused pickle is rebuilt from the JSON
files and the store's ``config.yaml`` says so) and the clip embeddings.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from senri.memory.magic_video.build import (EMBEDDER_KEYS, _names, _triples, node_vectors, system_record,
                                            write_store)
from senri.memory.magic_video.graph import (ENTITY, EPISODE, GRANULARITIES, SEMANTIC, VISUAL, ChainRow, Episode,
                                            Graph, GraphNode, Snapshot, TextEncoder, build_graph, chunk_key,
                                            default_encoder, episode_id, read_clock, release_seconds, step_span,
                                            visual_id)
from senri.memory.release import load_release_pickle
from senri.memory.store import BuildRequest

log = logging.getLogger(__name__)


#: The release's own classes in ``graph.pkl`` (plain records on reading) and its enums (their string values).
RELEASE_RECORDS = {("worldmm.memory.unified.nodes", "GraphNode"), ("worldmm.memory.unified.nodes", "GraphEdge")}


RELEASE_ENUMS = {("worldmm.memory.unified.nodes", "NodeType"), ("worldmm.memory.unified.nodes", "EdgeType")}


def load_release_graph(path: Path) -> Graph:
    """The release's pickled graph as our :class:`Graph`, every semantic snapshot kept (a search reads the newest
    by its query time, G-R1) and every time in seconds (:func:`senri.memory.magic_video.graph.release_seconds`).
    ValueError naming the file and field when it is not the documented ``{nodes, edges}`` layout or holds a
    foreign global."""
    data = load_release_pickle(path, RELEASE_RECORDS, RELEASE_ENUMS)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict) or not isinstance(data.get("edges"), list):
        raise ValueError(f"{path}: field 'nodes' (dict) / 'edges' (list) missing")
    graph = Graph()
    for n in data["nodes"].values():
        kind = {"visual_clip": VISUAL}.get(getattr(n, "node_type", ""), getattr(n, "node_type", ""))
        meta = getattr(n, "metadata", {}) or {}
        if kind not in (EPISODE, VISUAL, ENTITY, SEMANTIC) or not isinstance(getattr(n, "id", None), str):
            raise ValueError(f"{path}: node {getattr(n, 'id', '?')!r} field 'node_type' {kind!r} is not a known type")
        try:
            start, end = release_seconds(n.start_ts), release_seconds(n.end_ts)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: node {n.id!r} field 'start_ts'/'end_ts': {exc}") from None
        if kind == SEMANTIC:
            node = GraphNode(n.id, SEMANTIC, str(n.text), start, start, "", str(meta.get("subject", "")),
                             str(meta.get("predicate", "")), str(meta.get("object", "")))
        else:
            node = GraphNode(n.id, kind, str(n.text), start, end,
                             str(meta.get("granularity", "30sec" if kind == VISUAL else "")) if kind != ENTITY else "")
        graph.nodes[node.node_id] = node
    for i, e in enumerate(data["edges"]):
        try:
            graph.add_edge(e.src_id, e.dst_id, str(e.edge_type), float(e.weight))
        except AttributeError as exc:
            raise ValueError(f"{path}: edge {i}: {exc}") from exc
    return graph


def release_snapshots(path: Path, data: Any) -> list[Snapshot]:
    """G-F2's semantic snapshots in file order, each at its key's time (seconds; an EgoLife TS9 key such as
    111040000 is DAY1 11:04:00; MM-Lifelong's single key "0" is the start), each triple as the release's graph
    builder reads it: a list of three parts or more gives its first three as text (empty and repeated ones
    kept: a triple's id is its position), a shorter one is skipped. ValueError naming the file and the key or
    field."""
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{path}: expected an object of snapshots (key \"0\")")
    out = []
    for key, content in data.items():
        try:
            time_s = release_seconds(float(key) if "." in str(key) else int(key))
        except ValueError:
            raise ValueError(f"{path}: snapshot key {key!r} is not a timestamp (seconds or TS9)") from None
        if not isinstance(content, dict) or not isinstance(content.get("consolidated_semantic_triples"), list):
            raise ValueError(f"{path}: snapshot {key!r} field 'consolidated_semantic_triples' missing")
        triples = []
        for i, triple in enumerate(content["consolidated_semantic_triples"]):
            if not isinstance(triple, (list, tuple, str)):
                raise ValueError(f"{path}: snapshot {key!r} triple {i} is not a list")
            # as the release reads a snapshot: the first three parts as text, repeats kept; a shorter one is
            # skipped but keeps its place (a triple's id is its position)
            triples.append((str(triple[0]), str(triple[1]), str(triple[2])) if len(triple) >= 3 else None)
        out.append(Snapshot(str(key), time_s, triples))
    return out


def _load_json(path: Path) -> Any:
    if not path.is_file():
        raise ValueError(f"{path}: missing (MAGIC-Video release layout, G-F1..F5)")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc


def mode_dir(import_dir: Path) -> Path:
    """The release's ``{mode}`` folder: ``import_dir`` itself or its only subfolder with ``captions/``."""
    if (import_dir / "captions").is_dir():
        return import_dir
    found = [p for p in sorted(import_dir.glob("*")) if (p / "captions").is_dir()]
    if len(found) != 1:
        raise ValueError(f"{import_dir}: expected one mode folder with captions/ (e.g. merge/), found {len(found)}")
    return found[0]


def release_captions(path: Path) -> list[Episode]:
    level = path.stem.rsplit("_", 1)[-1]
    data = _load_json(path)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of captions")
    out = []
    for i, entry in enumerate(data):
        for name in ("start_sec", "end_sec", "text"):
            if not isinstance(entry, dict) or name not in entry:
                raise ValueError(f"{path}: entry {i} has no field {name!r}")
        try:
            start, end = float(entry["start_sec"]), float(entry["end_sec"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}: entry {i} field 'start_sec'/'end_sec' is not a number") from None
        if end < start:
            raise ValueError(f"{path}: entry {i} field 'end_sec' {end} is before 'start_sec' {start}")
        # a caption without a video_path has no clip node (the release's add_visual_nodes skips it)
        out.append(Episode(level, start, end, str(entry["text"]), clip=bool(entry.get("video_path"))))
    return out


def release_chains(mode: Path) -> tuple[list[ChainRow], list[str], dict[str, int]]:
    """G-F5 chain files (each optional; a missing one is recorded) read as the release's loader reads them: a
    topic chain only when ``has_lifecycle`` holds; event steps by :func:`senri.memory.magic_video.graph.step_span`
    (an unreadable time is 0, a step with no time is skipped); an event chain left with fewer than 2 steps is
    dropped; a step without a description stays (it counts for the chain's step hits, G-R7) but shows nothing.
    A topic fact whose time is unreadable is kept untimed (counted ``topic_facts_without_time``), one with an
    empty text kept empty (both as the release keeps them); an event step keeps its chain's position.
    Returns the rows, the notes and the skip counts for the store's record; a malformed structure raises
    ValueError naming the file and field."""
    rows: list[ChainRow] = []
    notes: list[str] = []
    skipped = {"topic_facts_without_time": 0, "event_steps_without_time": 0, "event_chains_under_2_steps": 0}
    topic = mode / "topic_chains.json"
    if topic.is_file():
        data = _load_json(topic)
        if not isinstance(data, dict):
            raise ValueError(f"{topic}: expected an object keyed by entity")
        for ent, chain in data.items():
            facts = chain.get("facts") if isinstance(chain, dict) else None
            if not isinstance(facts, list):
                raise ValueError(f"{topic}: entity {ent!r} has no field 'facts' (a list)")
            if not chain.get("has_lifecycle"):
                continue
            for j, fact in enumerate(facts):
                if not isinstance(fact, dict) or "fact" not in fact:
                    raise ValueError(f"{topic}: entity {ent!r} fact {j} has no field 'fact'")
                when = read_clock(fact.get("time"))
                if when is None:
                    skipped["topic_facts_without_time"] += 1
                # kept as the release keeps them: untimed (never filtered by time) and empty (the entity still
                # takes a chain slot, showing nothing)
                rows.append(ChainRow("topic", ent, when or 0.0, None, str(fact["fact"] or ""), timed=when is not None))
    else:
        notes.append("topic_chains.json absent: no topic chains")
    event = mode / "event_chain_step3_enriched.json"
    if event.is_file():
        data = _load_json(event)
        if not isinstance(data, list):
            raise ValueError(f"{event}: expected a list of chains")
        for i, chain in enumerate(data):
            if not isinstance(chain, dict) or "name" not in chain or not isinstance(chain.get("steps"), list):
                raise ValueError(f"{event}: chain {i} has no field 'name' or 'steps' (a list)")
            keys = "; ".join(_names(chain.get("key_entities")))
            steps = []
            for j, step in enumerate(chain["steps"]):
                if not isinstance(step, dict):
                    raise ValueError(f"{event}: chain {i} step {j} is not an object")
                span = step_span(step)
                if span is None:
                    skipped["event_steps_without_time"] += 1
                    continue
                steps.append(ChainRow("event", str(chain["name"]), span[0], span[1],
                                      str(step.get("description") or ""), keys, chain=i))
            if len(steps) < 2:
                skipped["event_chains_under_2_steps"] += 1
                continue
            rows += steps
    else:
        notes.append("event_chain_step3_enriched.json absent: no event chains")
    return rows, notes, skipped


def release_mentions(base: Sequence[Episode], ner: Mapping[str, Any]) -> dict[str, list[str]]:
    """G-F2's NER results as :func:`build_graph`'s mentions: each OpenIE chunk key (``chunk-`` + md5 of a 30-s
    caption's text; a text given twice maps to its last caption, as the release's dict keeps the last) → that
    episode's id → every name as the NER lists it (a name twice in a clip is two ``mentioned_in`` edges); keys
    matching no caption, blank names and names that are not text dropped."""
    by_chunk = {chunk_key(e.text): episode_id(e.start_s, e.end_s, "30sec") for e in base if e.text}
    return {by_chunk[k]: [str(x).strip() for x in v if isinstance(x, str) and x.strip()]
            for k, v in ner.items() if k in by_chunk and isinstance(v, list)}


def import_release(import_dir: Path, request: BuildRequest, encoder: TextEncoder | None = None) -> None:
    """G-F1..F5 → a store: captions per level (float seconds), OpenIE, every semantic snapshot, chains; the
    pickled graph when :func:`senri.memory.release.load_release_pickle` reads it, else the graph rebuilt from the
    JSON files."""
    cfg = request.system_config
    person = str(cfg.get("person", "I"))
    mode = mode_dir(Path(import_dir))
    levels: dict[str, list[Episode]] = {}
    for level in cfg.get("import_levels", GRANULARITIES):
        matches = sorted((mode / "captions").glob(f"*_{level}.json"))
        if len(matches) != 1:
            raise ValueError(f"{mode / 'captions'}: expected one *_{level}.json, found {len(matches)}")
        levels[level] = release_captions(matches[0])
    openie_path = mode / "episodic_memory" / "openie_results.json"
    openie = _load_json(openie_path)
    ner = openie.get("ner_results") if isinstance(openie, dict) else None
    if not isinstance(ner, dict):
        raise ValueError(f"{openie_path}: field 'ner_results' missing or not an object")
    entities = release_mentions(levels.get("30sec", ()), ner)
    semantic_path = mode / "semantic_memory" / "semantic_consolidation_results.json"
    snapshots = release_snapshots(semantic_path, _load_json(semantic_path))
    chains, notes, skipped = release_chains(mode)
    pickled = mode / "unified_graph" / "graph.pkl"
    graph, source = None, "rebuilt from the release's JSON files (no unified_graph/graph.pkl)"
    if pickled.is_file():
        try:
            graph = load_release_graph(pickled)
            source = "unified_graph/graph.pkl read by the restricted unpickler"
        except ValueError as exc:
            source = f"rebuilt from the release's JSON files (graph.pkl refused: {exc})"
            log.warning("%s", source)
    if graph is None:
        graph = build_graph(levels, entities, snapshots, person=person,
                            max_gap_s=float(cfg.get("max_gap_s", 21600)),
                            visual_nodes=bool(cfg.get("visual_nodes", True)))
    vectors = node_vectors(graph, encoder or default_encoder(cfg))
    clips, visual, embedder = release_visual(Path(import_dir), mode, graph, request)
    write_store(Path(request.out_dir), graph, sorted(chains, key=lambda r: (r.start_s, r.label)), vectors,
                system_record(cfg, source=f"imported from {import_dir}", graph=source, notes=notes, visual=visual,
                              skipped=skipped, semantic_snapshots=len(snapshots),
                              **({"embedder": embedder} if embedder else {})), clips,
                video_id=request.video.video_id)


def release_visual(import_dir: Path, mode: Path, graph: Graph, request: BuildRequest
                   ) -> tuple[tuple[list[str], np.ndarray] | None, str, dict[str, Any] | None]:
    """G-F3: the release's clip embeddings ``{"{path}:{start}-{end}": vector}`` for the graph's clip nodes, read by
    :func:`senri.memory.release.load_release_pickle` — only with an ``embedder`` configured (queries must be
    embedded in the same space: it must be the release's model, VLM2Vec-V2.0). Returns (clips, the record's ``visual`` line,
    the embedder record)."""
    found = [p / "visual_memory" / "visual_embeddings.pkl" for p in (import_dir, mode, mode.parent)]
    path = next((p for p in found if p.is_file()), None)
    role = request.models.get("embedder")
    if path is None:
        return None, "skipped (the release has no visual_memory/visual_embeddings.pkl)", None
    if not role:
        return None, "skipped (visual_embeddings.pkl not imported: no embedder configured to embed queries)", None
    data = load_release_pickle(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of clip key → vector")
    ids, vectors = [], []
    for key, vector in data.items():
        try:
            start = float(str(key).rsplit(":", 1)[1].split("-")[0])
        except (IndexError, ValueError):
            raise ValueError(f"{path}: key {key!r} is not '{{video_path}}:{{start_sec}}-{{end_sec}}'") from None
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if visual_id(start) in graph.nodes and visual_id(start) not in ids:
            ids.append(visual_id(start))
            vectors.append(vector / (np.linalg.norm(vector) or 1.0))
    if not ids:
        raise ValueError(f"{path}: no key matches a 30-s clip of the captions")
    if len({v.shape for v in vectors}) != 1:
        raise ValueError(f"{path}: the vectors have different lengths")
    name, model = role
    return ((ids, np.stack(vectors)), f"imported ({len(ids)} clip embeddings, queries by {name})",
            {"name": name, **{k: model[k] for k in EMBEDDER_KEYS if k in model}})
