"""Building EG-Agent's entity graph from captions and a transcript (E-C4..C8), senri's own extractor.

Per video (one video = one day, adapter choice S3): the caption memory's rows binned into 30-s clips by start
(E-C1's clip grid), the transcript's cues, then

- fusion (E-C5, prompt ``fuse``): a clip with cues overlapping ``[start, start + 30 s]`` (closed) gets one fused
  caption; a clip without keeps its caption;
- documents per clock hour (E-C6): the *fused* document lists the hour's clips as ``HH:MM:SS,000 --> HH:MM:SS,000 :
  <caption>`` (end = start + 30 s), the *transcript-only* (DT-only) document the hour's cues;
- extraction (E-C6, prompt ``extract``): one call per document for relationships between Person / Location /
  Object nodes of the types TALKS_TO / INTERACTS_WITH / MENTIONS / USES (the release's strict mode: anything
  else is dropped and counted); ids title-cased, types capitalised; the node list is not kept;
- timestamps (E-C7, prompt ``timestamps``): one call per document with its numbered relationships and the
  evidence (DT-only: the cues; fused: the clips and the cues), returning each relationship's spans;
- rows (E-C8): one per (relationship × span), spans that do not read as ``H:MM:SS,mmm`` dropped and counted,
  relationships without spans dropped; each span's transcript is the cue whose start is nearest the span's
  start (a cue of several lines: its last); the DT-only and fused graphs go into one table (the release's
  agent reads their union).

Every call goes through the build job's response cache; failed or unreadable replies are counted as builder
losses (the store's ``config.yaml``), never raised.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from senri.memory.cost import RoleCost
from senri.memory.egagent.common import VIDEO_DAY, clock, millis_from_clock, t8_from_clock
from senri.memory.egagent.graph import NODE_TYPES, RELATION_TYPES, Relationship

log = logging.getLogger(__name__)

#: E-C1 / E-C9: the caption clips' length.
CLIP_S = 30.0
HOUR_S = 3600.0


@dataclass(frozen=True)
class Cue:
    """One transcript cue: its span in seconds from the video's start and its text (lines joined by newlines)."""

    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class CaptionClip:
    """One 30-s clip: its caption as the caption memory wrote it and (E-C5) the caption the graph reads."""

    start_s: float
    end_s: float
    caption: str
    fused: str


#: The release's "Chinese line" test (``keep_english_subs``): a CJK unified ideograph anywhere in the line; kana,
#: CJK punctuation ("。") and full-width forms do not make a line Chinese.
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SRT_TIME = re.compile(r"(\d{1,2}:\d{2}:\d{2}[,.]\d{1,3})\s*-->\s*(\d{1,2}:\d{2}:\d{2}[,.]\d{1,3})")


def read_srt(path: Path) -> list[Cue]:
    """An SRT file's cues in time order. Blank lines, digit-only lines (the cue numbers) and lines holding CJK
    characters are not text (E-C4's filter); a block without a time line is skipped. A file with no cue at all,
    or a time line that does not read, raises ValueError naming the file and the block."""
    text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    cues = []
    for n, block in enumerate(re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()), 1):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        timing = next((i for i, line in enumerate(lines) if "-->" in line), None)
        if timing is None:
            continue
        match = _SRT_TIME.search(lines[timing])
        if not match:
            raise ValueError(f"{path}: block {n}: time line {lines[timing]!r} is not HH:MM:SS,mmm --> HH:MM:SS,mmm")
        # the release's reading of an SRT time (shift_timestamp): the fraction in whole milliseconds
        start, end = (millis_from_clock(t.replace(".", ",")) / 1000 for t in match.groups())
        words = [line for line in lines[timing + 1:] if not line.isdigit() and not _CJK.search(line)]
        if words:
            cues.append(Cue(start, end, "\n".join(words)))
    if not cues:
        raise ValueError(f"{path}: no transcript cue (an SRT file: number, HH:MM:SS,mmm --> HH:MM:SS,mmm, text)")
    return sorted(cues, key=lambda c: (c.start_s, c.end_s))


def caption_clips(rows: Sequence[Mapping[str, Any]], duration_s: float) -> list[tuple[float, float, str]]:
    """The caption memory's rows on the 30-s clip grid: clip k is ``[30k, min(30k + 30, duration))`` and holds
    the texts of the rows that start in it, in time order (a clip without one is left out)."""
    clips: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("text") and row.get("start_s") is not None:
            clips.setdefault(int(float(row["start_s"]) // CLIP_S), []).append(row)
    return [(k * CLIP_S, min((k + 1) * CLIP_S, max(float(duration_s), k * CLIP_S + 1e-6)),
             " ".join(str(r["text"]).strip() for r in sorted(clips[k], key=lambda r: float(r["start_s"]))))
            for k in sorted(clips)]


def overlapping(cues: Sequence[Cue], start_s: float, end_s: float) -> list[Cue]:
    """The cues overlapping ``[start_s, end_s]``, both ends included (E-C5)."""
    return [c for c in cues if c.start_s <= end_s and c.end_s >= start_s]


def cue_time_line(cue: Cue) -> str:
    """A cue's SRT time line, "HH:MM:SS,mmm --> HH:MM:SS,mmm"."""
    return f"{_srt_clock(cue.start_s)} --> {_srt_clock(cue.end_s)}"


def cue_line(cue: Cue) -> str:
    return f"{cue_time_line(cue)} : {cue.text.splitlines()[-1]}"


def fusion_item(cue: Cue) -> dict[str, str]:
    """A cue as the fuser (E13) gets it: its time line and its first text line (the release reads the hour's
    lines as (time, text) pairs, so a cue's second line is never its text)."""
    return {"timestamp": cue_time_line(cue), "text": cue.text.splitlines()[0]}


def _srt_clock(seconds: float) -> str:
    millis = int(round(seconds * 1000))
    return f"{clock(millis // 1000)},{millis % 1000:03d}"


@dataclass
class BuilderCalls:
    """The build's LLM role (``builder``): one structured call per prompt, the replies read as JSON objects,
    each failed or unreadable reply counted (``left_out``: builder outputs missing from the store).

    A reply is the first object that holds the schema's required keys: a reply cut at the token limit mid-list
    still holds complete inner objects (one span of a timestamps reply), and taking one of those for the reply
    would silently drop every relationship of the document. Cut replies are counted (``cut``)."""

    backend: Any
    prompts: Any
    max_tokens: int = 2048
    calls: int = 0
    failed: int = 0
    unparsed: int = 0
    cut: int = 0
    left_out: int = 0
    costs: dict[str, RoleCost] = field(default_factory=dict)

    def ask(self, role: str, fields_list: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]
            ) -> list[dict | None]:
        from senri.backends.base import ChatRequest, Message
        from senri.answers import first_valid
        from senri.backends.base import request_schema

        constrained = request_schema(self.backend, schema)
        requests = [ChatRequest((Message.text("user", self.prompts.render(role, **f)),), max_tokens=self.max_tokens,
                                temperature=0.0, json_schema=constrained, purpose=f"egagent:{role}")
                    for f in fields_list]
        required = tuple(schema.get("required", ()))

        def whole(candidate: dict) -> dict | None:
            return candidate if all(key in candidate for key in required) else None

        replies: list[dict | None] = []
        for response in self.backend.complete_many(requests) if requests else []:
            self.calls += 1
            self.costs.setdefault(role, RoleCost()).add(response)
            if response.error:
                self.failed += 1
                replies.append(None)
                continue
            self.cut += response.truncated
            found = first_valid(response.text or "", whole)
            self.unparsed += found is None
            replies.append(found)
        self.left_out += sum(r is None for r in replies)
        return replies

    def record(self) -> dict[str, int]:
        return {"calls": self.calls, "failed": self.failed, "unparsed": self.unparsed, "cut": self.cut,
                "left_out": self.left_out}


FUSE_SCHEMA = {"type": "object", "properties": {"fused_caption": {"type": "string"}}, "required": ["fused_caption"]}
_NODE = {"type": "object", "properties": {"id": {"type": "string"}, "type": {"enum": list(NODE_TYPES)}},
         "required": ["id", "type"]}
EXTRACT_SCHEMA = {"type": "object", "properties": {"relationships": {"type": "array", "items": {
    "type": "object", "properties": {"source": _NODE, "target": _NODE, "type": {"enum": list(RELATION_TYPES)}},
    "required": ["source", "target", "type"]}}}, "required": ["relationships"]}
_SPAN = {"type": "object", "properties": {"start_t": {"type": "string"}, "end_t": {"type": "string"}},
         "required": ["start_t", "end_t"]}
TIMESTAMP_SCHEMA = {"type": "object", "properties": {"relationships": {"type": "array", "items": {
    "type": "object", "properties": {"relationship_id": {"type": "integer"}, "intervals": {"type": "array",
                                                                                          "items": _SPAN},
                                     "confidence": {"type": "number"}, "explanation": {"type": "string"}},
    "required": ["relationship_id", "intervals"]}}}, "required": ["relationships"]}


def fuse(builder: BuilderCalls, clips: Sequence[tuple[float, float, str]], cues: Sequence[Cue]) -> list[CaptionClip]:
    """E-C5: each clip with cues in ``[start, start + 30 s]`` fused with them (E13); the others, and a clip whose
    fusion failed (counted), keep their caption. The caption's end is the next clip's start (the last: +30 s)."""
    asks, out = [], []
    for i, (start, end, caption) in enumerate(clips):
        heard = overlapping(cues, start, start + CLIP_S)
        if heard:
            next_start = clips[i + 1][0] if i + 1 < len(clips) else start + CLIP_S
            asks.append((i, {"start": clock(start), "end": clock(next_start), "caption": caption,
                             "speech": "\n".join(f"{item['timestamp']} : {item['text']}"
                                                  for item in map(fusion_item, heard))}))
        out.append(CaptionClip(start, end, caption, caption))
    replies = builder.ask("fuse", [f for _, f in asks], FUSE_SCHEMA)
    for (i, _), reply in zip(asks, replies):
        text = str((reply or {}).get("fused_caption") or "").strip()
        if text:
            out[i] = CaptionClip(out[i].start_s, out[i].end_s, out[i].caption, text)
    return out


def hour_documents(clips: Sequence[CaptionClip], cues: Sequence[Cue]) -> list[dict[str, Any]]:
    """E-C6's documents: per clock hour that holds a clip or a cue, the fused document (its clips) and the
    transcript-only document (its cues), each with what its timestamps may cite."""
    hours = sorted({int(c.start_s // HOUR_S) for c in clips} | {int(c.start_s // HOUR_S) for c in cues})
    docs = []
    for hour in hours:
        hour_clips = [c for c in clips if int(c.start_s // HOUR_S) == hour]
        hour_cues = [c for c in cues if int(c.start_s // HOUR_S) == hour]
        if hour_cues:
            docs.append({"graph": "transcript_only", "hour": hour, "clips": [], "cues": hour_cues,
                         "document": "\n".join(cue_line(c) for c in hour_cues)})
        if hour_clips:
            docs.append({"graph": "fused", "hour": hour, "clips": hour_clips, "cues": hour_cues,
                         "document": "\n".join(f"{_srt_clock(c.start_s)} --> {_srt_clock(c.start_s + CLIP_S)} : "
                                               f"{c.fused}" for c in hour_clips)})
    return docs


def _node(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    node_id, node_type = str(value.get("id") or "").strip(), str(value.get("type") or "").strip().capitalize()
    if not node_id or node_type not in NODE_TYPES:
        return None
    return node_id.title(), node_type


def read_relationships(reply: Mapping[str, Any] | None) -> tuple[list[dict[str, str]], int]:
    """A reply's relationships (strict: both nodes of the allowed types, the relation one of the allowed ones;
    ids title-cased, node types capitalised) and how many were dropped."""
    kept, dropped = [], 0
    for entry in (reply or {}).get("relationships") or []:
        source = _node(entry.get("source")) if isinstance(entry, Mapping) else None
        target = _node(entry.get("target")) if isinstance(entry, Mapping) else None
        relation = str(entry.get("type") or "").strip().upper() if isinstance(entry, Mapping) else ""
        if source is None or target is None or relation not in RELATION_TYPES:
            dropped += 1
            continue
        kept.append({"source_id": source[0], "source_type": source[1], "target_id": target[0],
                     "target_type": target[1], "rel_type": relation})
    return kept, dropped


def nearest_cue_text(cues: Sequence[Cue], start: str) -> str:
    """The transcript of a span (E-C7): the cue whose start is nearest the span's start (its text "H:MM:SS,f",
    read in whole milliseconds as the release reads it: ",7" is 7 ms), ties to the earlier cue, its last line;
    "" when there is no cue."""
    if not cues:
        return ""
    start_ms = millis_from_clock(start)
    cue = min(cues, key=lambda c: (abs(round(c.start_s * 1000) - start_ms), c.start_s))
    return cue.text.splitlines()[-1]


def timestamp_fields(doc: Mapping[str, Any], relationships: Sequence[Mapping[str, str]]) -> dict[str, str]:
    numbered = "\n".join(f"{n}. {r['source_id']} ({r['source_type']}) {r['rel_type']} {r['target_id']} "
                         f"({r['target_type']})" for n, r in enumerate(relationships, 1))
    cues = "\n".join(cue_line(c) for c in doc["cues"]) or "(none)"
    if doc["graph"] == "transcript_only":
        return {"relationships": numbered, "evidence": "transcript", "evidence_block": f"Transcript:\n{cues}",
                "rule": "Use the transcript's times only."}
    captions = "\n".join(f"{_srt_clock(c.start_s)} --> {_srt_clock(c.start_s + CLIP_S)} : {c.fused}"
                         for c in doc["clips"])
    return {"relationships": numbered, "evidence": "captions and transcript",
            "evidence_block": f"Captions:\n{captions}\n\nTranscript:\n{cues}",
            "rule": "Prefer the transcript's times; where only a caption supports it, use that caption's whole span."}


@dataclass
class GraphCounts:
    """What the extraction left out: relationships dropped by the strict types, without any span, spans whose
    times do not read."""

    dropped_relationships: int = 0
    unsupported_relationships: int = 0
    unreadable_spans: int = 0


def graph_rows(builder: BuilderCalls, docs: Sequence[Mapping[str, Any]], cues: Sequence[Cue],
               counts: GraphCounts) -> list[Relationship]:
    """E-C6..C8 over every document: extraction, timestamps, one row per (relationship × span)."""
    extracted = builder.ask("extract", [{"document": d["document"]} for d in docs], EXTRACT_SCHEMA)
    per_doc = []
    for reply in extracted:
        relationships, dropped = read_relationships(reply)
        counts.dropped_relationships += dropped
        per_doc.append(relationships)
    with_rels = [(d, rels) for d, rels in zip(docs, per_doc) if rels]
    stamped = builder.ask("timestamps", [timestamp_fields(d, rels) for d, rels in with_rels], TIMESTAMP_SCHEMA)
    rows: list[Relationship] = []
    for (doc, relationships), reply in zip(with_rels, stamped):
        spans: dict[int, list[Any]] = {}
        for entry in (reply or {}).get("relationships") or []:
            if isinstance(entry, Mapping) and isinstance(entry.get("relationship_id"), int):
                spans.setdefault(int(entry["relationship_id"]), []).extend(entry.get("intervals") or [])
        for n, relationship in enumerate(relationships, 1):
            readable = []
            for span in spans.get(n, []):
                try:
                    readable.append((t8_from_clock(span["start_t"]), t8_from_clock(span["end_t"]),
                                     str(span["start_t"])))
                except (KeyError, TypeError, ValueError):
                    counts.unreadable_spans += 1
            if not readable:
                counts.unsupported_relationships += 1
                continue
            for start, end, start_text in readable:
                rows.append(Relationship(VIDEO_DAY, start, end, nearest_cue_text(cues, start_text), **relationship))
    return rows


def seconds_grid(duration_s: float) -> list[float]:
    """E-C1: one frame per second, at 0, 1, …, the last whole second before the video's end."""
    return [float(s) for s in range(int(max(0.0, duration_s - 1e-9)) + 1)] if duration_s > 0 else []
