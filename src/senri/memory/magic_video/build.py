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

from senri.backends.budget import within_cap
from senri.memory.cost import RoleCost, write_cost
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
                record: Mapping[str, Any], visual: tuple[Sequence[str], np.ndarray] | None = None,
                costs: Mapping[str, tuple[str, RoleCost]] | None = None, video_id: str = "") -> None:
    """The store folder: nodes, edges, chain facts, node text vectors, the items view, the clip embeddings
    (``visual.npz``, only with an embedder), ``config.yaml`` and the builder's cost table per G-role
    (``cost.parquet``, :mod:`senri.memory.cost`; empty for an import; ``video_id`` defaults to the folder's name)."""
    from senri.records import to_frame, write_table

    out_dir.mkdir(parents=True, exist_ok=True)
    write_cost(out_dir, "magic_video", video_id or out_dir.name, costs or {})
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


#: How each builder role's reply is read, and how many times it is asked, as the released preprocessing does it
#: (``builder_reader: release``, ``builder_attempts: release``): (reader, attempts).
#:   ``text``  — G4 (preprocess/common.py ``aggregate_captions``): the reply itself is the summary (our prompt asks
#:               for ``{"summary"}``: read from the JSON where the reply is JSON, else the reply's text), one call;
#:   ``whole`` — G5/G6 (the OpenIE and semantic-extraction classes): the whole reply (a leading code fence cut) is
#:               the JSON object, checked field by field as their pydantic models check it; G5 gets 5 attempts
#:               (its tenacity decorator: any failure, an unreadable or invalid reply included), G6 one;
#:   ``array`` — G7 (``batch_consolidate_group``): the text from the first "[" to the last "]", one call;
#:   ``scan``  — G8/G9 (extract_topic_chains ``call_llm``): code fences and think blocks cut, the whole reply,
#:               else the first balanced {…}, then the first balanced […]; 3 attempts on an empty reply, a failed
#:               call or no JSON (a JSON reply of the wrong shape is not asked again);
#:   ``scan_array`` — G10/G11/G12 (extract_event_chains ``call_llm``): the same, scanning only for […].
RELEASE_READING: dict[str, tuple[str, int]] = {
    "summary": ("text", 1), "openie": ("whole", 5), "semantic": ("whole", 1), "dedupe": ("array", 1),
    "entity_filter": ("scan", 3), "entity_facts": ("scan", 3),
    "event_log": ("scan_array", 3), "event_chains": ("scan_array", 3), "step_detail": ("scan_array", 3)}
#: ``builder_reader``: ``release`` (per role, :data:`RELEASE_READING`) or ``lenient`` (``scan`` for every role).
BUILDER_READERS = ("release", "lenient")
#: The keys whose value is a list: a bare JSON array is read as that key's value (the release's prompts ask
#: for bare arrays where ours ask for an object holding one).
LIST_KEYS = frozenset({"triples", "semantic_triples", "keep", "facts", "events", "chains"})
_FENCES = re.compile(r"```json\s*|```\s*")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_NOTHING = object()


def balanced(text: str, opener: str) -> Any:
    """The JSON value of the first balanced ``opener``…closer span of ``text`` (brackets counted as the release
    counts them: one kind, strings not skipped), or :data:`_NOTHING` when there is none or it does not parse."""
    closer = "}" if opener == "{" else "]"
    start = text.find(opener)
    if start < 0:
        return _NOTHING
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opener:
            depth += 1
        elif text[i] == closer:
            depth -= 1
            if depth == 0:
                try:
                    return json.loads(text[start:i + 1])
                except ValueError:
                    return _NOTHING
    return _NOTHING


def read_reply(text: str | None, reader: str) -> Any:
    """A builder reply's JSON value as the release's reader ``reader`` finds it (:data:`RELEASE_READING`), or
    :data:`_NOTHING`. A reasoning model's thinking is cut first (:func:`senri.answers.split_reasoning`: the
    release's server returns the reply without it)."""
    from senri.answers import split_reasoning

    raw = split_reasoning(text or "")[0]
    if not raw.strip():
        return _NOTHING
    if reader == "whole":
        body = raw.strip()
        if body.startswith("```"):
            lines = body.splitlines()
            if len(lines) >= 3:
                body = "\n".join(lines[1:-1]).strip()
        try:
            return json.loads(body)
        except ValueError:
            return _NOTHING
    if reader == "array":
        match = re.search(r"\[.*\]", raw, re.DOTALL)
        try:
            return json.loads(match.group()) if match else _NOTHING
        except ValueError:
            return _NOTHING
    clean = _THINK.sub("", _FENCES.sub("", raw)).strip()
    try:
        return json.loads(clean)
    except ValueError:
        pass
    for opener in ("[",) if reader == "scan_array" else ("{", "["):
        value = balanced(raw, opener)
        if value is not _NOTHING:
            return value
    return _NOTHING


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def release_valid(role: str, value: dict) -> bool:
    """G5's and G6's replies as their pydantic models accept them (the whole reply fails otherwise): G5
    ``named_entities`` strings and ``triples`` lists of strings; G6 ``semantic_triples`` of exactly three strings
    each and ``episodic_evidence`` lists of integers."""
    if role == "openie":
        return _strings(value.get("named_entities")) and isinstance(value.get("triples"), list) \
            and all(_strings(t) for t in value["triples"])
    if role == "semantic":
        triples, evidence = value.get("semantic_triples"), value.get("episodic_evidence")
        return isinstance(triples, list) and all(_strings(t) and len(t) == 3 for t in triples) \
            and isinstance(evidence, list) and all(isinstance(e, list) and all(
                isinstance(i, int) and not isinstance(i, bool) for i in e) for e in evidence)
    return True


def shaped(value: Any, key: str, role: str, reader: str) -> dict | None:
    """The reply value as the caller reads it: an object holding ``key``, or a bare array for a list-valued key;
    G7's array is its triples (those of ≥ 3 items, the release's); G4's text reply is its summary."""
    if reader == "array":
        if not isinstance(value, list):
            return None
        kept = [t for t in value if isinstance(t, list) and len(t) >= 3]
        return {key: kept} if kept else None
    if isinstance(value, dict) and key in value:
        return value if reader != "whole" or release_valid(role, value) else None
    if isinstance(value, list) and key in LIST_KEYS and reader != "whole":
        return {key: value}
    return None


class BuilderLLM:
    """The ``builder`` role (G4–G12): renders a prompt, sends a batch through the backend, reads the JSON.

    Each role's reply is read and retried as the released preprocessing reads and retries it
    (:data:`RELEASE_READING`; ``reader: lenient`` scans every reply for nested JSON; ``attempts``: an integer asks
    every role that many times, on a failed call or any unreadable reply). A retry is sent past the response
    cache (a cached reply would only come back again); a readable retry replaces the cached reply, so a resumed
    build reads it at once. ``retries`` counts the calls sent again.

    Besides the calls it counts ``left_out``: builder outputs missing from the store because a call failed, its
    reply was unreadable or empty (after its attempts), or its request was over the model's limits — one per such
    call, and one per unreadable fact or chain step inside a readable reply (:meth:`leave_out`). A failed G7
    merge is not one (the subject's triples are kept as they were). Every question over the store books it as
    ``builder_losses``."""

    def __init__(self, backend: Any, prompts: Any, max_tokens: int, purpose: str = "magic_video",
                 reader: str = "release", attempts: int | str = "release") -> None:
        if reader not in BUILDER_READERS:
            raise ValueError(f"memory_system.magic_video.builder_reader: {reader!r} is not one of "
                             f"{list(BUILDER_READERS)}")
        if attempts != "release" and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1):
            raise ValueError(f"memory_system.magic_video.builder_attempts: {attempts!r} is neither 'release' nor a "
                             f"positive integer")
        self.backend, self.prompts, self.max_tokens, self.purpose = backend, prompts, max_tokens, purpose
        self.reader, self.attempts = reader, attempts
        self.calls = self.failed = self.unparsed = self.over_limits = self.left_out = self.retries = 0
        #: Per G-role (summary, openie, …): its calls, cut replies, tokens and model seconds, retries included.
        self.costs: dict[str, RoleCost] = {}

    def reading(self, role: str) -> tuple[str, int, bool]:
        """(reader, attempts, whether a reply of the wrong shape is asked again) of ``role``."""
        reader, attempts = RELEASE_READING.get(role, ("scan", 3))
        if self.reader == "lenient":
            reader = "scan"
        if self.attempts != "release":
            return reader, int(self.attempts), True
        return reader, attempts, reader == "whole"  # tenacity retries a failed validation; call_llm does not

    def _send(self, requests: list[Any], fresh: bool) -> list[Any]:
        """``requests`` through the backend; ``fresh``: past the response cache (a retry)."""
        from senri.backends.cache import CachedBackend

        if fresh and isinstance(self.backend, CachedBackend):
            return self.backend.inner.complete_many(requests)
        return self.backend.complete_many(requests)

    def _remember(self, request: Any, response: Any) -> None:
        """A readable retry's reply in the response cache, in place of the reply that was asked again."""
        from senri.backends.cache import CachedBackend, request_key

        if isinstance(self.backend, CachedBackend):
            self.backend.cache.put(request_key(self.backend.identity, request), response, request.purpose)

    def ask_many(self, role: str, key: str, fields: Sequence[Mapping[str, Any]], kept_on_failure: bool = False
                 ) -> list[dict | None]:
        """One request per field set; each reply's JSON holding ``key`` as the role's reader reads it
        (:meth:`reading`, None: failed or unreadable after the role's attempts). A request past the model
        config's limits is not sent (sized first, :func:`overflow`): it counts as ``over_limits`` and its item is
        left out like a failed call (smaller ``*_batch``/``*_chunk`` settings make such requests fit). Each None
        is counted ``left_out`` unless ``kept_on_failure`` (the caller keeps what it had, as G7 does)."""
        from senri.backends.base import ChatRequest, Message
        from senri.backends.budget import overflow

        reader, attempts, retry_shape = self.reading(role)
        requests = [ChatRequest((Message.text("user", self.prompts.render(role, **f)),), max_tokens=self.max_tokens,
                                temperature=0.0, purpose=f"{self.purpose}:{role}") for f in fields]
        too_big = [overflow(self.backend, r) for r in requests]
        for reason in filter(None, too_big):
            log.warning("magic_video %s request not sent: %s", role, reason)
        self.over_limits += sum(why is not None for why in too_big)
        last: dict[int, tuple[Any, dict | None]] = {}
        pending = [i for i, why in enumerate(too_big) if why is None]
        for attempt in range(attempts):
            if not pending:
                break
            responses = self._send([requests[i] for i in pending], fresh=attempt > 0)
            for response in responses:
                self.costs.setdefault(role, RoleCost()).add(response)
            self.calls += len(pending)
            self.retries += len(pending) if attempt else 0
            again = []
            for i, response in zip(pending, responses):
                value = _NOTHING if response.error else read_reply(response.text, reader)
                found = None if value is _NOTHING else shaped(value, key, role, reader)
                if found is None and reader == "text" and not response.error:
                    found = {key: split_reasoning_text(response.text)}  # G4: the reply itself is the summary
                last[i] = (response, found)
                if attempt and found is not None:
                    self._remember(requests[i], response)
                if found is None and (response.error or value is _NOTHING or retry_shape):
                    again.append(i)
            pending = again
        out: list[dict | None] = []
        for i in range(len(requests)):
            if i not in last:
                out.append(None)
                continue
            response, found = last[i]
            self.failed += bool(response.error)
            self.unparsed += found is None and not response.error
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
                "over_limits": self.over_limits, "left_out": self.left_out, "retries": self.retries}


def split_reasoning_text(text: str | None) -> str:
    """A reply's text without a reasoning model's thinking or a code fence around it, stripped."""
    from senri.answers import split_reasoning

    return _FENCES.sub("", split_reasoning(text or "")[0]).strip()


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
    # The builder's completion limit, bounded by its model config's max_tokens_cap as every other role's is
    # (a 135M model would only ramble on to 1,024 tokens: 38 s a call on 2 cores).
    return BuilderLLM(backend, prompts, within_cap(int(cfg.get("builder_max_tokens", 1024)), model),
                      reader=str(cfg.get("builder_reader", "release")), attempts=cfg.get("builder_attempts", "release"))


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
    for position, chain in enumerate(chains):
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
            steps.append((str(chain["name"]).strip(), keys, start, end, text, inside, position))
    asked = [i for i, step in enumerate(steps) if step[5]]
    replies = dict(zip(asked, llm.ask_many("step_detail", "description", [
        {"chain": steps[i][0], "time": f"{hms(steps[i][2])} - {hms(steps[i][3])}",
         "captions": caption_lines(steps[i][5])} for i in asked], kept_on_failure=True)))
    rows = []
    for i, (name, keys, start, end, text, _, position) in enumerate(steps):
        detail = str((replies.get(i) or {}).get("description") or "").strip()
        text = detail or text
        if not text:
            llm.leave_out()
        rows.append(ChainRow("event", name, start, end, text, keys, chain=position))  # two chains of a name stay two
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
    vectors = node_vectors(graph, encoder or default_encoder(cfg))
    clips, embedder = clip_embeddings(request, graph)
    write_store(Path(request.out_dir), graph, sorted(chains, key=lambda r: (r.start_s, r.label)), vectors,
                system_record(cfg, **record, visual=visual, builder=llm.record(), source="built",
                              event_chains_dropped=dropped,
                              text_encoder=(cfg.get("text_encoder", "all-MiniLM-L6-v2 (for Qwen3-Embedding-4B)")
                                            if str(cfg.get("text_embedder", "minilm")) == "minilm"
                                            else str(cfg["text_embedder"])),
                              models={r: m[0] for r, m in request.models.items()},
                              **({"embedder": embedder} if embedder else {})), clips,
                costs={role: (request.models["builder"][0], cost) for role, cost in llm.costs.items()},
                video_id=request.video.video_id)


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
