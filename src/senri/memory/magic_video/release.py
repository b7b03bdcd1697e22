"""Importing a memory MAGIC-Video's released preprocessing wrote (G-F1..F5): captions per level, OpenIE, the
newest semantic snapshot, chains, the pickled graph read by :func:`senri.memory.release.load_release_pickle` (the
release's own classes become plain records, nothing of its code runs; a refused pickle is rebuilt from the JSON
files and the store's ``config.yaml`` says so) and the clip embeddings.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from senri.memory.magic_video.build import (EMBEDDER_KEYS, _names, _triples, node_vectors, system_record,
                                            write_store)
from senri.memory.magic_video.graph import (ENTITY, EPISODE, GRANULARITIES, SEMANTIC, VISUAL, ChainRow, Episode,
                                            Graph, GraphNode, TextEncoder, build_graph, chunk_key, default_encoder,
                                            episode_id, parse_clock, visual_id)
from senri.memory.release import load_release_pickle
from senri.memory.store import BuildRequest

log = logging.getLogger(__name__)


#: The release's own classes in ``graph.pkl`` (plain records on reading) and its enums (their string values).
RELEASE_RECORDS = {("worldmm.memory.unified.nodes", "GraphNode"), ("worldmm.memory.unified.nodes", "GraphEdge")}


RELEASE_ENUMS = {("worldmm.memory.unified.nodes", "NodeType"), ("worldmm.memory.unified.nodes", "EdgeType")}


def load_release_graph(path: Path) -> Graph:
    """The release's pickled graph as our :class:`Graph` (newest semantic snapshot only, G-R1). ValueError
    naming the file and field when it is not the documented ``{nodes, edges}`` layout or holds a foreign global."""
    data = load_release_pickle(path, RELEASE_RECORDS, RELEASE_ENUMS)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict) or not isinstance(data.get("edges"), list):
        raise ValueError(f"{path}: field 'nodes' (dict) / 'edges' (list) missing")
    graph = Graph()
    raw = list(data["nodes"].values())
    snapshots = [getattr(n, "start_ts", 0) for n in raw if getattr(n, "node_type", "") == SEMANTIC]
    newest = max(snapshots) if snapshots else None
    for n in raw:
        kind = {"visual_clip": VISUAL}.get(getattr(n, "node_type", ""), getattr(n, "node_type", ""))
        meta = getattr(n, "metadata", {}) or {}
        if kind not in (EPISODE, VISUAL, ENTITY, SEMANTIC) or not isinstance(getattr(n, "id", None), str):
            raise ValueError(f"{path}: node {getattr(n, 'id', '?')!r} field 'node_type' {kind!r} is not a known type")
        if kind == SEMANTIC:
            if getattr(n, "start_ts", 0) != newest:
                continue
            node = GraphNode(n.id, SEMANTIC, str(n.text), None, None, "", str(meta.get("subject", "")),
                             str(meta.get("predicate", "")), str(meta.get("object", "")))
        else:
            node = GraphNode(n.id, kind, str(n.text), float(n.start_ts), float(n.end_ts),
                             str(meta.get("granularity", "30sec" if kind == VISUAL else "")) if kind != ENTITY else "")
        graph.nodes[node.node_id] = node
    for i, e in enumerate(data["edges"]):
        try:
            graph.add_edge(e.src_id, e.dst_id, str(e.edge_type), float(e.weight))
        except AttributeError as exc:
            raise ValueError(f"{path}: edge {i}: {exc}") from exc
    return graph


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
        out.append(Episode(level, start, end, str(entry["text"])))
    return out


def release_chains(mode: Path) -> tuple[list[ChainRow], list[str]]:
    """G-F5 chain files (each optional; a missing one is recorded)."""
    rows, notes = [], []
    topic = mode / "topic_chains.json"
    if topic.is_file():
        data = _load_json(topic)
        if not isinstance(data, dict):
            raise ValueError(f"{topic}: expected an object keyed by entity")
        for ent, chain in data.items():
            facts = chain.get("facts") if isinstance(chain, dict) else None
            if not isinstance(facts, list):
                raise ValueError(f"{topic}: entity {ent!r} has no field 'facts' (a list)")
            for j, fact in enumerate(facts):
                if not isinstance(fact, dict) or "fact" not in fact:
                    raise ValueError(f"{topic}: entity {ent!r} fact {j} has no field 'fact'")
                rows.append(ChainRow("topic", ent, parse_clock(fact.get("time"), f"{topic}: entity {ent!r} fact {j} "
                                                                                "field 'time'"), None, str(fact["fact"])))
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
            for j, step in enumerate(chain["steps"]):
                where = f"{event}: chain {i} step {j} field"
                start = parse_clock(step.get("start_time"), f"{where} 'start_time'")
                end = parse_clock(step.get("end_time", step.get("start_time")), f"{where} 'end_time'")
                if step.get("description"):
                    rows.append(ChainRow("event", str(chain["name"]), start, end, str(step["description"]), keys))
    else:
        notes.append("event_chain_step3_enriched.json absent: no event chains")
    return rows, notes


def import_release(import_dir: Path, request: BuildRequest, encoder: TextEncoder | None = None) -> None:
    """G-F1..F5 → a store: captions per level (float seconds), OpenIE, the newest semantic snapshot, chains; the
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
    by_chunk = {chunk_key(e.text): episode_id(e.start_s, e.end_s, "30sec") for e in levels.get("30sec", ())}
    entities = {by_chunk[k]: _names(v) for k, v in ner.items() if k in by_chunk}
    semantic_path = mode / "semantic_memory" / "semantic_consolidation_results.json"
    snapshots = _load_json(semantic_path)
    if not isinstance(snapshots, dict) or not snapshots:
        raise ValueError(f"{semantic_path}: expected an object of snapshots (key \"0\")")
    newest = max(snapshots, key=lambda k: float(k) if k.lstrip("-").replace(".", "", 1).isdigit() else -1)
    content = snapshots[newest]
    if not isinstance(content, dict) or not isinstance(content.get("consolidated_semantic_triples"), list):
        raise ValueError(f"{semantic_path}: snapshot {newest!r} field 'consolidated_semantic_triples' missing")
    semantic = _triples(content["consolidated_semantic_triples"])
    chains, notes = release_chains(mode)
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
        graph = build_graph(levels, entities, semantic, snapshot=str(newest), person=person,
                            max_gap_s=float(cfg.get("max_gap_s", 21600)),
                            visual_nodes=bool(cfg.get("visual_nodes", True)))
    vectors = node_vectors(graph, encoder or default_encoder())
    clips, visual, embedder = release_visual(Path(import_dir), mode, graph, request)
    write_store(Path(request.out_dir), graph, sorted(chains, key=lambda r: (r.start_s, r.label)), vectors,
                system_record(cfg, source=f"imported from {import_dir}", graph=source, notes=notes, visual=visual,
                              **({"embedder": embedder} if embedder else {})), clips)


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
