"""Building, importing and exporting MAGIC-Video stores (G-C2..C7, G-F1..F5).

The build follows the released preprocessing in merge mode, on senri's inputs: 30-s base captions through the
shared caption service (the configured captioner; the ASR rewrite G2 and speech merge G3 are off — senri has no
ASR track), G4 summaries of consecutive groups (6 → 3 min, 3 → 10 min, 6 → 1 h), OpenIE (G5) and semantic
extraction (G6) per 30-s caption, G7 per subject, one snapshot key "0", then the narrative chains (G8–G12),
all by the ``builder`` model role through the build job's response cache, so a killed build repeats no
finished call. The graph (G-C6) is :func:`senri.memory.magic_video.graph.build_graph`.

An import reads the released layout instead; its pickled graph is read only by
:func:`senri.memory.release.load_release_pickle`, which maps the release's own classes to plain records and refuses every other global, so no foreign code runs;
when it refuses, the graph is rebuilt from the JSON files and the store's ``config.yaml`` says so.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.magic_video.graph import (CHAINS_FILE, CONFIG_FILE, EDGES_FILE, ENTITY, EPISODE, ITEMS_FILE,
                                            NODES_FILE, SEMANTIC, VECTORS_FILE, VISUAL, VISUAL_FILE, ChainRow,
                                            Episode, Graph, GraphEdge, GraphNode, TextEncoder, build_graph,
                                            default_encoder, episode_id, hms, normalise_entity, read_clock,
                                            step_span)
from senri.memory.magic_video.search import node_item
from senri.memory.store import BuildRequest, MemoryItem

log = logging.getLogger(__name__)


#: G-C3: each coarser granularity summarises this many consecutive items of the one below.
SUMMARY_GROUPS: tuple[tuple[str, str, int], ...] = (("3min", "30sec", 6), ("10min", "3min", 3), ("1h", "10min", 6))


BASE_S = 30.0


def write_store(out_dir: Path, graph: Graph, chains: Sequence[ChainRow], vectors: np.ndarray,
                record: Mapping[str, Any], visual: tuple[Sequence[str], np.ndarray] | None = None) -> None:
    """The store folder: nodes, edges, chain facts, node text vectors, the items view, the clip embeddings
    (``visual.npz``, only with an embedder) and ``config.yaml``."""
    from senri.records import to_frame, write_table

    out_dir.mkdir(parents=True, exist_ok=True)
    nodes = list(graph.nodes.values())
    write_table(to_frame(nodes, GraphNode), out_dir / NODES_FILE, GraphNode)
    write_table(to_frame(graph.edges, GraphEdge), out_dir / EDGES_FILE, GraphEdge)
    write_table(to_frame(chains, ChainRow), out_dir / CHAINS_FILE, ChainRow)
    items = [node_item(n) for n in nodes if n.node_type != ENTITY]
    write_table(to_frame(items, MemoryItem), out_dir / ITEMS_FILE, MemoryItem)
    with open(out_dir / VECTORS_FILE, "wb") as handle:
        np.savez(handle, node_ids=np.array(list(graph.nodes), dtype=str), vectors=vectors.astype(np.float32))
    if visual is not None:
        with open(out_dir / VISUAL_FILE, "wb") as handle:
            np.savez(handle, node_ids=np.array(list(visual[0]), dtype=str), vectors=visual[1].astype(np.float32))
    counts: dict[str, int] = defaultdict(int)
    for node in nodes:
        counts[f"{node.node_type}/{node.level}" if node.level else node.node_type] += 1
    edge_counts: dict[str, int] = defaultdict(int)
    for edge in graph.edges:
        edge_counts[edge.edge_type] += 1
    summary = {**record, "nodes": dict(counts), "edges": dict(edge_counts), "chain_facts": len(chains)}
    # The memory_system job writes the stage slice there first; the store's record is added beside it.
    path = out_dir / CONFIG_FILE
    existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    path.write_text(yaml.safe_dump({**existing, **summary}, sort_keys=False, allow_unicode=True))


def node_vectors(graph: Graph, encode: TextEncoder) -> np.ndarray:
    """Text vectors of episode and semantic nodes; entity and clip rows zero (G-R2: they seed no text score —
    a clip repeats its episode's caption, an entity name is too short to compare with a query)."""
    nodes = list(graph.nodes.values())
    rows = [i for i, n in enumerate(nodes) if n.node_type in (EPISODE, SEMANTIC)]
    encoded = np.asarray(encode([nodes[i].text for i in rows]), dtype=np.float32) if rows else np.zeros((0, 1))
    out = np.zeros((len(nodes), encoded.shape[1] if encoded.ndim == 2 and encoded.shape[0] else 1), dtype=np.float32)
    if rows:
        out[rows] = encoded
    return out


def system_record(cfg: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The store's record: the system settings it was made with (the model configs are the stage slice's, not
    repeated) and what the build or import did."""
    return {"system": {k: v for k, v in cfg.items() if k != "model_configs"}, **extra}


class BuilderLLM:
    """The ``builder`` role (G4–G12): renders a prompt, sends a batch through the backend, parses the JSON.

    Besides the calls it counts ``left_out``: builder outputs missing from the store because a call failed, its
    reply was unreadable or empty, or its request was over the model's limits — one per such call, and one per
    unreadable fact or chain step inside a readable reply (:meth:`leave_out`). A failed G7 merge is not one (the
    subject's triples are kept as they were). Every question over the store books it as ``builder_losses``."""

    def __init__(self, backend: Any, prompts: Any, max_tokens: int, purpose: str = "magic_video") -> None:
        self.backend, self.prompts, self.max_tokens, self.purpose = backend, prompts, max_tokens, purpose
        self.calls = self.failed = self.unparsed = self.over_limits = self.left_out = 0

    def ask_many(self, role: str, key: str, fields: Sequence[Mapping[str, Any]], kept_on_failure: bool = False
                 ) -> list[dict | None]:
        """One request per field set; each reply's first JSON object that has ``key`` (None: failed/unparsed).
        A request past the model config's limits is not sent (sized first, :func:`overflow`): it counts as
        ``over_limits`` and its item is left out like a failed call (smaller ``*_batch``/``*_chunk`` settings
        make such requests fit). Each None is counted ``left_out`` unless ``kept_on_failure`` (the caller keeps
        what it had, as G7 does)."""
        from senri.answers import json_objects, split_reasoning
        from senri.backends.base import ChatRequest, ChatResponse, Message
        from senri.backends.budget import overflow

        requests = [ChatRequest((Message.text("user", self.prompts.render(role, **f)),), max_tokens=self.max_tokens,
                                temperature=0.0, purpose=f"{self.purpose}:{role}") for f in fields]
        too_big = [overflow(self.backend, r) for r in requests]
        for reason in filter(None, too_big):
            log.warning("magic_video %s request not sent: %s", role, reason)
        sent = [r for r, why in zip(requests, too_big) if why is None]
        answers = iter(self.backend.complete_many(sent) if sent else [])
        responses = [next(answers) if why is None else ChatResponse(text="", error=f"over limits: {why}")
                     for why in too_big]
        out: list[dict | None] = []
        for response, why in zip(responses, too_big):
            if why is not None:
                self.over_limits += 1
                out.append(None)
                continue
            self.calls += 1
            if response.error:
                self.failed += 1
                out.append(None)
                continue
            found = next((o for o in json_objects(split_reasoning(response.text)[0]) if key in o), None)
            self.unparsed += found is None
            out.append(found)
        if not kept_on_failure:
            self.left_out += sum(reply is None for reply in out)
        return out

    def leave_out(self, unparsed: bool = False) -> None:
        """One item of a readable reply left out: empty, or (``unparsed``) a field of it unreadable."""
        self.left_out += 1
        self.unparsed += unparsed

    def record(self) -> dict[str, int]:
        return {"calls": self.calls, "failed": self.failed, "unparsed": self.unparsed,
                "over_limits": self.over_limits, "left_out": self.left_out}


def open_builder(request: BuildRequest) -> BuilderLLM:
    from senri.backends import open_backend
    from senri.prompts import prompt_set

    role = request.models.get("builder")
    if not role:
        raise ValueError("memory_system.magic_video.models.builder: no model config for the builder role "
                         "(summaries, OpenIE, semantic triples and chains need one)")
    _, model = role
    backend = open_backend(model, request.response_cache)
    if backend is None:
        raise ValueError("memory_system.magic_video.models.builder: the model config has no backend")
    cfg = request.system_config
    prompts = prompt_set(cfg.get("prompts") or "magic_video", cfg.get("prompts_dir"))
    return BuilderLLM(backend, prompts, int(cfg.get("builder_max_tokens", 1024)))


def bin_rows(rows: Sequence[Mapping[str, Any]], duration_s: float, window_s: float = BASE_S) -> list[Episode]:
    """Caption rows re-binned into consecutive ``window_s`` windows by their midpoint, texts joined in time order
    (how G-C1 bins speech segments; used when the caption stage's table, not the caption service, is the base)."""
    bins: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("text"):
            bins[int(((row["start_s"] + row["end_s"]) / 2) // window_s)].append(row)
    out = []
    for b in sorted(bins):
        members = sorted(bins[b], key=lambda r: r["start_s"])
        out.append(Episode("30sec", b * window_s, min((b + 1) * window_s, max(duration_s, b * window_s + 1e-6)),
                           " ".join(str(r["text"]).strip() for r in members)))
    return out


def base_captions(request: BuildRequest) -> tuple[list[Episode], dict[str, Any]]:
    """The 30-s base captions (G-C2) and how they were made (for the store's record)."""
    from senri.captioners.base import Clip
    from senri.memory.hierarchy import open_service, split
    from senri.prompts import prompt_set

    cfg = request.system_config
    if cfg.get("asr_merge"):
        raise ValueError("memory_system.magic_video.asr_merge: senri has no ASR transcripts to rewrite (G2) and "
                         "merge (G3); set it false")
    duration = float(request.video.duration_s)
    if request.media is not None and request.caption_cache is not None:
        instruction = prompt_set(cfg.get("prompts") or "magic_video", cfg.get("prompts_dir")).render("clip_caption")
        fps = float(cfg.get("base_fps", 1.0))
        clips = [Clip(s, e, fps, instruction, "30sec") for s, e in split(0.0, duration, BASE_S)]
        service = open_service(request.memory_config, request.media, request.caption_cache)
        try:
            rows = service.captions(clips)
        finally:
            service.close()
        # Every clip keeps its span, a failed one with empty text (the release's): the coarser groups of 6 / 3 / 6
        # stay aligned to the clock, and the clip's node is still there to be found by its frames.
        episodes = [Episode("30sec", r.start_s, r.end_s, r.text or "") for r in rows]
        return episodes, {"base_captions": f"caption service ({service.name}), 30 s clips at {fps:g} fps",
                          "failed_captions": sum(not e.text for e in episodes),
                          "asr": "none (G2 rewrite, G3 merge off)"}
    if request.captions is None:
        raise ValueError("magic_video build: the request has neither media + caption_cache nor a captions table")
    from senri.records import MemoryRow, read_table

    rows = read_table(request.captions, MemoryRow).filter(pl.col("video_id") == request.video.video_id)
    level = cfg.get("table_level")
    if level:
        rows = rows.filter(pl.col("level") == level)
    episodes = bin_rows(rows.to_dicts(), duration)
    return episodes, {"base_captions": f"caption table {request.captions} binned to 30 s by midpoint",
                      "asr": "none (G2 rewrite, G3 merge off)"}


def caption_lines(episodes: Sequence[Episode]) -> str:
    return "\n".join(f"[{hms(e.start_s)} - {hms(e.end_s)}] {e.text}" for e in episodes)


def summarise(llm: BuilderLLM, base: Sequence[Episode]) -> dict[str, list[Episode]]:
    """G-C3: every coarser level from the one below, ``n`` consecutive items per summary (the last group may be
    shorter), spanning the group's first start to its last end. Every group keeps its span, so the coarser
    groups stay aligned to the clock (the release's): a failed or unreadable call keeps the group's texts
    joined (the release's fallback), an empty reply an empty text — both counted ``left_out`` (a summary is
    missing) — and a group with no text is not asked (empty text)."""
    levels = {"30sec": list(base)}
    for level, source, n in SUMMARY_GROUPS:
        groups = [levels[source][i:i + n] for i in range(0, len(levels[source]), n)]
        texted = [[e for e in g if e.text.strip()] for g in groups]
        replies = iter(llm.ask_many("summary", "summary", [{"captions": caption_lines(t), "level": level}
                                                           for t in texted if t]))
        levels[level] = []
        for group, with_text in zip(groups, texted):
            text = ""
            if with_text:
                reply = next(replies)
                if reply is None:  # failed or unreadable: counted by ask_many; the release joins the texts
                    text = " ".join(e.text.strip() for e in with_text)
                else:
                    text = str(reply["summary"] or "").strip()
                    if not text:
                        llm.leave_out()
            levels[level].append(Episode(level, group[0].start_s, group[-1].end_s, text))
    return levels


def _triples(value: Any) -> list[tuple[str, str, str]]:
    """Valid, distinct (s, p, o) of a reply: three non-empty strings (bad and duplicate triples dropped)."""
    out, seen = [], set()
    for triple in value if isinstance(value, list) else []:
        if isinstance(triple, (list, tuple)) and len(triple) == 3 and all(isinstance(x, str) and x.strip()
                                                                           for x in triple):
            t = tuple(x.strip() for x in triple)
            if t not in seen:
                seen.add(t)
                out.append(t)
    return out


def _names(value: Any) -> list[str]:
    return list(dict.fromkeys(str(x).strip() for x in value if isinstance(x, str) and x.strip())) \
        if isinstance(value, list) else []


def numbered_triples(triples: Sequence[tuple[str, str, str]]) -> str:
    """A chunk's OpenIE triples as G6 reads them: one per line, numbered from 0 (its evidence cites them)."""
    return "\n".join(f"{i}. ({s}, {p}, {o})" for i, (s, p, o) in enumerate(triples))


def extract(llm: BuilderLLM, base: Sequence[Episode], person: str
            ) -> tuple[dict[str, list[str]], list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """G-C4: OpenIE (G5) per 30-s caption with text; semantic extraction (G6) per caption fed that caption's
    OpenIE triples, as the release feeds it (a caption without triples has nothing to extract from and is not
    asked); then G7 per normalised subject. Returns (entities per 30-s episode id, the G6 extraction triples —
    the topic-chain candidates' source —, the snapshot's semantic triples)."""
    texted = [e for e in base if e.text.strip()]
    fields = [{"caption": e.text, "time": f"{hms(e.start_s)} - {hms(e.end_s)}"} for e in texted]
    openie = llm.ask_many("openie", "triples", fields)
    entities: dict[str, list[str]] = {}
    chunks: list[list[tuple[str, str, str]]] = []
    for ep, reply in zip(texted, openie):
        if reply is None:
            continue
        entities[episode_id(ep.start_s, ep.end_s, "30sec")] = _names(reply.get("named_entities"))
        chunk = _triples(reply.get("triples"))
        if chunk:
            chunks.append(chunk)
    semantic_replies = llm.ask_many("semantic", "semantic_triples", [{"triples": numbered_triples(c)}
                                                                     for c in chunks])
    extracted = [t for reply in semantic_replies for t in _triples((reply or {}).get("semantic_triples"))]
    by_subject: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for t in extracted:
        if t not in by_subject[normalise_entity(t[0], person)]:
            by_subject[normalise_entity(t[0], person)].append(t)
    many = [s for s, ts in by_subject.items() if len(ts) > 1]
    merged = llm.ask_many("dedupe", "triples", [{"subject": by_subject[s][0][0], "triples": json.dumps(
        [list(t) for t in by_subject[s]], ensure_ascii=False)} for s in many], kept_on_failure=True)
    for subject, reply in zip(many, merged):
        kept = _triples((reply or {}).get("triples"))
        if kept:  # a failed or empty G7 reply keeps the subject's triples as they were
            by_subject[subject] = kept
    return entities, extracted, [t for ts in by_subject.values() for t in ts]


#: The release's stop list for topic-chain candidates (its MM-Lifelong ``extract_topic_chains``, restated):
#: pronouns, the streamer and his audience, stream words, yes/no words and time words. ``topic_skip_words``.
TOPIC_SKIP_WORDS: tuple[str, ...] = (
    "ishowspeed", "speed", "streamer", "man", "person", "people", "fan", "fans", "he", "she", "they", "i", "we",
    "someone", "everyone", "narrator", "video", "stream", "chat", "livestream", "broadcast", "viewer", "viewers",
    "audience", "subscriber", "subscribers", "true", "false", "yes", "no", "something", "anything", "nothing",
    "time", "moment", "scene", "clip", "frame")


@functools.lru_cache(maxsize=4096)
def mention_pattern(entity: str) -> re.Pattern:
    """A topic candidate's mentions in a caption, as the release counts them: the name as a whole word, any
    case, with an optional plural "s"."""
    return re.compile(r"\b" + re.escape(entity) + r"s?\b", re.IGNORECASE)


def topic_candidates(extracted: Sequence[tuple[str, str, str]], skip_words: Collection[str]) -> list[str]:
    """Topic-chain candidate names (G-C7): every subject and object of the G6 extraction triples, lower-cased
    and stripped, at least 2 characters and not a skip word (the release's rule), in first-seen order."""
    skip = {w.lower() for w in skip_words}
    names: dict[str, None] = {}
    for s, _, o in extracted:
        for name in (s.lower().strip(), o.lower().strip()):
            if len(name) >= 2 and name not in skip:
                names.setdefault(name)
    return list(names)


def topic_chains(llm: BuilderLLM, base: Sequence[Episode], extracted: Sequence[tuple[str, str, str]],
                 cfg: Mapping[str, Any]) -> list[ChainRow]:
    """G-C7 topic chains: candidates from the G6 extraction triples (:func:`topic_candidates`) mentioned in ≥
    ``topic_min_captions`` 30-s captions → G8 noise filter over them sorted, ``filter_batch`` names per call (a
    failed or unreadable call keeps its whole batch, as the release does: nothing is lost) → G9 dated facts
    from the captions that mention the name (``facts_chunk`` per call); a chain's label is the lower-cased
    name. A fact whose time is unreadable is left out (counted)."""
    names = topic_candidates(extracted, cfg.get("topic_skip_words", TOPIC_SKIP_WORDS))
    hits = {name: [e for e in base if mention_pattern(name).search(e.text)] for name in names}
    candidates = sorted(n for n, h in hits.items() if len(h) >= int(cfg.get("topic_min_captions", 2)))
    batch = int(cfg.get("filter_batch", 100))
    batches = [candidates[i:i + batch] for i in range(0, len(candidates), batch)]
    kept: set[str] = set()
    for names_in, reply in zip(batches, llm.ask_many("entity_filter", "keep", [{"names": "\n".join(b)}
                                                                                for b in batches],
                                                      kept_on_failure=True)):
        if reply is None or not isinstance(reply.get("keep"), list):  # failed or unreadable: keep all of it
            kept.update(names_in)
        else:
            kept.update(n.lower() for n in _names(reply["keep"]) if n.lower() in hits and n.lower() in names_in)
    chunk = int(cfg.get("facts_chunk", 50))
    jobs = [(name, hits[name][i:i + chunk]) for name in candidates if name in kept
            for i in range(0, len(hits[name]), chunk)]
    rows = []
    for (name, caps), reply in zip(jobs, llm.ask_many("entity_facts", "facts", [
            {"entity": name, "captions": caption_lines(caps)} for name, caps in jobs])):
        for fact in (reply or {}).get("facts") or []:
            if isinstance(fact, dict) and str(fact.get("fact", "")).strip():
                when = read_clock(fact.get("time"))
                if when is None:
                    llm.leave_out(unparsed=True)
                    continue
                rows.append(ChainRow("topic", name, when, None, str(fact["fact"]).strip()))
    return rows


def event_chains(llm: BuilderLLM, levels: Mapping[str, Sequence[Episode]], cfg: Mapping[str, Any]
                 ) -> tuple[list[ChainRow], int]:
    """G-C7 event chains: G10 event logs of the 10-min captions (``log_batch`` per call) → G11 recurring/venue
    chains, each step with its time range and a description (≤ ``chain_batch`` logs per call) → G12 each step's
    description from the 30-s captions whose *start* lies in the step, asked only for a step with such captions;
    a failed G12 keeps G11's description (the release's). Step times are read as the release's chain loader
    reads them (:func:`senri.memory.magic_video.graph.step_span`); a step without a time is left out, and a
    chain left with fewer than 2 steps is dropped (the loader's rule). Returns the rows (a step without any
    description stays, empty, for the chain's step hits, and counts ``left_out``) and the chains dropped."""
    tens = [e for e in levels.get("10min", ()) if e.text.strip()]
    batch = int(cfg.get("log_batch", 5))
    logs: list[dict] = []
    for reply in llm.ask_many("event_log", "events", [{"captions": caption_lines(tens[i:i + batch])}
                                                      for i in range(0, len(tens), batch)]):
        logs += [e for e in (reply or {}).get("events") or [] if isinstance(e, dict) and e.get("name")]
    per_call = int(cfg.get("chain_batch", 50))
    chains: list[dict] = []
    for reply in llm.ask_many("event_chains", "chains", [
            {"events": json.dumps(logs[i:i + per_call], ensure_ascii=False)} for i in range(0, len(logs), per_call)]):
        chains += [c for c in (reply or {}).get("chains") or [] if isinstance(c, dict) and c.get("name")]
    steps, dropped = [], 0
    for chain in chains:
        keys = "; ".join(_names(chain.get("key_entities")))
        spans = []
        for step in chain.get("steps") or []:
            span = step_span(step) if isinstance(step, Mapping) else None
            if span is None:
                llm.leave_out(unparsed=True)
                continue
            spans.append((span, str(step.get("description") or "").strip()))
        if len(spans) < 2:
            dropped += 1
            continue
        for (start, end), text in spans:
            inside = [e for e in levels["30sec"] if start <= e.start_s <= end]
            steps.append((str(chain["name"]).strip(), keys, start, end, text, inside))
    asked = [i for i, step in enumerate(steps) if step[5]]
    replies = dict(zip(asked, llm.ask_many("step_detail", "description", [
        {"chain": steps[i][0], "time": f"{hms(steps[i][2])} - {hms(steps[i][3])}",
         "captions": caption_lines(steps[i][5])} for i in asked], kept_on_failure=True)))
    rows = []
    for i, (name, keys, start, end, text, _) in enumerate(steps):
        detail = str((replies.get(i) or {}).get("description") or "").strip()
        text = detail or text
        if not text:
            llm.leave_out()
        rows.append(ChainRow("event", name, start, end, text, keys))
    return rows, dropped


def build_store(request: BuildRequest, encoder: TextEncoder | None = None) -> None:
    """The pipeline's own construction of one video's MAGIC-Video store (G-C2..C7) into ``request.out_dir``."""
    cfg = request.system_config
    person = str(cfg.get("person", "I"))
    visual = visual_setting(request)
    base, record = base_captions(request)
    if not any(e.text.strip() for e in base):
        raise ValueError(f"magic_video build of {request.video.video_id}: no 30-s caption has text")
    llm = open_builder(request)
    levels = summarise(llm, base)
    entities, extracted, semantic = extract(llm, base, person)
    chains, dropped = [], 0
    if cfg.get("chains_enabled", True):
        topics = topic_chains(llm, base, extracted, cfg)
        events, dropped = event_chains(llm, levels, cfg)
        chains = topics + events
    graph = build_graph(levels, entities, semantic, person=person, max_gap_s=float(cfg.get("max_gap_s", 21600)),
                        visual_nodes=bool(cfg.get("visual_nodes", True)))
    vectors = node_vectors(graph, encoder or default_encoder())
    clips, embedder = clip_embeddings(request, graph)
    write_store(Path(request.out_dir), graph, sorted(chains, key=lambda r: (r.start_s, r.label)), vectors,
                system_record(cfg, **record, visual=visual, builder=llm.record(), source="built",
                              event_chains_dropped=dropped,
                              text_encoder=cfg.get("text_encoder", "all-MiniLM-L6-v2 (for Qwen3-Embedding-4B)"),
                              models={r: m[0] for r, m in request.models.items()},
                              **({"embedder": embedder} if embedder else {})), clips)


def visual_setting(request: BuildRequest) -> str:
    """How the clip embeddings (G-C5) stand, for the store's record: embedded by the ``embedder`` model, or
    skipped (no embedder configured: visual seeds dropped, text seeds alpha = 1, G-R2). An embedder needs the
    video's frames, so a build without media refuses it rather than silently skipping."""
    role = request.models.get("embedder")
    if not role:
        return "skipped (no embedder configured)"
    if request.media is None:
        raise ValueError("memory_system.magic_video.models.embedder: clip embeddings need the video (the build "
                         "request has no media)")
    return f"embedded ({role[0]})"


#: The embedder model config's keys the store keeps (to embed queries at answer time); nothing else of it.
EMBEDDER_KEYS = ("kind", "path", "device", "dtype", "revision", "max_text_tokens")


def clip_embeddings(request: BuildRequest, graph: Graph
                    ) -> tuple[tuple[list[str], np.ndarray] | None, dict[str, Any] | None]:
    """G-C5: each clip node's vector from ``visual_frames`` frames of its span (None without an embedder), and
    the embedder settings the store records."""
    role = request.models.get("embedder")
    if not role:
        return None, None
    from senri.memory.clip_embedding import embed_clips

    name, model = role
    cfg = request.system_config
    nodes = [n for n in graph.nodes.values() if n.node_type == VISUAL]
    vectors = embed_clips(model, request.media.video, [(n.start_s, n.end_s) for n in nodes],
                          int(cfg.get("visual_frames", 16)), cfg.get("visual_short_side", 360))
    return ([n.node_id for n in nodes], vectors), {"name": name, **{k: model[k] for k in EMBEDDER_KEYS if k in model}}


def export_inputs(captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]) -> list[Path]:
    """senri's captions as the release's 30-s caption input (G-F1): ``captions/{video}_30sec.json``."""
    from senri.records import MemoryRow, read_table

    rows = read_table(captions, MemoryRow).filter(pl.col("video_id") == video.video_id).to_dicts()
    episodes = bin_rows(rows, float(video.duration_s))
    path = out_dir / "captions" / f"{video.video_id}_30sec.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"start_sec": e.start_s, "end_sec": e.end_s, "text": e.text,
                                 "video_path": str(getattr(video, "path", ""))} for e in episodes], indent=1))
    return [path]
