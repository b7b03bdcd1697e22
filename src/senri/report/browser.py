"""The question browser: static pages under ``<out>/report/questions/`` to read why a run got a question right or
wrong, question by question, and what each method did to get there.

- ``index.html``: every (run, question) row of the scored predictions — video, the question and its text, task
  type, direction, answer, prediction, correctness, flags (parse failure, error, timeout, forced, trimmed,
  repaired, no retrieval, bypass, search fallback), what the run did (controller rounds, searches, memories
  returned, checks, cells, frames seen, tool calls, QA calls), calls, tokens, seconds; above it one line per run
  (accuracy and how many of its questions carry each flag). Sortable by any column, filtered by run, video, task
  type, direction, correctness, flag and text, with the accuracy of the rows shown.
- ``grid.html``: one row per question, one cell (letter, ✓/✗) per run; filters "runs disagree", "all wrong",
  "all right", "A right" / "B wrong" for any two runs, and the list's video, task, direction and text filters.
- ``q/<qid>.html``: the question, its options, ground truth and evidence window; every run's prediction side by
  side; a time strip per run of what its trace says it looked at (memories read, periods searched, verified
  cells, cited moments, frames sent; each mark links to its trace step), or why there is none; and the trace as
  a timeline (VideoLucy iterations, agent rounds with checks, verifier reports and their evidence frames, the
  working-memory note, VideoARM's steps and tools) with every model call: prompt, reply, reasoning, cost and
  the attempts a repair replaced.
- ``q/frames/*.jpg`` (and ``q/frames/large/``): thumbnails of the cited evidence frames and of each evidence
  window's middle, each opening a larger copy, decoded from the video the run read (the anonymized one), since
  traces hold frame times, not pictures.
- ``browser.js`` and ``rows.js``: the one script of every page and the rows it filters
  (:mod:`senri.report.browser_script`); ``list.js``: the list's rows as HTML, inserted a page at a time. The
  address holds each view's state (filters, text, sort, page), and a question page opened from a view walks the
  same selection with previous / next and links back to it. Both views show :data:`PAGE_ROWS` rows a page.

No server and no network: every page links only to files in the folder, so the folder works from a cluster file
system and when copied elsewhere (the report page sits one level up, in ``<out>/report/``, so copying
``report/`` keeps every link). Nothing here changes a number of the report; it only shows what the prediction
files already hold.
"""

from __future__ import annotations

import functools
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
from senri.benchmarks.scoring import question_options
from senri.records import OPTION_LETTERS
from senri.report.browser_script import BROWSER_JS

log = logging.getLogger(__name__)

#: Thumbnails' shorter side in pixels: enough to recognise a sign or an object, small enough to keep a run's
#: folder light (a few kB a frame). A click opens the frame at :data:`LARGE_SHORT_SIDE`.
THUMB_SHORT_SIDE = 160
LARGE_SHORT_SIDE = 480
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
.warning{background:#fff4ce;border:1px solid #e0b400;padding:.2em .8em;border-radius:4px;font-size:13px}
.warning p{margin:.2em 0} td.qtext{max-width:26em} a.disabled{color:#999;pointer-events:none}
.runs{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1em}
.run{border:1px solid #ddd;border-radius:6px;padding:.5em 1em;overflow-wrap:anywhere}
.step{border-left:3px solid #8aa;padding:.2em .7em;margin:.5em 0} .step.call{border-color:#ccc;font-size:13px}
.step:target{background:#fffbe6} .step h4{margin:.2em 0}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.4em;font-size:12px;margin:.2em 0}
details>summary{cursor:pointer;color:#135;font-size:13px} .thumbs img{height:90px;margin:2px;border:1px solid #999}
figure.thumb{display:inline-block;margin:2px;font-size:11px;text-align:center} svg.strip{width:100%;height:auto}
.options{list-style:none;padding-left:1em} .options li.truth{font-weight:600}
.strip-run h4{margin:.6em 0 .1em} .options li.truth::after{content:" ← ground truth";color:#176b2c}
table.grid td.cell{text-align:center;white-space:nowrap} table.grid td.cell.yes{background:#e3f4e6}
table.grid td.cell.no,table.grid td.cell.missing{background:#fbe4e4} dl.glossary dt{font-weight:600;float:left;width:4em}
dl.glossary dd{margin-left:4.5em;font-size:13px} dl.glossary.flags dt{width:9em} dl.glossary.flags dd{margin-left:9.5em}
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

#: The flags of a (run, question) row and what each means, for the list's glossary.
FLAG_NOTES = {
    "missing": "no prediction file row: the run never answered (counted wrong)",
    "parse-failure": "the reply held no readable answer (counted wrong)",
    "error": "a model call failed for good (counted wrong unless the release's fallback letter was kept)",
    "timeout": "a model call ran out of time",
    "forced": "the answer came from a forced round or call (the method's budget ran out)",
    "trimmed": "a request was shortened to fit the model's context or image limit",
    "repaired": "a reply was sent back for repair at least once (the rejected attempts are on the page)",
    "no-retrieval": "a memory method answered with no memory item retrieved",
    "bypass": "a search was served by a shortcut instead of the retrieval (MAGIC-Video's time bypass)",
    "search-fallback": "a retriever's own model call failed, so the search took its fallback",
}

@functools.lru_cache(maxsize=None)  # asked for every row, run and link of every page: 37,800 rows x 14 runs
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
#: A mark on the timeline: start, end (seconds), its label, and the id (within the run's section) of the trace
#: step it came from, or None.
Span = tuple[float, float, str, "str | None"]
#: A moment on the timeline and its step's id.
Moment = tuple[float, "str | None"]


@dataclass
class Marks:
    """What a run's trace says it looked at, on the video's timeline (seconds). Intervals may be given as
    ``(start, end, label)`` or with the trace step's id as a fourth element; moments as seconds or
    ``(seconds, step id)``."""

    memories: list = field(default_factory=list)
    periods: list = field(default_factory=list)
    cells: list = field(default_factory=list)
    cited: list = field(default_factory=list)
    frames: list = field(default_factory=list)
    #: Frames a method sent with every call (direct perception's uniform sample).
    seen: list[float] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.memories or self.periods or self.cells or self.cited or self.frames or self.seen)

    def latest(self) -> float:
        ends = [_span(s)[1] for s in self.memories + self.periods + self.cells + self.cited]
        return max(ends + [_moment(m)[0] for m in self.frames] + list(self.seen) + [0.0])


def _span(value: Sequence[Any]) -> Span:
    return (float(value[0]), float(value[1]), str(value[2]), value[3] if len(value) > 3 else None)


def _moment(value: Any) -> Moment:
    return (float(value[0]), value[1]) if isinstance(value, (tuple, list)) else (float(value), None)


def _intervals(labels: Iterable[str], anchor: str | None = None) -> list[Span]:
    out = []
    for label in labels:
        match = INTERVAL.search(str(label))
        if match:
            out.append((float(match.group(2)), float(match.group(3)), str(label), anchor))
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
        anchor = f"round-{step.get('round')}"
        marks.memories += _intervals(step.get("hits") or [], anchor)
        marks.cells += [(float(a), float(b), f"round {step.get('round')}", anchor) for a, b in step.get("cells") or []]
        for record in step.get("report_records") or []:
            marks.frames += [(t, anchor) for t in cited_times(record)]
    for entry in trace.get("tool_calls_log") or []:  # VideoARM: the ranges its tools looked at, in source seconds
        anchor = f"step-{entry.get('iteration')}"
        marks.periods += [(float(a), float(b), f"{entry.get('tool_name')} (step {entry.get('iteration')})", anchor)
                          for a, b in entry.get("intervals_s") or []]
    if "iterations" in trace or "preset" in trace:
        marks.memories += _intervals(trace.get("final_memory") or [], "final-memory")
        for n, it in enumerate(trace.get("iterations") or [], 1):
            marks.periods += _intervals([it.get("period", "")], f"iteration-{n}")
        calls = list(trace.get("calls") or [])
        last = next((k for k in reversed(range(len(calls))) if str(calls[k].get("call", "")).startswith("answer")), None)
        if last is not None:
            marks.cited += [(a, b, "cited by the answer", f"call-{last + 1}")
                            for a, b in _reply_periods(calls[last].get("reply"))]
    first: dict[float, str | None] = {}
    for t, anchor in map(_moment, marks.frames):
        first.setdefault(t, anchor)
    marks.frames = sorted(first.items())
    marks.seen = sorted({float(t) for t in trace.get("frames_s") or []})
    return marks


# ------------------------------------------------------------------------------------------------ thumbnails
class Thumbnails:
    """Frames decoded once per video for every page that shows them, written as JPEG files next to the pages:
    a thumbnail (``frames/``) and the larger copy it opens (``frames/large/``), from one decode.

    ``videos`` maps a video id to the file the runs read. A video that is missing or a time that does not decode
    gets no file; its page says "frame not available" instead of showing a broken image."""

    def __init__(self, videos: Mapping[str, str | Path], folder: Path, short_side: int = THUMB_SHORT_SIDE,
                 large_short_side: int = LARGE_SHORT_SIDE) -> None:
        self.videos = {k: Path(v) for k, v in videos.items()}
        self.folder = folder
        self.short_side = short_side
        self.large_short_side = max(large_short_side, short_side)
        self.wanted: dict[str, set[float]] = {}
        self.written: dict[tuple[str, float], str] = {}

    @staticmethod
    def name(video_id: str, t: float) -> str:
        return f"{question_slug(video_id)}_{int(round(t * 1000)):09d}.jpg"

    def want(self, video_id: str, times: Iterable[float]) -> None:
        self.wanted.setdefault(video_id, set()).update(round(float(t), 3) for t in times)

    def decode(self) -> None:
        import numpy as np
        from PIL import Image

        from senri.decode import encode_jpeg, read_frames

        (self.folder / "large").mkdir(parents=True, exist_ok=True)
        for video_id, times in self.wanted.items():
            path = self.videos.get(video_id)
            if path is None or not path.is_file():
                log.warning("question browser: no video file for %s (%s); its thumbnails are left out", video_id, path)
                continue
            ordered = sorted(times)
            try:
                for t, frame in zip(ordered, read_frames(path, ordered, short_side=self.large_short_side)):
                    if frame.image is None:
                        continue
                    name = self.name(video_id, t)
                    (self.folder / "large" / name).write_bytes(encode_jpeg(frame.image, quality=85))
                    large = Image.fromarray(frame.image)
                    scale = self.short_side / min(large.size)
                    small = large.resize((max(1, round(large.width * scale)), max(1, round(large.height * scale))),
                                         Image.Resampling.BILINEAR) if scale < 1 else large
                    (self.folder / name).write_bytes(encode_jpeg(np.asarray(small), quality=80))
                    self.written[(video_id, t)] = name
            except Exception as exc:  # a damaged video costs thumbnails, never the report
                log.warning("question browser: decoding %s for thumbnails failed: %s", path, exc)

    def html(self, video_id: str, t: float, caption: str, prefix: str = "frames/") -> str:
        name = self.written.get((video_id, round(float(t), 3)))
        if name is None:
            return f'<figure class="thumb"><span class="note">frame at {t:.1f}s not available</span></figure>'
        return (f'<figure class="thumb"><a href="{prefix}large/{name}" target="_blank" title="open the frame larger">'
                f'<img src="{prefix}{name}" alt="{html.escape(caption)}"></a>'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")


# ------------------------------------------------------------------------------------------------ rendering
def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False)
    return f"<pre>{_esc(text)}</pre>"


def _details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_esc(summary)}</summary>{body}</details>"


def _letters(scores: Mapping[str, Any]) -> str:
    return ", ".join(f"{letter} {float(value):.3g}" for letter, value in scores.items())


def call_html(call: Mapping[str, Any], anchor: str | None = None) -> str:
    """One model call: its role, cost, the attempts a repair replaced, the reply, and its prompt and reasoning
    collapsed. A log-probability call (``blind_letter``, ``blind_debiased``) shows its letters' scores, and
    under a reordering of the options which original option each shown letter stood for."""
    attempts = int(call.get("attempts") or 0)
    cost = []
    if "prompt_tokens" in call:
        cost.append(f"{call.get('prompt_tokens', 0)} + {call.get('completion_tokens', 0)} tokens")
    if "seconds" in call:
        cost.append(f"{float(call['seconds']):.2f} s")
    if attempts > 1:
        cost.append(f"{attempts - 1} repair(s)")
    if int(call.get("transport_attempts") or 0) > 1:
        cost.append(f"sent {call['transport_attempts']} times by the backend")
    if call.get("role"):
        cost.append(f"role {call['role']}" + (f" ({call['model']})" if call.get("model") else ""))
    head = f"<b>{_esc(call.get('call', 'call'))}</b> <span class=\"note\">{_esc(' · '.join(cost))}</span>"
    parts = [head]
    for n, rejected in enumerate(call.get("rejected_attempts") or [], 1):
        parts.append(_details(f"attempt {n}: rejected ({rejected.get('failure') or 'unreadable'}), sent back for "
                              "repair", _pre(rejected.get("reply") or "(empty reply)")
                              + (_details("repair turn", _pre(rejected["repair_prompt"]))
                                 if rejected.get("repair_prompt") else "")))
    if call.get("failure"):
        parts.append(f'<span class="flag">{_esc(call["failure"])}</span>')
        if call.get("raw"):
            parts.append(_details("raw reply", _pre(call["raw"]), open_=True))
    if call.get("reply") is not None:
        parts.append(_pre(call["reply"]))
    shown_as = call.get("shown_as")
    logprobs = call.get("letter_logprobs")
    if shown_as:
        order = ", ".join(f"{shown} = option {original}" for shown, original in shown_as.items())
        parts.append(f'<p class="note mapping">options shown as: {_esc(order)}</p>')
    if logprobs:
        parts.append(f'<p class="note">letter log-probabilities: {_esc(_letters(logprobs))}</p>')
        if shown_as:
            by_option = {shown_as[k]: v for k, v in logprobs.items() if k in shown_as}
            parts.append(f'<p class="note">the same, by original option: '
                         f"{_esc(_letters(dict(sorted(by_option.items()))))}</p>")
    if call.get("prompt"):
        parts.append(_details("prompt", _pre(call["prompt"])))
    if call.get("reasoning"):
        parts.append(_details("reasoning", _pre(call["reasoning"])))
    ident = f' id="{_esc(anchor)}"' if anchor else ""
    return f'<div class="step call"{ident}>' + "\n".join(parts) + "</div>"


def _videolucy_html(trace: Mapping[str, Any], prefix: str) -> str:
    out = [f"<p>preset <b>{_esc(trace.get('preset'))}</b>, captioner {_esc(trace.get('captioner'))}"
           f"{', <b>forced answer</b>' if trace.get('forced') else ''}</p>"]
    if trace.get("sparse_init"):
        out.append(_details("sparse initialization", _pre(trace["sparse_init"])))
    iterations = list(trace.get("iterations") or [])
    n = 0
    for k, call in enumerate(trace.get("calls") or [], 1):
        out.append(call_html(call, f"{prefix}-call-{k}"))
        if call.get("call") == "search" and n < len(iterations):
            it = iterations[n]
            n += 1
            level = (INTERVAL.search(str(it.get("period"))) or INTERVAL.search("x 0–0s")).group(1) or "?"
            deeper = sorted({m.group(1) for m in map(INTERVAL.search, it.get("captions") or [])
                             if m and m.group(1) and m.group(1) != level})
            captions = "".join(f"<li>{_esc(c)}</li>" for c in it.get("captions") or [])
            confident = it.get("confident")
            read = _details(f"{len(it.get('captions') or [])} caption(s) read", f"<ul>{captions}</ul>")
            out.append(f'<div class="step" id="{prefix}-iteration-{n}"><h4>iteration {n}: backtrack {_esc(it.get("period"))}</h4>'
                       f"<p>instruction: {_esc(it.get('instruction'))}</p>"
                       f"<p class=\"note\">depth: {_esc(level)} → {_esc(', '.join(deeper) or 'deepest level')}; "
                       f"answering agent afterwards: {'confident' if confident else 'not confident'}</p>"
                       f"{read}</div>")
    if trace.get("failed_captions"):
        out.append(_details("failed captions", _pre(trace["failed_captions"]), open_=True))
    if trace.get("forced_memory"):
        out.append(_details("memory given to the forced call", _pre(trace["forced_memory"])))
    if trace.get("final_memory"):
        out.append(f'<div id="{prefix}-final-memory">' + _details("final memory", _pre(trace["final_memory"])) + "</div>")
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


def _agent_html(trace: Mapping[str, Any], video_id: str, thumbs: Thumbnails, prefix: str) -> str:
    calls = list(trace.get("calls") or [])
    out = [f"<p>{_esc(trace.get('n_rounds'))} round(s): {_esc(' → '.join(trace.get('actions') or []))}; "
           f"retriever {_esc(trace.get('retriever'))}; {_esc(trace.get('checks', 0))} check(s), "
           f"{_esc(trace.get('cells', 0))} cell(s), {_esc(trace.get('verifier_calls', 0))} verifier call(s)</p>"]

    def next_call(name: str) -> str:
        for i, call in enumerate(calls):
            if str(call.get("call", "")).startswith(name):
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
        out.append(f'<div class="step" id="{prefix}-round-{_esc(step.get("round"))}">' + "\n".join(p for p in parts if p)
                   + "</div>")
    out += [call_html(c) for c in calls]  # calls the rounds did not claim (none in a well-formed trace)
    if trace.get("note"):
        out.append(f"<p>final working-memory note: {_esc(trace['note'])}</p>")
    return "\n".join(out)


def _fields_table(trace: Mapping[str, Any], leave_out: Iterable[str]) -> str:
    left = set(leave_out)
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_pre(v) if isinstance(v, (dict, list)) else _esc(v)}</td></tr>"
                   for k, v in sorted(trace.items()) if k not in left)
    return f"<table>{rows}</table>" if rows else ""


def _videoarm_html(trace: Mapping[str, Any], prefix: str) -> str:
    """VideoARM's steps in order: the controller's reply, the tools it ran (arguments, ranges, result) and
    every model call of the step (controller, captions, clip analyses), then the forced answer if any."""
    calls = list(trace.get("calls") or [])
    tools = list(trace.get("tool_calls_log") or [])
    stats = trace.get("tool_statistics") or {}
    out = [f"<p>{_esc(stats.get('iterations_used', 0))} step(s), {_esc(stats.get('total_calls', 0))} tool call(s)"
           f"{', <b>forced answer</b>' if trace.get('forced') else ''}; interface {_esc(trace.get('interface'))}</p>"]

    def step_of(purpose: str) -> str:
        return purpose.rsplit(":", 1)[-1] if ":" in purpose else ""

    for step in trace.get("steps") or []:
        n = str(step.get("iteration"))
        parts = [f"<h4>step {_esc(n)}{': ' + _esc(step['outcome']) if step.get('outcome') else ''}</h4>"]
        if step.get("told"):
            parts.append(_details("told before this step", _pre(step["told"])))
        mine = [c for c in calls if step_of(str(c.get("call", ""))) == n]
        calls = [c for c in calls if c not in mine]
        controller = [c for c in mine if str(c.get("call", "")).startswith("controller")]
        parts += [call_html(c) for c in controller]
        for entry in (t for t in tools if str(t.get("iteration")) == n):
            ranges = ", ".join(f"{float(a):.1f}–{float(b):.1f}s" for a, b in entry.get("intervals_s") or [])
            parts.append(f'<div class="step"><h4>tool {_esc(entry.get("tool_name"))}'
                         f"{' (rejected)' if entry.get('rejected') else ''}</h4>"
                         f"<p class=\"note\">{_esc(ranges) or 'no range'} · {_esc(entry.get('frames_decoded', 0))} "
                         f"frame(s) decoded · {_esc(entry.get('images_sent', 0))} image(s) sent</p>"
                         + _details("arguments", _pre(entry.get("arguments"))) + _pre(entry.get("result")) + "</div>")
        parts += [call_html(c) for c in mine if c not in controller]
        out.append(f'<div class="step" id="{prefix}-step-{_esc(n)}">' + "\n".join(parts) + "</div>")
    out += [call_html(c) for c in calls]  # the forced answer, and calls of no step
    out.append(_details("trace fields", _fields_table(trace, ("steps", "tool_calls_log", "calls"))))
    return "\n".join(out)


def _prompted_html(trace: Mapping[str, Any]) -> str:
    """A one-prompt method (``blind``, ``direct``, the letter-scoring variants): each call, and for letter
    scoring how the prediction follows from the scores."""
    out = [f"<p>answer format <b>{_esc(trace.get('answer_format'))}</b>"
           f"{' (' + _esc(trace['format_fallback']) + ')' if trace.get('format_fallback') else ''}"
           f"{'; parse rule ' + _esc(trace['parse_rule']) if trace.get('parse_rule') else ''}"
           f"{'; ' + str(len(trace['frames_s'])) + ' frame(s) sent with the question' if trace.get('frames_s') else ''}</p>"]
    calls = list(trace.get("calls") or [])
    if len(calls) > 1:
        out.append(f"<p class=\"note\">{len(calls)} calls: the question asked under {len(calls)} cyclic orderings of "
                   "its options, each reply's letters mapped back to the original options.</p>")
    out += [call_html(c) for c in calls]
    scores = trace.get("scores_by_letter")
    if scores:
        ranked = sorted(scores.items(), key=lambda kv: -float(kv[1]))
        out.append('<div class="step"><h4>how the prediction follows</h4>'
                   f"<p>score per original option: {_esc(_letters(scores))}</p>"
                   f"<p>{_esc(trace.get('rule', ''))}: <b>{_esc(ranked[0][0])}</b>"
                   f"{' (ahead of ' + _esc(ranked[1][0]) + ')' if len(ranked) > 1 else ''}</p></div>")
    return "\n".join(out)


def _generic_html(trace: Mapping[str, Any] | None, row: Mapping[str, Any]) -> str:
    """A trace no renderer above knows: its fields, and its calls; without recorded calls, the row's reply."""
    out = []
    if trace:
        out.append(_fields_table(trace, ("calls",)))
        out += [call_html(c) for c in trace.get("calls") or []]
    if (row.get("n_llm_calls") or row.get("n_vlm_calls")) and not (trace or {}).get("calls"):
        out.append(call_html({"call": "answer", "attempts": 1, "reply": row.get("raw_output"),
                              "prompt_tokens": row.get("prompt_tokens") or 0,
                              "completion_tokens": row.get("completion_tokens") or 0,
                              "seconds": row.get("latency_s") or 0.0}))
    return "\n".join(o for o in out if o) or '<p class="note">no trace (a model-free method)</p>'


def trace_html(trace: Mapping[str, Any] | None, row: Mapping[str, Any], thumbs: Thumbnails, prefix: str = "r") -> str:
    if trace and "rounds" in trace:
        return _agent_html(trace, row["video_id"], thumbs, prefix)
    if trace and ("iterations" in trace or "preset" in trace):
        return _videolucy_html(trace, prefix)
    if trace and "tool_calls_log" in trace:
        return _videoarm_html(trace, prefix)
    if trace and "answer_format" in trace:
        return _prompted_html(trace)
    return _generic_html(trace, row)


#: The strip's lanes: what a trace's marks are called, their colour.
SPAN_LANES = (("memories", "memories read", "#4a78c2"), ("periods", "periods searched", "#8e5bb5"),
              ("cells", "verified cells", "#e08a1e"), ("cited", "cited by the answer", "#2c8a5a"))


def time_strip(duration_s: float, evidence: tuple[float, float] | None, marks: Marks, prefix: str | None = None,
               evidence_lane: bool = False) -> str:
    """An SVG strip of the video with one lane per kind of mark the trace has (none drawn empty), the evidence
    window shaded behind them; each mark links to ``#<prefix>-<its step>`` when it names one. With
    ``evidence_lane`` the strip starts with a lane of the evidence window alone (the question's own strip)."""
    duration = max(duration_s, 1e-6)

    def x(t: float) -> float:
        return round(max(0.0, min(1.0, t / duration)) * STRIP_WIDTH, 1)

    def linked(anchor: str | None, shape: str) -> str:
        return f'<a href="#{_esc(prefix)}-{_esc(anchor)}">{shape}</a>' if anchor and prefix else shape

    lanes = [(name, [_span(s) for s in getattr(marks, key)], color) for key, name, color in SPAN_LANES
             if getattr(marks, key)]
    points = [(name, values, color) for name, values, color in
              (("cited frames", [_moment(m) for m in marks.frames], "#c0392b"),
               ("frames sent", [(t, None) for t in marks.seen], "#555")) if values]
    lane_h, label_w, top = 16, 130, 4
    n_lanes = len(lanes) + len(points) + int(evidence_lane)
    height = top + lane_h * max(n_lanes, 1) + 14
    parts = [f'<svg class="strip" viewBox="0 0 {label_w + STRIP_WIDTH + 10} {height}" '
             f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="time strip">',
             f'<g transform="translate({label_w},0)">']
    if evidence is not None:
        a, b = evidence
        w = max(x(b) - x(a), 2)
        parts.append(f'<rect class="evidence" x="{x(a)}" y="0" width="{w}" height="{height - 14}" fill="#3cb371" '
                     f'fill-opacity="0.25"><title>evidence window {a:.1f}–{b:.1f}s</title></rect>')
    y = top
    lane_labels = []
    if evidence_lane:
        parts.append(f'<rect x="0" y="{y}" width="{STRIP_WIDTH}" height="{lane_h - 4}" fill="#eee"/>')
        if evidence is not None:
            parts.append(f'<rect x="{x(evidence[0])}" y="{y}" width="{max(x(evidence[1]) - x(evidence[0]), 2)}" '
                         f'height="{lane_h - 4}" fill="#3cb371"/>')
        lane_labels.append((y, "evidence window"))
        y += lane_h
    for name, spans, color in lanes:
        lane_labels.append((y, name))
        for a, b, label, anchor in spans:
            parts.append(linked(anchor, f'<rect class="mark" x="{x(a)}" y="{y}" width="{max(x(b) - x(a), 2)}" '
                                        f'height="{lane_h - 4}" fill="{color}" fill-opacity="0.7"><title>'
                                        f"{_esc(label)} ({a:.1f}–{b:.1f}s)</title></rect>"))
        y += lane_h
    for name, moments, color in points:
        lane_labels.append((y, name))
        css = "frame" if name == "cited frames" else "seen"
        for t, anchor in moments:
            parts.append(linked(anchor, f'<line class="{css}" x1="{x(t)}" x2="{x(t)}" y1="{y}" y2="{y + lane_h - 4}" '
                                        f'stroke="{color}" stroke-width="{3 if css == "frame" else 1}"><title>'
                                        f"{_esc(name.removesuffix('s'))} {t:.1f}s</title></line>"))
        y += lane_h
    for tick in range(0, 11):
        t = duration * tick / 10
        parts.append(f'<text x="{x(t)}" y="{height - 2}" font-size="10" text-anchor="middle" fill="#555">'
                     f"{t:.0f}s</text>")
    parts.append("</g>")
    parts += [f'<text x="{label_w - 6}" y="{ly + 10}" font-size="11" text-anchor="end" fill="#333">{_esc(n)}</text>'
              for ly, n in lane_labels]
    parts.append("</svg>")
    return "".join(parts)


def reads_no_video(row: Mapping[str, Any]) -> bool:
    """A run that answers from the question and options alone: no memory, no frame, no vision call."""
    return (str(row.get("memory") or "none") == "none" and not row.get("n_vlm_calls")
            and not row.get("frames_seen"))


def strip_html(row: Mapping[str, Any], duration_s: float, evidence: tuple[float, float] | None, marks: Marks,
               prefix: str) -> str:
    """A run's strip, or in words why it has none."""
    if row.get("missing"):
        return '<p class="note no-strip">no prediction</p>'
    if marks.empty():
        if reads_no_video(row):
            return '<p class="note no-strip">no video read: this method answers from the question and options alone</p>'
        return ('<p class="note no-strip">nothing of the video on the timeline: no memory item retrieved, no '
                "period searched, no frame cited</p>")
    return time_strip(duration_s, evidence, marks, prefix)


def _repaired(value: Any) -> bool:
    """Whether any model call recorded in a trace was sent back for repair."""
    if isinstance(value, Mapping):
        if "call" in value and int(value.get("attempts") or 0) > 1:
            return True
        return any(_repaired(v) for v in value.values())
    if isinstance(value, list):
        return any(_repaired(v) for v in value)
    return False


def _flags(row: Mapping[str, Any], trace: Mapping[str, Any] | None = None) -> list[str]:
    """The row's flags (:data:`FLAG_NOTES`), as ``data-flag`` words."""
    flags = [name for name, key in (("missing", "missing"), ("parse-failure", "parse_failure"),
                                    ("error", "backend_error"), ("timeout", "timeout")) if row.get(key)]
    if row.get("timeouts") and "timeout" not in flags:
        flags.append("timeout")
    for name, key in (("forced", "forced_answers"), ("trimmed", "context_trims")):
        if row.get(key):
            flags.append(name)
    if _repaired(trace):
        flags.append("repaired")
    for name, key in (("no-retrieval", "answered_without_retrieval"), ("bypass", "bypasses"),
                      ("search-fallback", "failed_search_calls")):
        if row.get(key):
            flags.append(name)
    return flags


def _flag_spans(flags: Iterable[str]) -> str:
    return "".join(f'<span class="flag" title="{_esc(FLAG_NOTES.get(f, ""))}">{_esc(f.replace("-", " "))}</span>'
                   for f in flags)


#: What the run did on the question, in list order: (``rows.js`` key, column head, prediction column); 0 for
#: methods without such a step.
BEHAVIOUR_FIELDS = (("rounds", "rounds", "rounds"), ("searches", "searches", "searches"),
                    ("memories", "memories", "memories_returned"), ("checks", "checks", "checks"),
                    ("cells", "cells", "cells"), ("frames", "frames", "frames_seen"),
                    ("tools", "tool calls", "tool_calls"), ("qa", "QA calls", "qa_calls"))
#: The column heads of :func:`_behaviour`.
BEHAVIOUR_HEADS = tuple(head for _, head, _ in BEHAVIOUR_FIELDS)
#: The list's columns: (``rows.js`` key and ``sort=`` value, head).
LIST_COLUMNS = (("run", "run"), ("video", "video"), ("qid", "question"), ("text", "question text"),
                ("task", "task"), ("direction", "dir."), ("answer", "answer"), ("pred", "pred."),
                ("correct", "correct"), ("flags", "flags"), *((key, head) for key, head, _ in BEHAVIOUR_FIELDS),
                ("calls", "calls"), ("tokens", "tokens"), ("seconds", "seconds"))


def _behaviour(row: Mapping[str, Any]) -> str:
    return "".join(f'<td class="num">{int(row.get(column) or 0)}</td>' for _, _, column in BEHAVIOUR_FIELDS)


def _calls(row: Mapping[str, Any]) -> int:
    return int(row.get("n_llm_calls") or 0) + int(row.get("n_vlm_calls") or 0)


def _tokens(row: Mapping[str, Any]) -> int:
    return int(row.get("prompt_tokens") or 0) + int(row.get("completion_tokens") or 0)


def _correct(row: Mapping[str, Any]) -> str:
    return "missing" if row.get("missing") else ("yes" if row.get("correct") else "no")


def _verdict(row: Mapping[str, Any]) -> str:
    if row.get("missing"):
        return '<span class="bad">missing</span>'
    return '<span class="ok">✓ right</span>' if row.get("correct") else '<span class="bad">✗ wrong</span>'


def run_anchor(label: str) -> str:
    """The id of a run's section on a question page (its trace steps' ids start with it)."""
    return f"r-{question_slug(label)}"


def category_text(row: Mapping[str, Any]) -> str:
    """A question's categories as shown: all of them (LVBench is multi-label), or the SENRI task type."""
    return ", ".join(row.get("categories") or []) or row["task_type"]


def group_text(row: Mapping[str, Any]) -> str:
    """SENRI's direction, or a native benchmark's split label (Video-MME short / medium / long) where it has none."""
    return row["direction"] or row.get("split") or ""


def row_record(i: int, row: Mapping[str, Any], label: str, flags: Sequence[str]) -> dict[str, Any]:
    """One row of ``rows.js``: the list's sortable values of a (run, question)."""
    return {"i": i, "run": label, "video": row["video_id"], "qid": row["qid"], "task": category_text(row),
            "direction": group_text(row), "answer": row["answer"], "pred": row.get("pred") or "–",
            "correct": _correct(row), "flags": list(flags),
            **{key: int(row.get(column) or 0) for key, _, column in BEHAVIOUR_FIELDS},
            "calls": _calls(row), "tokens": _tokens(row), "seconds": round(float(row.get("latency_s") or 0.0), 2)}


def data_script(records: Sequence[Mapping[str, Any]], runs: Sequence[str],
                questions: Mapping[str, Mapping[str, Any]], order: Sequence[str]) -> str:
    """``rows.js``: the rows, runs and questions every page's script reads."""
    data = {"runs": list(runs), "rows": list(records), "questions": dict(questions), "question_order": list(order),
            "list_columns": [key for key, _ in LIST_COLUMNS], "page_rows": PAGE_ROWS}
    return "window.SENRI_DATA = " + json.dumps(data, ensure_ascii=False, separators=(",", ":")) + ";\n"


def _page(title: str, body: str, script: str = "", scripts: Sequence[str] = ()) -> str:
    tags = "".join(f'<script src="{_esc(s)}"></script>' for s in scripts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}{tags}"
            + (f"<script>{script}</script>" if script else "") + "</body></html>\n")


#: A benchmark's glossary (:attr:`senri.benchmarks.base.Benchmark.glossary`): ``(title, {code: meaning})`` groups.
Glossary = Sequence[tuple[str, Mapping[str, str]]]


def glossary_names(glossary: Glossary) -> dict[str, str]:
    """Every code of a glossary → its meaning (a question's task type and group are looked up here)."""
    return {code: name for _, names in glossary for code, name in names.items()}


def glossary_html(glossary: Glossary = ()) -> str:
    """The benchmark's codes (SENRI-Bench: task types and directions) and the flags, folded."""
    groups = "".join('<dl class="glossary">' + "".join(f"<dt>{_esc(code)}</dt><dd>{_esc(name)}</dd>"
                                                       for code, name in names.items()) + "</dl>"
                     for _, names in glossary)
    flags = "".join(f"<dt>{_esc(f.replace('-', ' '))}</dt><dd>{_esc(note)}</dd>" for f, note in FLAG_NOTES.items())
    titles = ", ".join(title for title, _ in glossary)
    return _details(f"codes: {titles} and flags" if titles else "codes: flags",
                    f'{groups}<dl class="glossary flags">{flags}</dl>', open_=False)


def _select(key: str, name: str) -> str:
    return f'<label>{name} <select id="f-{key}"><option value="">all</option></select></label>'


def _sortable(columns: Iterable[tuple[str, str]]) -> str:
    return "".join(f'<th data-key="{_esc(key)}">{_esc(head)}</th>' for key, head in columns)


@dataclass
class Shown:
    """A (run, question) row with what every page shows of it, worked out once: the run's label, the parsed
    trace, its marks on the timeline and the row's flags."""

    row: Mapping[str, Any]
    label: str
    trace: Mapping[str, Any] | None
    marks: Marks
    flags: list[str]


def shown_rows(rows: Sequence[Mapping[str, Any]], labels: Mapping[tuple[str, str, str], str]) -> list[Shown]:
    out = []
    for row in rows:
        trace = json.loads(row["trace"]) if row.get("trace") else None
        out.append(Shown(row, labels[(row["method"], row["model"], row["memory"])], trace, trace_marks(trace),
                         _flags(row, trace)))
    return out


def run_summary_html(shown: Sequence[Shown]) -> str:
    """One line per run above the list: accuracy, and how many of its questions carry each flag."""
    per_run: dict[str, list[Shown]] = {}
    for item in shown:
        per_run.setdefault(item.label, []).append(item)
    heads = ("run", "questions", "accuracy", "no retrieval", "forced", "trimmed", "repaired", "errors",
             "parse failures", "missing")
    body = []
    for run in sorted(per_run):
        mine = per_run[run]
        n, right = len(mine), sum(_correct(item.row) == "yes" for item in mine)

        def count(flag: str) -> str:
            k = sum(flag in item.flags for item in mine)
            link = f'index.html?run={html.escape(run, quote=True)}&amp;flag={flag}'
            return f'<a href="{link}">{k}/{n}</a>' if k else f"0/{n}"

        no_retrieval = count("no-retrieval") if str(mine[0].row.get("memory") or "none") != "none" else "–"
        body.append(f'<tr data-run="{_esc(run)}"><td><a href="index.html?run={html.escape(run, quote=True)}">'
                    f"{_esc(run)}</a></td><td class=\"num\">{n}</td>"
                    f'<td class="num">{right}/{n} ({100 * right / max(n, 1):.1f} %)</td>'
                    f'<td class="num no-retrieval">{no_retrieval}</td>'
                    + "".join(f'<td class="num">{count(f)}</td>'
                              for f in ("forced", "trimmed", "repaired", "error", "parse-failure", "missing"))
                    + "</tr>")
    return (f'<table id="runs"><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr>{"".join(body)}</table>'
            '<p class="note">No retrieval: questions a memory method answered with no memory item retrieved (– for '
            "methods without a memory). A count links to those rows.</p>")


#: Rows (list) or questions (grid) a view shows at once; ``rows=`` in the address changes it, ``page=`` picks the
#: page. A 900-video benchmark's 14 runs are 37,800 rows: all at once, the list took seconds to open and to sort.
PAGE_ROWS = 100
#: The page controls of both views (:func:`view` in ``browser.js`` fills them in, hidden on a single page).
PAGER = ('<p class="pager" hidden><button id="page-prev" type="button">← previous page</button> '
         '<span id="page-at" class="note"></span> <button id="page-next" type="button">next page →</button></p>')


def index_page(rows: Sequence[Mapping[str, Any]], labels: Mapping[tuple[str, str, str], str],
               report_href: str, shown: Sequence[Shown] | None = None, glossary: Glossary = ()) -> str:
    """The list (``index.html``). ``rows`` are the scored rows with their prediction columns; ``shown`` the rows
    as :func:`shown_rows` gives them (worked out here if not given). The rows themselves are in ``list.js``
    (:func:`list_script`)."""
    shown = shown if shown is not None else shown_rows(rows, labels)
    filters = "".join(_select(k, n) for k, n in (("run", "run"), ("video", "video"), ("task", "task type"),
                                                 ("direction", "direction"), ("correct", "correct"), ("flag", "flag")))
    page_body = (f'<p><a href="{report_href}">← report</a> · <a href="grid.html">question × run grid</a></p>'
                 f'<h1>Questions</h1><div id="warnings" class="warning" hidden></div>'
                 f"<h2>Per run</h2>{run_summary_html(shown)}"
                 f'<h2>Every answer</h2><p class="filters">{filters}<label>text <input id="f-q" type="search" '
                 'placeholder="question id or text"></label></p><p id="shown" class="note"></p>'
                 f'{PAGER}<table id="questions"><thead><tr>{_sortable(LIST_COLUMNS)}</tr></thead>'
                 "<tbody></tbody></table>"
                 '<p class="note">Click a column head to sort. The address holds the filters, the sort and the page, '
                 "e.g. <code>index.html?task=OC&amp;correct=no&amp;sort=seconds&amp;order=desc&amp;page=2</code> "
                 f"({PAGE_ROWS} rows a page; <code>rows=500</code> shows more); a question opened from here walks "
                 "the rows shown with previous / next.</p>" + glossary_html(glossary))
    return _page("senri question browser", page_body, "SENRI.list();", ("rows.js", "list.js", "browser.js"))


def list_row_html(i: int, item: Shown, texts: Mapping[str, str]) -> str:
    """One row of the list, as ``list.js`` holds it (the page inserts only the rows of the page it shows)."""
    row, run, flags = item.row, item.label, item.flags
    page = question_href(row["qid"])
    return (f'<tr data-i="{i}" data-run="{_esc(run)}" data-video="{_esc(row["video_id"])}" '
            f'data-task="{_esc(category_text(row))}" data-direction="{_esc(group_text(row))}" '
            f'data-correct="{_correct(row)}" data-flag="{_esc(" ".join(flags))}">'
            f"<td>{_esc(run)}</td><td>{_esc(row['video_id'])}</td>"
            f'<td><a class="question" data-page="{page}" href="{page}">{_esc(row["qid"])}</a></td>'
            f'<td class="qtext">{_esc(texts.get(row["qid"], ""))}</td>'
            f"<td>{_esc(category_text(row))}</td><td>{_esc(group_text(row))}</td><td>{_esc(row['answer'])}</td>"
            f"<td>{_esc(row.get('pred') or '–')}</td><td>{_verdict(row)}</td>"
            f"<td>{_flag_spans(flags)}</td>{_behaviour(row)}"
            f'<td class="num">{_calls(row)}</td><td class="num">{_tokens(row)}</td>'
            f'<td class="num">{float(row.get("latency_s") or 0.0):.2f}</td></tr>')


def list_script(shown: Sequence[Shown], texts: Mapping[str, str]) -> str:
    """``list.js``: every row of the list as HTML, by position; only the list loads it (the question pages'
    previous / next read ``rows.js``). As text in a script, 37,800 rows are parsed in a blink, where as table
    rows of the page they made the list unusable (issue 53)."""
    rows = [list_row_html(i, item, texts) for i, item in enumerate(shown)]
    return "window.SENRI_LIST = " + json.dumps(rows, ensure_ascii=False, separators=(",", ":")) + ";\n"


def grid_page(questions: Sequence[Mapping[str, Any]], cells: Mapping[str, Mapping[str, Mapping[str, Any]]],
              runs: Sequence[str], report_href: str, glossary: Glossary = ()) -> str:
    """The grid (``grid.html``): one row per question that has a prediction row, one cell per run."""
    filters = "".join(_select(k, n) for k, n in (("video", "video"), ("task", "task type"),
                                                 ("direction", "direction"), ("outcome", "outcome"),
                                                 ("right", "right:"), ("wrong", "wrong:")))
    heads = (_sortable((("qid", "question"), ("video", "video"), ("task", "task"), ("direction", "dir."),
                        ("answer", "answer"), ("text", "question text")))
             + "".join(f"<th>{_esc(run)}</th>" for run in runs) + '<th data-key="right">runs right</th>')
    body = []
    for q in questions:
        by_run = cells.get(q["qid"])
        if not by_run:
            continue
        page = question_href(q["qid"])
        right = sum(1 for r in by_run.values() if _correct(r) == "yes")
        row_cells = []
        for run in runs:
            r = by_run.get(run)
            outcome = _correct(r) if r is not None else "missing"
            mark = {"yes": "✓", "no": "✗", "missing": "–"}[outcome]
            letter = (r.get("pred") or "–") if r is not None else "–"
            row_cells.append(f'<td class="cell {outcome}" data-run="{_esc(run)}" data-correct="{outcome}">'
                             f'<a class="question" data-page="{page}" data-anchor="#{run_anchor(run)}" '
                             f'href="{page}#{run_anchor(run)}">{_esc(letter)} {mark}</a></td>')
        body.append(f'<tr data-qid="{_esc(q["qid"])}"><td><a class="question" data-page="{page}" href="{page}">'
                    f"{_esc(q['qid'])}</a></td><td>{_esc(q['video_id'])}</td><td>{_esc(category_text(q))}</td>"
                    f"<td>{_esc(group_text(q))}</td><td>{_esc(q['answer'])}</td>"
                    f'<td class="qtext">{_esc(q["question"])}</td>{"".join(row_cells)}'
                    f'<td class="num">{right}/{len(runs)}</td></tr>')
    page_body = (f'<p><a href="{report_href}">← report</a> · <a href="index.html">every answer (list)</a></p>'
                 f'<h1>Questions × runs</h1><div id="warnings" class="warning" hidden></div>'
                 f'<p class="filters">{filters}<label>text <input id="f-q" type="search" '
                 'placeholder="question id or text"></label></p><p id="shown" class="note"></p>'
                 f'{PAGER}<table id="grid" class="grid"><thead><tr>{heads}</tr></thead><tbody>{"".join(body)}</tbody></table>'
                 '<p class="note">Each cell: the run\'s letter, ✓ right, ✗ wrong, – no prediction (counted wrong). '
                 "Outcome “runs disagree” keeps the questions some runs got right and others wrong; “right:” and "
                 "“wrong:” pick any two runs (e.g. <code>grid.html?right=senri_agent/m&amp;wrong=memory_search/m</code>: "
                 "the questions the first won over the second).</p>" + glossary_html(glossary))
    return _page("senri question grid", page_body, "SENRI.grid();", ("rows.js", "browser.js"))


def question_page(question: Mapping[str, Any], runs: Sequence[Shown], duration_s: float, thumbs: Thumbnails,
                  names: Mapping[str, str] | None = None) -> str:
    evidence = None
    if question.get("evidence_start_s") is not None and question.get("evidence_end_s") is not None:
        evidence = (float(question["evidence_start_s"]), float(question["evidence_end_s"]))
    options = "".join(f'<li class="{"truth" if letter == question["answer"] else ""}">{letter}. {_esc(text)}</li>'
                      for letter, text in zip(OPTION_LETTERS, question_options(question)))
    strips = "".join(
        f'<div class="strip-run" data-run="{_esc(x.label)}"><h4><a href="#{run_anchor(x.label)}">{_esc(x.label)}</a>: '
        f'{_esc(x.row.get("pred") or "–")} {_verdict(x.row)}</h4>'
        f"{strip_html(x.row, duration_s, evidence, x.marks, run_anchor(x.label))}</div>" for x in runs)
    window = (f"{evidence[0]:.1f}–{evidence[1]:.1f}s" if evidence else "not given")
    middle = (thumbs.html(question["video_id"], (evidence[0] + evidence[1]) / 2, "middle of the evidence window")
              if evidence else "")
    side = "".join(
        f'<tr><td><a href="#{run_anchor(x.label)}">{_esc(x.label)}</a></td><td>{_esc(x.row.get("pred") or "–")}</td>'
        f"<td>{_verdict(x.row)}</td><td>{_flag_spans(x.flags)}</td>"
        f'{_behaviour(x.row)}<td class="num">{_calls(x.row)}</td><td class="num">{_tokens(x.row)}</td>'
        f'<td class="num">{float(x.row.get("latency_s") or 0.0):.2f}</td></tr>' for x in runs)
    columns = []
    for x in runs:
        r, trace, label = x.row, x.trace, x.label
        error = f'<p class="flag">error: {_esc(r["error"])}</p>' if r.get("error") else ""
        timeline = trace_html(trace, r, thumbs, run_anchor(label)) if not r.get("missing") else "no prediction"
        columns.append(
            f'<section class="run" id="{run_anchor(label)}" data-run="{_esc(label)}"><h3>{_esc(label)}: '
            f'{_esc(r.get("pred") or "–")} {_verdict(r)}</h3>{error}<div class="timeline">{timeline}</div></section>')
    names = names or {}
    task = names.get(question["task_type"], "")
    body = (f'<p class="nav"><a id="back" href="../index.html">← all questions</a> · '
            f'<a id="prev" class="disabled">← previous</a> <span id="position" class="note"></span> '
            f'<a id="next" class="disabled">next →</a> · <a href="../grid.html">grid</a> · '
            f'<a href="../../index.html">report</a></p><div id="warnings" class="warning" hidden></div>'
            f"<h1>{_esc(question['qid'])}</h1><p>video <b>{_esc(question['video_id'])}</b> · "
            f'<span title="{_esc(task)}">{_esc(category_text(question))}</span> · '
            f'<span title="{_esc(names.get(question["direction"], ""))}">{_esc(group_text(question))}</span>'
            f" ({_esc(task)}) · evidence window {window}</p>"
            f"<h2>{_esc(question['question'])}</h2><ul class=\"options\">{options}</ul>{middle}"
            f"<h2>Predictions</h2><table id=\"predictions\"><tr><th>run</th><th>prediction</th><th>correct</th>"
            f"<th>flags</th>{''.join(f'<th>{h}</th>' for h in BEHAVIOUR_HEADS)}<th>calls</th><th>tokens</th>"
            f"<th>seconds</th></tr>{side}</table>"
            f"<h2>Where each run looked</h2><p class=\"note\">The video from 0 to {duration_s:.0f} s; the green band "
            f"is the evidence window. Hover a mark for its interval, click it for its trace step.</p>"
            f'<div class="strip-question">{time_strip(duration_s, evidence, Marks(), evidence_lane=True)}</div>'
            f'{strips}<h2>Traces</h2><div class="runs">{"".join(columns)}</div>')
    return _page(f"{question['qid']} · senri", body,
                 IMAGE_CHECK_SCRIPT + f"SENRI.question({json.dumps(question['qid'])});", ("../rows.js", "../browser.js"))


def build_browser(scored: pl.DataFrame, predictions: pl.DataFrame, questions: pl.DataFrame,
                  videos: pl.DataFrame | None, folder: str | Path, report_href: str = "../index.html",
                  glossary: Glossary = ()) -> Path:
    """Write the browser under ``folder`` (``<out>/report/questions``); returns its ``index.html``.

    ``scored`` is :func:`senri.aggregate.score`'s table (one row per run and question, missing ones
    included); ``predictions`` the prediction rows with their traces and costs; ``videos`` the videos table
    (the file each run read and its duration; without it the strip spans the latest time a trace names and
    no thumbnail is drawn). ``report_href``: the report page, relative to ``folder``; ``glossary``: the
    benchmark's codes (:attr:`senri.benchmarks.base.Benchmark.glossary`), shown folded and as tooltips."""
    folder = Path(folder)
    pages = folder / "q"
    pages.mkdir(parents=True, exist_ok=True)
    extra = [c for c in predictions.columns if c not in scored.columns or c in RUN_KEYS or c == "qid"]
    native = [c for c in ("categories", "split") if c in questions.columns and c not in scored.columns]
    scored = scored.join(questions.select("qid", *native), on="qid", how="left") if native else scored
    rows = list(scored.join(predictions.select(extra), on=[*RUN_KEYS, "qid"], how="left").iter_rows(named=True))
    labels = run_labels(scored)
    runs = list(dict.fromkeys(labels.values()))
    paths = dict(zip(videos["video_id"], videos["path"])) if videos is not None else {}
    durations = dict(zip(videos["video_id"], videos["duration_s"])) if videos is not None else {}
    thumbs = Thumbnails(paths, pages / "frames")
    shown = shown_rows(rows, labels)
    by_question: dict[str, list[Shown]] = {}
    latest: dict[str, float] = {}
    for item in shown:
        qid = item.row["qid"]
        by_question.setdefault(qid, []).append(item)
        latest[qid] = max(latest.get(qid, 0.0), item.marks.latest())
        thumbs.want(item.row["video_id"], [t for t, _ in item.marks.frames])
    question_rows = list(questions.iter_rows(named=True))
    for q in question_rows:
        if q.get("evidence_start_s") is not None and q.get("evidence_end_s") is not None:
            thumbs.want(q["video_id"], [(float(q["evidence_start_s"]) + float(q["evidence_end_s"])) / 2])
    thumbs.decode()
    written = 0
    for q in question_rows:
        mine = by_question.get(q["qid"], [])
        if not mine:
            continue
        duration = float(durations.get(q["video_id"])
                         or max(float(q.get("evidence_end_s") or 0.0), latest.get(q["qid"], 0.0)) or 1.0)
        (pages / f"{question_slug(q['qid'])}.html").write_text(question_page(q, mine, duration, thumbs,
                                                                                glossary_names(glossary)))
        written += 1
    texts = {q["qid"]: q["question"] for q in question_rows}
    index = folder / "index.html"
    index.write_text(index_page(rows, labels, report_href, shown, glossary))
    records = [row_record(i, item.row, item.label, item.flags) for i, item in enumerate(shown)]
    cells: dict[str, dict[str, Mapping[str, Any]]] = {}
    for item in shown:
        cells.setdefault(item.row["qid"], {})[item.label] = item.row
    (folder / "grid.html").write_text(grid_page(question_rows, cells, runs, report_href, glossary))
    info = {q["qid"]: {"text": q["question"], "video": q["video_id"], "task": category_text(q),
                       "direction": group_text(q), "answer": q["answer"], "page": f"{question_slug(q['qid'])}.html"}
            for q in question_rows if q["qid"] in by_question}
    order = [q["qid"] for q in question_rows if q["qid"] in by_question]
    (folder / "rows.js").write_text(data_script(records, runs, info, order))
    (folder / "list.js").write_text(list_script(shown, texts))
    (folder / "browser.js").write_text(BROWSER_JS)
    log.info("question browser: %d row(s), %d question page(s), %d thumbnail(s) in %s", len(rows), written,
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
