"""The question browser: static pages under ``<out>/report/questions/`` to read why a run got a question right or
wrong, question by question.

- ``index.html``: every (run, question) row of the scored predictions — video, task type, direction, answer,
  prediction, correctness, flags (parse failure, error, forced, trimmed, no retrieval, bypass, search fallback),
  what the run did (controller rounds, searches, memories returned, QA calls), calls, tokens, seconds — sortable
  by any column and filtered by
  run, video, task type, direction, correctness and flag. Filters live in the page address
  (``index.html?run=memory_search/agent&correct=0``), so a link can open one run's list already filtered.
- ``q/<qid>.html``: the question, its options, ground truth and evidence window; every run's prediction side by
  side; per run a time strip of the video (evidence window, memories read, periods searched, verified cells,
  cited moments) and its trace as a timeline (VideoLucy iterations, agent rounds with checks, verifier reports
  and their evidence frames, the working-memory note, and every model call with prompt, reply and reasoning).
- ``q/frames/*.jpg``: thumbnails of the cited evidence frames and of each evidence window's middle, decoded
  from the video the run read (the anonymized one), since traces hold frame times, not pictures.

No server and no network: every page carries its own CSS and script and links only to files in the folder, so
the folder works from a cluster file system and when copied elsewhere. Nothing here changes a number of the
report; it only shows what the prediction files already hold.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl

from senri.aggregate import RUN_KEYS

log = logging.getLogger(__name__)

#: Thumbnails' shorter side in pixels: enough to recognise a sign or an object, small enough to keep a run's
#: folder light (a few kB a frame).
THUMB_SHORT_SIDE = 160
#: Width of the time strip's drawing area, in SVG units (the strip scales with the page).
STRIP_WIDTH = 1000
INTERVAL = re.compile(r"(?:(\w[\w-]*) )?(\d+(?:\.\d+)?)–(\d+(?:\.\d+)?)s")

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1400px;color:#222;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;user-select:none} th.sorted-asc::after{content:" ▲"} th.sorted-desc::after{content:" ▼"}
td.num{text-align:right} .ok{color:#176b2c;font-weight:600} .bad{color:#b00020;font-weight:600}
.flag{display:inline-block;background:#fde2e1;color:#8a1c14;border-radius:3px;padding:0 4px;margin:0 2px;font-size:12px}
.filters label{margin-right:1em;font-size:13px} .note{color:#555;font-size:13px}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1em}
.run{border:1px solid #ddd;border-radius:6px;padding:.5em 1em;overflow-wrap:anywhere}
.step{border-left:3px solid #8aa;padding:.2em .7em;margin:.5em 0} .step.call{border-color:#ccc;font-size:13px}
.step h4{margin:.2em 0} pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em;font-size:12px;margin:.2em 0}
details>summary{cursor:pointer;color:#135;font-size:13px} .thumbs img{height:90px;margin:2px;border:1px solid #999}
figure.thumb{display:inline-block;margin:2px;font-size:11px;text-align:center} svg.strip{width:100%;height:auto}
.options{list-style:none;padding-left:1em} .options li.truth{font-weight:600}
.strip-run h4{margin:.6em 0 .1em} .options li.truth::after{content:" ← ground truth";color:#176b2c}
"""

INDEX_SCRIPT = """
(function(){
  const table=document.getElementById('questions'), rows=[...table.tBodies[0].rows];
  const keys=['run','video','task','direction','correct','flag'];
  const params=new URLSearchParams(location.search);
  const selects={};
  for(const k of keys){
    const el=document.getElementById('f-'+k); selects[k]=el;
    const values=[...new Set(rows.map(r=>r.dataset[k]).flatMap(v=>k==='flag'?v.split(' ').filter(Boolean):[v]))].sort();
    for(const v of values){const o=document.createElement('option');o.value=v;o.textContent=v;el.appendChild(o);}
    if(params.has(k)) el.value=params.get(k);
    el.addEventListener('change',apply);
  }
  function apply(){
    let shown=0;
    for(const r of rows){
      let ok=true;
      for(const k of keys){const v=selects[k].value; if(!v) continue;
        if(k==='flag'? !r.dataset.flag.split(' ').includes(v) : r.dataset[k]!==v){ok=false;break;}}
      r.hidden=!ok; if(ok) shown++;
    }
    document.getElementById('shown').textContent=shown+' of '+rows.length+' rows shown';
    table.dataset.shown=shown;
  }
  for(const [i,th] of [...table.tHead.rows[0].cells].entries()){
    th.addEventListener('click',()=>{
      const desc=th.classList.contains('sorted-asc');
      for(const o of table.tHead.rows[0].cells) o.classList.remove('sorted-asc','sorted-desc');
      th.classList.add(desc?'sorted-desc':'sorted-asc');
      const val=r=>{const c=r.cells[i]; const s=c.dataset.sort??c.textContent; const n=parseFloat(s);
        return isNaN(n)||!/^-?[0-9.]+$/.test(s)?s:n;};
      const sorted=[...rows].sort((a,b)=>{const x=val(a),y=val(b);
        const c=typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y));return desc?-c:c;});
      for(const r of sorted) table.tBodies[0].appendChild(r);
    });
  }
  if(params.has('sort')){const th=table.tHead.rows[0].cells[+params.get('sort')]; if(th) th.click();}
  apply();
})();
"""


#: Once the page has loaded, how many of its pictures decoded (``data-images-loaded``) and how many did not
#: (``data-images-broken``), on ``<body>``: a copied folder that lost its frames shows it at a glance (and the
#: browser tests read it).
IMAGE_CHECK_SCRIPT = """
window.addEventListener('load',()=>{const imgs=[...document.images];
  const broken=imgs.filter(i=>!(i.complete&&i.naturalWidth>0));
  document.body.dataset.imagesLoaded=imgs.length-broken.length; document.body.dataset.imagesBroken=broken.length;
  for(const i of broken) i.insertAdjacentHTML('afterend','<span class="flag">frame file missing</span>');});
"""


def question_slug(qid: str) -> str:
    """A file name for a question id: the id itself when it is already a safe name, else a cleaned id with a
    short digest (two ids that clean to the same text still get two pages)."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", qid)
    if clean == qid and not qid.startswith("."):
        return qid
    return f"{clean.lstrip('.')}-{hashlib.sha256(qid.encode()).hexdigest()[:8]}"


def question_href(qid: str) -> str:
    """A question's page relative to the browser's folder."""
    return f"q/{question_slug(qid)}.html"


def run_labels(scored: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """``method/model``, or ``method/model/memory`` where one method and model ran over several memories (the
    report tables' naming)."""
    runs = scored.select(RUN_KEYS).unique(maintain_order=True)
    counts = runs.group_by("method", "model").len()
    several = {(r["method"], r["model"]) for r in counts.filter(pl.col("len") > 1).iter_rows(named=True)}
    return {(r["method"], r["model"], r["memory"]): (f"{r['method']}/{r['model']}/{r['memory']}"
                                                     if (r["method"], r["model"]) in several
                                                     else f"{r['method']}/{r['model']}")
            for r in runs.iter_rows(named=True)}


# ------------------------------------------------------------------------------------------------ trace data
@dataclass
class Marks:
    """What a run's trace says it looked at, on the video's timeline (seconds)."""

    memories: list[tuple[float, float, str]] = field(default_factory=list)
    periods: list[tuple[float, float, str]] = field(default_factory=list)
    cells: list[tuple[float, float, str]] = field(default_factory=list)
    cited: list[tuple[float, float, str]] = field(default_factory=list)
    frames: list[float] = field(default_factory=list)


def _intervals(labels: Iterable[str]) -> list[tuple[float, float, str]]:
    out = []
    for label in labels:
        match = INTERVAL.search(str(label))
        if match:
            out.append((float(match.group(2)), float(match.group(3)), str(label)))
    return out


def _periods_of(value: Any) -> list[tuple[float, float]]:
    """A reply's ``Time Period`` field (``[[a, b], …]``, ``[a, b]`` or text) as intervals."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [(float(value[0]), float(value[1]))]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _periods_of(v)]
    return []


def _reply_periods(reply: Mapping[str, Any] | None) -> list[tuple[float, float]]:
    if not isinstance(reply, Mapping):
        return []
    for key in ("time_period", "Time Period"):
        if key in reply:
            return _periods_of(reply[key])
    return []


def cited_times(record: Mapping[str, Any]) -> list[float]:
    """A verifier report's cited moments (source seconds): its evidence moments and each requirement's."""
    times = [float(t) for t in record.get("evidence_s") or []]
    times += [float(t) for ts in (record.get("requirement_evidence_s") or {}).values() for t in ts]
    return sorted(set(times))


def trace_marks(trace: Mapping[str, Any] | None) -> Marks:
    marks = Marks()
    if not trace:
        return marks
    for step in trace.get("rounds") or []:
        marks.memories += _intervals(step.get("hits") or [])
        marks.cells += [(float(a), float(b), f"round {step.get('round')}") for a, b in step.get("cells") or []]
        for record in step.get("report_records") or []:
            marks.frames += cited_times(record)
    for entry in trace.get("tool_calls_log") or []:  # VideoARM: the ranges its tools looked at, in source seconds
        marks.periods += [(float(a), float(b), f"{entry.get('tool_name')} (step {entry.get('iteration')})")
                          for a, b in entry.get("intervals_s") or []]
    if "iterations" in trace or "preset" in trace:
        marks.memories += _intervals(trace.get("final_memory") or [])
        marks.periods += _intervals(it.get("period", "") for it in trace.get("iterations") or [])
        last = next((c for c in reversed(trace.get("calls") or []) if str(c.get("call", "")).startswith("answer")), None)
        if last is not None:
            marks.cited += [(a, b, "cited by the answer") for a, b in _reply_periods(last.get("reply"))]
    marks.frames = sorted(set(marks.frames))
    return marks


# ------------------------------------------------------------------------------------------------ thumbnails
class Thumbnails:
    """Frames decoded once per video for every page that shows them, written as JPEG files next to the pages.

    ``videos`` maps a video id to the file the runs read. A video that is missing or a time that does not decode
    gets no file; its page says "frame not available" instead of showing a broken image."""

    def __init__(self, videos: Mapping[str, str | Path], folder: Path, short_side: int = THUMB_SHORT_SIDE) -> None:
        self.videos = {k: Path(v) for k, v in videos.items()}
        self.folder = folder
        self.short_side = short_side
        self.wanted: dict[str, set[float]] = {}
        self.written: dict[tuple[str, float], str] = {}

    @staticmethod
    def name(video_id: str, t: float) -> str:
        return f"{question_slug(video_id)}_{int(round(t * 1000)):09d}.jpg"

    def want(self, video_id: str, times: Iterable[float]) -> None:
        self.wanted.setdefault(video_id, set()).update(round(float(t), 3) for t in times)

    def decode(self) -> None:
        from senri.decode import encode_jpeg, read_frames

        self.folder.mkdir(parents=True, exist_ok=True)
        for video_id, times in self.wanted.items():
            path = self.videos.get(video_id)
            if path is None or not path.is_file():
                log.warning("question browser: no video file for %s (%s); its thumbnails are left out", video_id, path)
                continue
            ordered = sorted(times)
            try:
                for t, frame in zip(ordered, read_frames(path, ordered, short_side=self.short_side)):
                    if frame.image is None:
                        continue
                    name = self.name(video_id, t)
                    (self.folder / name).write_bytes(encode_jpeg(frame.image, quality=80))
                    self.written[(video_id, t)] = name
            except Exception as exc:  # a damaged video costs thumbnails, never the report
                log.warning("question browser: decoding %s for thumbnails failed: %s", path, exc)

    def html(self, video_id: str, t: float, caption: str, prefix: str = "frames/") -> str:
        name = self.written.get((video_id, round(float(t), 3)))
        if name is None:
            return f'<figure class="thumb"><span class="note">frame at {t:.1f}s not available</span></figure>'
        return (f'<figure class="thumb"><img src="{prefix}{name}" alt="{html.escape(caption)}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")


# ------------------------------------------------------------------------------------------------ rendering
def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)
    return f"<pre>{_esc(text)}</pre>"


def _details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_esc(summary)}</summary>{body}</details>"


def call_html(call: Mapping[str, Any]) -> str:
    """One model call: its role, cost, repairs, reply, and its prompt and reasoning collapsed."""
    attempts = int(call.get("attempts") or 0)
    cost = []
    if "prompt_tokens" in call:
        cost.append(f"{call.get('prompt_tokens', 0)} + {call.get('completion_tokens', 0)} tokens")
    if "seconds" in call:
        cost.append(f"{float(call['seconds']):.2f} s")
    if attempts > 1:
        cost.append(f"{attempts - 1} repair(s)")
    head = f"<b>{_esc(call.get('call', 'call'))}</b> <span class=\"note\">{_esc(' · '.join(cost))}</span>"
    parts = [head]
    if call.get("failure"):
        parts.append(f'<span class="flag">{_esc(call["failure"])}</span>')
        if call.get("raw"):
            parts.append(_details("raw reply", _pre(call["raw"]), open_=True))
    if call.get("reply") is not None:
        parts.append(_pre(call["reply"]))
    if call.get("prompt"):
        parts.append(_details("prompt", _pre(call["prompt"])))
    if call.get("reasoning"):
        parts.append(_details("reasoning", _pre(call["reasoning"])))
    return '<div class="step call">' + "\n".join(parts) + "</div>"


def _videolucy_html(trace: Mapping[str, Any]) -> str:
    out = [f"<p>preset <b>{_esc(trace.get('preset'))}</b>, captioner {_esc(trace.get('captioner'))}"
           f"{', <b>forced answer</b>' if trace.get('forced') else ''}</p>"]
    if trace.get("sparse_init"):
        out.append(_details("sparse initialization", _pre(trace["sparse_init"])))
    iterations = list(trace.get("iterations") or [])
    n = 0
    for call in trace.get("calls") or []:
        out.append(call_html(call))
        if call.get("call") == "search" and n < len(iterations):
            it = iterations[n]
            n += 1
            level = (INTERVAL.search(str(it.get("period"))) or INTERVAL.search("x 0–0s")).group(1) or "?"
            deeper = sorted({m.group(1) for m in map(INTERVAL.search, it.get("captions") or [])
                             if m and m.group(1) and m.group(1) != level})
            captions = "".join(f"<li>{_esc(c)}</li>" for c in it.get("captions") or [])
            confident = it.get("confident")
            read = _details(f"{len(it.get('captions') or [])} caption(s) read", f"<ul>{captions}</ul>")
            out.append(f'<div class="step"><h4>iteration {n}: backtrack {_esc(it.get("period"))}</h4>'
                       f"<p>instruction: {_esc(it.get('instruction'))}</p>"
                       f"<p class=\"note\">depth: {_esc(level)} → {_esc(', '.join(deeper) or 'deepest level')}; "
                       f"answering agent afterwards: {'confident' if confident else 'not confident'}</p>"
                       f"{read}</div>")
    if trace.get("failed_captions"):
        out.append(_details("failed captions", _pre(trace["failed_captions"]), open_=True))
    if trace.get("forced_memory"):
        out.append(_details("memory given to the forced call", _pre(trace["forced_memory"])))
    if trace.get("final_memory"):
        out.append(_details("final memory", _pre(trace["final_memory"])))
    if trace.get("captions"):
        out.append(_details("captioner work", _pre(trace["captions"])))
    return "\n".join(out)


def _report_html(record: Mapping[str, Any], video_id: str, thumbs: Thumbnails) -> str:
    fields = record.get("fields") or {}
    findings = fields.get("requirement_findings") or {}
    cited = record.get("requirement_evidence_s") or {}
    rows = "".join(f"<tr><td>{_esc(rid)}</td><td>{_esc(text)}</td><td>{_esc(findings.get(rid, '–'))}</td>"
                   f"<td>{_esc(', '.join(f'{t:.1f}s' for t in cited.get(rid) or []))}</td></tr>"
                   for rid, text in record.get("requirements") or [])
    frames = "".join(thumbs.html(video_id, t, f"{t:.1f}s", prefix="frames/") for t in cited_times(record))
    cell = record.get("cell") or [0, 0]
    body = [f"<h4>report {_esc(record.get('report_id'))}: check {_esc(record.get('check'))}, "
            f"cell {float(cell[0]):.1f}–{float(cell[1]):.1f}s</h4>"]
    if record.get("error"):
        body.append(f'<span class="flag">no report: {_esc(record["error"])}</span>')
    if fields.get("observation"):
        body.append(f"<p>observation: {_esc(fields['observation'])}</p>")
    if rows:
        body.append("<table><tr><th>R</th><th>requirement</th><th>finding</th><th>evidence</th></tr>"
                    f"{rows}</table>")
    if record.get("gaps"):
        body.append(f"<p class=\"note\">evidence gaps: {_esc(', '.join(record['gaps']))}</p>")
    if frames:
        body.append(f'<div class="thumbs">{frames}</div>')
    return '<div class="step">' + "\n".join(body) + "</div>"


def _agent_html(trace: Mapping[str, Any], video_id: str, thumbs: Thumbnails) -> str:
    calls = list(trace.get("calls") or [])
    out = [f"<p>{_esc(trace.get('n_rounds'))} round(s): {_esc(' → '.join(trace.get('actions') or []))}; "
           f"retriever {_esc(trace.get('retriever'))}; {_esc(trace.get('checks', 0))} check(s), "
           f"{_esc(trace.get('cells', 0))} cell(s), {_esc(trace.get('verifier_calls', 0))} verifier call(s)</p>"]

    def next_call(prefix: str) -> str:
        for i, call in enumerate(calls):
            if str(call.get("call", "")).startswith(prefix):
                return call_html(calls.pop(i))
        return ""

    for step in trace.get("rounds") or []:
        parts = [f"<h4>round {_esc(step.get('round'))}{' (forced)' if step.get('forced') else ''}: "
                 f"{_esc(step.get('action'))}</h4>"]
        if step.get("rationale"):
            parts.append(f"<p>rationale: {_esc(step['rationale'])}</p>")
        if step.get("feedback_shown"):
            parts.append(_details("feedback shown to the controller", _pre(step["feedback_shown"])))
        parts.append(next_call("control"))
        if step.get("action") == "search":
            hits = "".join(f"<li>{_esc(h)}</li>" for h in step.get("hits") or [])
            parts.append(f"<p>query: <b>{_esc(step.get('query'))}</b> ({_esc(step.get('new'))} new)</p><ul>{hits}</ul>")
        for i, check in enumerate(step.get("checks") or [], 1):
            requirements = "".join(f"<li>{_esc(r)}</li>" for r in check.get("requirements") or [])
            windows = ", ".join(f"{float(a):.1f}–{float(b):.1f}s" for a, b in check.get("windows") or [])
            parts.append(f'<div class="step"><h4>check {i}</h4><p>target context: {_esc(check.get("target_context"))}'
                         f"<br>objective: {_esc(check.get('objective'))}<br>windows: {_esc(windows)} "
                         f"(fps {_esc(check.get('fps'))}, budget {_esc(check.get('budget'))})</p>"
                         f"<ul>{requirements}</ul>"
                         + (_details("adjustments", _pre(check["adjustments"])) if check.get("adjustments") else "")
                         + "</div>")
        if step.get("cells"):
            parts.append(f"<p class=\"note\">cells: {_esc(', '.join(f'{a:.1f}–{b:.1f}s' for a, b in step['cells']))}"
                         f" ({_esc(step.get('cells_asked'))} asked)</p>")
        records = step.get("report_records")
        if records is not None:
            parts += [_report_html(r, video_id, thumbs) for r in records]
        elif step.get("reports"):  # traces written before report records: the summaries as the controller read them
            parts.append(_pre("\n".join(step["reports"])))
        for call in step.get("verifier_calls") or []:
            parts.append(call_html(call))
        memory = step.get("working_memory")
        if memory is not None:
            parts.append(f'<div class="step"><h4>working memory</h4><p>note: {_esc(memory.get("note", "–"))}</p>'
                         f"<p class=\"note\">kept: {_esc(', '.join(memory.get('kept') or []) or '–')}"
                         f"{'; failure: ' + _esc(memory['failure']) if memory.get('failure') else ''}</p>"
                         f"{next_call('update')}</div>")
        out.append('<div class="step">' + "\n".join(p for p in parts if p) + "</div>")
    out += [call_html(c) for c in calls]  # calls the rounds did not claim (none in a well-formed trace)
    if trace.get("note"):
        out.append(f"<p>final working-memory note: {_esc(trace['note'])}</p>")
    return "\n".join(out)


def _generic_html(trace: Mapping[str, Any] | None, row: Mapping[str, Any]) -> str:
    call = {"call": "answer", "attempts": 1, "reply": row.get("raw_output"),
            "prompt_tokens": row.get("prompt_tokens") or 0, "completion_tokens": row.get("completion_tokens") or 0,
            "seconds": row.get("latency_s") or 0.0}
    out = []
    if trace:
        out.append("<table>" + "".join(f"<tr><td>{_esc(k)}</td><td>{_pre(v) if isinstance(v, (dict, list)) else _esc(v)}"
                                       f"</td></tr>" for k, v in sorted(trace.items()) if k != "calls") + "</table>")
        out += [call_html(c) for c in trace.get("calls") or []]
    if row.get("n_llm_calls") or row.get("n_vlm_calls"):
        out.append(call_html(call))
    return "\n".join(out) or '<p class="note">no trace (a model-free method)</p>'


def trace_html(trace: Mapping[str, Any] | None, row: Mapping[str, Any], thumbs: Thumbnails) -> str:
    if trace and "rounds" in trace:
        return _agent_html(trace, row["video_id"], thumbs)
    if trace and ("iterations" in trace or "preset" in trace):
        return _videolucy_html(trace)
    return _generic_html(trace, row)


def time_strip(duration_s: float, evidence: tuple[float, float] | None, marks: Marks) -> str:
    """An SVG strip of the video: one lane per kind of mark, the evidence window shaded across every lane."""
    duration = max(duration_s, 1e-6)

    def x(t: float) -> float:
        return round(max(0.0, min(1.0, t / duration)) * STRIP_WIDTH, 1)

    lanes = [("memories read", marks.memories, "#4a78c2"), ("periods searched", marks.periods, "#8e5bb5"),
             ("verified cells", marks.cells, "#e08a1e"), ("cited by the answer", marks.cited, "#2c8a5a")]
    lanes = [lane for lane in lanes if lane[1]]
    lane_h, label_w, top = 16, 130, 4
    height = top + lane_h * (len(lanes) + 2) + 14
    parts = [f'<svg class="strip" viewBox="0 0 {label_w + STRIP_WIDTH + 10} {height}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="time strip">',
             f'<g transform="translate({label_w},0)">']
    if evidence is not None:
        a, b = evidence
        w = max(x(b) - x(a), 2)
        parts.append(f'<rect class="evidence" x="{x(a)}" y="0" width="{w}" height="{height - 14}" fill="#3cb371" '
                     f'fill-opacity="0.25"><title>evidence window {a:.1f}–{b:.1f}s</title></rect>')
    y = top
    parts.append(f'<rect x="0" y="{y}" width="{STRIP_WIDTH}" height="{lane_h - 4}" fill="#eee"/>')
    if evidence is not None:
        parts.append(f'<rect x="{x(evidence[0])}" y="{y}" width="{max(x(evidence[1]) - x(evidence[0]), 2)}" '
                     f'height="{lane_h - 4}" fill="#3cb371"/>')
    lane_labels = [(y, "evidence window")]
    for name, intervals, color in lanes:
        y += lane_h
        lane_labels.append((y, name))
        for a, b, label in intervals:
            parts.append(f'<rect class="mark" x="{x(a)}" y="{y}" width="{max(x(b) - x(a), 2)}" height="{lane_h - 4}" '
                         f'fill="{color}" fill-opacity="0.7"><title>{_esc(label)} ({a:.1f}–{b:.1f}s)</title></rect>')
    y += lane_h
    lane_labels.append((y, "cited frames"))
    for t in marks.frames:
        parts.append(f'<line class="frame" x1="{x(t)}" x2="{x(t)}" y1="{y}" y2="{y + lane_h - 4}" stroke="#c0392b" '
                     f'stroke-width="3"><title>evidence frame {t:.1f}s</title></line>')
    for tick in range(0, 11):
        t = duration * tick / 10
        parts.append(f'<text x="{x(t)}" y="{height - 2}" font-size="10" text-anchor="middle" fill="#555">'
                     f"{t:.0f}s</text>")
    parts.append("</g>")
    parts += [f'<text x="{label_w - 6}" y="{ly + 10}" font-size="11" text-anchor="end" fill="#333">{_esc(n)}</text>'
              for ly, n in lane_labels]
    parts.append("</svg>")
    return "".join(parts)


def _flags(row: Mapping[str, Any]) -> list[str]:
    flags = [name for name, key in (("missing", "missing"), ("parse failure", "parse_failure"),
                                    ("error", "backend_error"), ("timeout", "timeout")) if row.get(key)]
    if row.get("forced_answers"):
        flags.append("forced")
    if row.get("context_trims"):
        flags.append("trimmed")
    if row.get("answered_without_retrieval"):
        flags.append("no retrieval")
    if row.get("bypasses"):
        flags.append("bypass")
    if row.get("failed_search_calls"):
        flags.append("search fallback")
    return flags


def _behaviour(row: Mapping[str, Any]) -> str:
    """What the run did on the question, as table cells: controller rounds, searches, memories returned, QA
    calls (0 for methods without such steps)."""
    return "".join(f'<td class="num">{int(row.get(name) or 0)}</td>'
                   for name in ("rounds", "searches", "memories_returned", "qa_calls"))


#: The column heads of :func:`_behaviour`.
BEHAVIOUR_HEADS = ("rounds", "searches", "memories", "QA calls")


def _calls(row: Mapping[str, Any]) -> int:
    return int(row.get("n_llm_calls") or 0) + int(row.get("n_vlm_calls") or 0)


def _tokens(row: Mapping[str, Any]) -> int:
    return int(row.get("prompt_tokens") or 0) + int(row.get("completion_tokens") or 0)


def _verdict(row: Mapping[str, Any]) -> str:
    if row.get("missing"):
        return '<span class="bad">missing</span>'
    return '<span class="ok">✓ right</span>' if row.get("correct") else '<span class="bad">✗ wrong</span>'


def _page(title: str, body: str, script: str = "") -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}"
            + (f"<script>{script}</script>" if script else "") + "</body></html>\n")


def index_page(rows: Sequence[Mapping[str, Any]], labels: Mapping[tuple[str, str, str], str],
               report_href: str) -> str:
    filters = "".join(f'<label>{name} <select id="f-{key}"><option value="">all</option></select></label>'
                      for key, name in (("run", "run"), ("video", "video"), ("task", "task type"),
                                        ("direction", "direction"), ("correct", "correct"), ("flag", "flag")))
    head = "".join(f"<th>{h}</th>" for h in ("run", "video", "question", "task", "dir.", "answer", "pred.",
                                              "correct", "flags", *BEHAVIOUR_HEADS, "calls", "tokens", "seconds"))
    body = []
    for row in rows:
        run = labels[(row["method"], row["model"], row["memory"])]
        flags = _flags(row)
        correct = "missing" if row.get("missing") else ("yes" if row["correct"] else "no")
        body.append(
            f'<tr data-run="{_esc(run)}" data-video="{_esc(row["video_id"])}" data-task="{_esc(row["task_type"])}" '
            f'data-direction="{_esc(row["direction"])}" data-correct="{correct}" data-flag="{_esc(" ".join(f.replace(" ", "-") for f in flags))}">'
            f"<td>{_esc(run)}</td><td>{_esc(row['video_id'])}</td>"
            f'<td><a href="{question_href(row["qid"])}">{_esc(row["qid"])}</a></td>'
            f"<td>{_esc(row['task_type'])}</td><td>{_esc(row['direction'])}</td><td>{_esc(row['answer'])}</td>"
            f"<td>{_esc(row.get('pred') or '–')}</td><td data-sort=\"{correct}\">{_verdict(row)}</td>"
            f"<td>{''.join(f'<span class=flag>{_esc(f)}</span>' for f in flags)}</td>{_behaviour(row)}"
            f'<td class="num">{_calls(row)}</td><td class="num">{_tokens(row)}</td>'
            f'<td class="num">{float(row.get("latency_s") or 0.0):.2f}</td></tr>')
    runs = sorted(set(labels.values()))
    per_run = " · ".join(f'<a href="index.html?run={html.escape(r, quote=True)}">{_esc(r)}</a>' for r in runs)
    page_body = (f'<h1>Questions</h1><p><a href="{report_href}">← report</a> · per run: {per_run}</p>'
                 f'<p class="filters">{filters}</p><p id="shown" class="note"></p>'
                 f'<table id="questions"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
                 '<p class="note">Click a column head to sort. Filters can be set in the address, e.g. '
                 "<code>index.html?task=OC&amp;correct=no</code>.</p>")
    return _page("senri question browser", page_body, INDEX_SCRIPT)


def question_page(question: Mapping[str, Any], runs: Sequence[Mapping[str, Any]],
                  labels: Mapping[tuple[str, str, str], str], duration_s: float, thumbs: Thumbnails) -> str:
    evidence = None
    if question.get("evidence_start_s") is not None and question.get("evidence_end_s") is not None:
        evidence = (float(question["evidence_start_s"]), float(question["evidence_end_s"]))
    options = "".join(f'<li class="{"truth" if letter == question["answer"] else ""}">{letter}. '
                      f"{_esc(question['option_' + letter.lower()])}</li>" for letter in "ABCD")
    strips = "".join(
        f'<div class="strip-run" data-run="{_esc(labels[(r["method"], r["model"], r["memory"])])}"><h4>'
        f'{_esc(labels[(r["method"], r["model"], r["memory"])])}: {_esc(r.get("pred") or "–")} {_verdict(r)}</h4>'
        f'{time_strip(duration_s, evidence, trace_marks(json.loads(r["trace"]) if r.get("trace") else None))}</div>'
        for r in runs)
    window = (f"{evidence[0]:.1f}–{evidence[1]:.1f}s" if evidence else "not given")
    middle = (thumbs.html(question["video_id"], (evidence[0] + evidence[1]) / 2, "middle of the evidence window")
              if evidence else "")
    side = "".join(
        f"<tr><td>{_esc(labels[(r['method'], r['model'], r['memory'])])}</td><td>{_esc(r.get('pred') or '–')}</td>"
        f"<td>{_verdict(r)}</td><td>{''.join(f'<span class=flag>{_esc(f)}</span>' for f in _flags(r))}</td>"
        f'{_behaviour(r)}<td class="num">{_calls(r)}</td><td class="num">{_tokens(r)}</td>'
        f'<td class="num">{float(r.get("latency_s") or 0.0):.2f}</td></tr>' for r in runs)
    columns = []
    for r in runs:
        trace = json.loads(r["trace"]) if r.get("trace") else None
        label = labels[(r["method"], r["model"], r["memory"])]
        error = f'<p class="flag">error: {_esc(r["error"])}</p>' if r.get("error") else ""
        columns.append(
            f'<section class="run" data-run="{_esc(label)}"><h3>{_esc(label)}: {_esc(r.get("pred") or "–")} '
            f"{_verdict(r)}</h3>{error}"
            f'<div class="timeline">{trace_html(trace, r, thumbs) if not r.get("missing") else "no prediction"}</div>'
            "</section>")
    body = (f'<p><a href="../index.html">← all questions</a> · <a href="../../../report.html">report</a></p>'
            f"<h1>{_esc(question['qid'])}</h1><p>video <b>{_esc(question['video_id'])}</b> · "
            f"{_esc(question['task_type'])} · {_esc(question['direction'])} · evidence window {window}</p>"
            f"<h2>{_esc(question['question'])}</h2><ul class=\"options\">{options}</ul>{middle}"
            f"<h2>Predictions</h2><table id=\"predictions\"><tr><th>run</th><th>prediction</th><th>correct</th>"
            f"<th>flags</th>{''.join(f'<th>{h}</th>' for h in BEHAVIOUR_HEADS)}<th>calls</th><th>tokens</th>"
            f"<th>seconds</th></tr>{side}</table>"
            f"<h2>Where each run looked</h2><p class=\"note\">The video from 0 to {duration_s:.0f} s; the green band "
            f"is the evidence window. Hover a mark for its interval.</p>{strips}"
            f'<h2>Traces</h2><div class="runs">{"".join(columns)}</div>')
    return _page(f"{question['qid']} · senri", body, IMAGE_CHECK_SCRIPT)


def build_browser(scored: pl.DataFrame, predictions: pl.DataFrame, questions: pl.DataFrame,
                  videos: pl.DataFrame | None, folder: str | Path, report_href: str = "../../report.html") -> Path:
    """Write the browser under ``folder`` (``<out>/report/questions``); returns its ``index.html``.

    ``scored`` is :func:`senri.aggregate.score`'s table (one row per run and question, missing ones
    included); ``predictions`` the prediction rows with their traces and costs; ``videos`` the videos table
    (the file each run read and its duration; without it the strip spans the latest time a trace names and
    no thumbnail is drawn)."""
    folder = Path(folder)
    pages = folder / "q"
    pages.mkdir(parents=True, exist_ok=True)
    extra = [c for c in predictions.columns if c not in scored.columns or c in RUN_KEYS or c == "qid"]
    rows = scored.join(predictions.select(extra), on=[*RUN_KEYS, "qid"], how="left")
    labels = run_labels(scored)
    paths = dict(zip(videos["video_id"], videos["path"])) if videos is not None else {}
    durations = dict(zip(videos["video_id"], videos["duration_s"])) if videos is not None else {}
    thumbs = Thumbnails(paths, pages / "frames")
    by_question: dict[str, list[dict[str, Any]]] = {}
    for row in rows.iter_rows(named=True):
        by_question.setdefault(row["qid"], []).append(row)
    marks_of: dict[tuple[str, str, str, str], Marks] = {}
    for qid, runs in by_question.items():
        for r in runs:
            marks = trace_marks(json.loads(r["trace"]) if r.get("trace") else None)
            marks_of[(r["method"], r["model"], r["memory"], qid)] = marks
            thumbs.want(r["video_id"], marks.frames)
    for q in questions.iter_rows(named=True):
        if q.get("evidence_start_s") is not None and q.get("evidence_end_s") is not None:
            thumbs.want(q["video_id"], [(float(q["evidence_start_s"]) + float(q["evidence_end_s"])) / 2])
    thumbs.decode()
    written = 0
    for q in questions.iter_rows(named=True):
        runs = by_question.get(q["qid"], [])
        if not runs:
            continue
        latest = max([float(q.get("evidence_end_s") or 0.0)]
                     + [t for r in runs for m in [marks_of[(r["method"], r["model"], r["memory"], q["qid"])]]
                        for t in [*(b for _, b, _ in m.memories + m.periods + m.cells + m.cited), *m.frames]])
        duration = float(durations.get(q["video_id"]) or latest or 1.0)
        (pages / f"{question_slug(q['qid'])}.html").write_text(question_page(q, runs, labels, duration, thumbs))
        written += 1
    index = folder / "index.html"
    index.write_text(index_page(list(rows.iter_rows(named=True)), labels, report_href))
    log.info("question browser: %d row(s), %d question page(s), %d thumbnail(s) in %s", rows.height, written,
             len(thumbs.written), folder)
    return index


def discordant_html(scored: pl.DataFrame, baseline: str, treatment: str, href_prefix: str) -> str:
    """The questions a pair disagrees on, each linked to its page: won (the treatment right, the baseline
    wrong) and lost (the other way round) — the questions behind McNemar's test."""
    from senri.report.tables import run_filter

    base = scored.filter(run_filter(baseline)).select("qid", pl.col("correct").alias("a"))
    both = base.join(scored.filter(run_filter(treatment)).select("qid", pl.col("correct").alias("t")), on="qid")

    def links(frame: pl.DataFrame) -> str:
        return ", ".join(f'<a href="{href_prefix}{question_href(q)}">{_esc(q)}</a>' for q in frame["qid"]) or "none"

    won, lost = both.filter(pl.col("t") & ~pl.col("a")), both.filter(pl.col("a") & ~pl.col("t"))
    return (f'<p class="note discordant">{_esc(baseline)} → {_esc(treatment)}: won {won.height} ({links(won)}); '
            f"lost {lost.height} ({links(lost)})</p>")


__all__ = ["build_browser", "discordant_html", "question_href", "question_slug", "trace_marks", "time_strip"]
