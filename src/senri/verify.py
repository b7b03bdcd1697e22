"""Target-guided visual checks (SENRI-Agent's ``verify``): check validation, adaptive temporal cells, the
verifier's report and the mapping of its citations back to the source video. Pure functions, no I/O.

A check is ``(target_context, objective, requirements[])`` plus absolute windows, a sampling rate ``f``
(clamped to [0.05, 4] frames/s) and a frame budget ``B`` (``frame_budget``, clamped to [8, 64]; when it is
omitted the ``preset`` decides: sparse = 8, dense = 16). Windows may be any interval inside the video's valid
range [0, duration] (candidate intervals are references, not limits). Each window [a, b] with D = b − a > 0
is split independently into cells:

    τ = min(D, B / f);  L = max(1, ⌈2D/τ − 1⌉);  δ = 2D / (L + 1);
    cell r (1-based) = [a + (r − 1)·δ/2, a + (r − 1)·δ/2 + δ]

so the first cell starts at a, the last ends at b, and neighbours overlap by 50 %. Without parallel
verifiers (the ``no_pv`` ablation) a check is one "cell" over all its windows (overlapping ones merged, so its
frames are strictly increasing in time), sampled at f and capped at B.

Choice-blindness is enforced here too: what would leak the choice structure — the question, options listed side
by side, a distinctive option copied whole — is removed from a check (and the removal recorded); a lone number
or common word stays. A check left without a target or objective is refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

F_MIN, F_MAX = 0.05, 4.0
B_MIN, B_MAX = 8, 64
PRESETS = {"sparse": 8, "dense": 16}
MAX_CHECKS = 3
REDACTED = "[…]"


@dataclass(frozen=True)
class Check:
    target_context: str
    objective: str
    requirements: tuple[str, ...]   # R2, R3, … (R1 is the target context)
    windows: tuple[tuple[float, float], ...]
    fps: float
    budget: int
    adjustments: tuple[str, ...] = ()  # what validation clamped, clipped, stripped or dropped
    candidate_refs: tuple[str, ...] = ()
    position: int = 1                  # 1-based place in the controller's list (how problems name it)

    def requirement_ids(self) -> list[tuple[str, str]]:
        """(R-id, condition): R1 is the target context, the listed requirements follow."""
        return [("R1", self.target_context)] + [(f"R{i + 2}", r) for i, r in enumerate(self.requirements)]


@dataclass(frozen=True)
class Cell:
    check: int
    window: int          # -1: the whole check (no_pv)
    start_s: float
    end_s: float
    spans: tuple[tuple[float, float], ...] = ()  # the intervals sampled; () = [start_s, end_s]

    def intervals(self) -> tuple[tuple[float, float], ...]:
        return self.spans or ((self.start_s, self.end_s),)


def cells_for_window(a: float, b: float, fps: float, budget: int) -> list[tuple[float, float]]:
    """The spec's adaptive cells of one window (empty for D ≤ 0)."""
    duration = b - a
    if duration <= 0:
        return []
    tau = min(duration, budget / fps)
    count = max(1, math.ceil(2 * duration / tau - 1 - 1e-9))
    delta = 2 * duration / (count + 1)
    return [(a + (r - 1) * delta / 2, a + (r - 1) * delta / 2 + delta) for r in range(1, count + 1)]


def merge_spans(windows: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Windows as sorted, disjoint spans (overlapping or touching windows merged), so frames sampled over them
    are strictly increasing in time and no moment is sampled twice."""
    merged: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in windows if b > a):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return tuple((a, b) for a, b in merged)


def check_cells(checks: Sequence[Check], split: bool = True) -> list[Cell]:
    """Cells of every check, chronological within a check. ``split=False`` (no parallel verifiers) gives one
    cell per *check*, spanning all its windows: one verifier looks at the whole check."""
    out = []
    for k, check in enumerate(checks):
        if not split:
            spans = merge_spans(check.windows)
            if spans:
                out.append(Cell(k, -1, spans[0][0], spans[-1][1], spans))
            continue
        parts = []
        for w, (a, b) in enumerate(check.windows):
            parts += [(s, e, w) for s, e in cells_for_window(a, b, check.fps, check.budget)]
        out += [Cell(k, w, s, e) for s, e, w in sorted(parts)]
    return out


def cap_cells(cells: Sequence[Cell], max_cells: int) -> tuple[list[Cell], list[dict[str, int]]]:
    """At most ``max_cells`` cells in one verify round (a safety cap beyond the paper: a 3 h window at f = 4,
    B = 8 would ask for ~10,800 verifier calls). The allowance is shared fairly between checks (a check that
    needs fewer leaves the rest to the others) and each capped check keeps cells spread evenly over its own,
    first and last included. Returns the kept cells and one record per capped check."""
    per_check: dict[int, list[Cell]] = {}
    for cell in cells:
        per_check.setdefault(cell.check, []).append(cell)
    if len(cells) <= max_cells:
        return list(cells), []
    quota: dict[int, int] = {}
    left = max_cells
    by_need = sorted(per_check, key=lambda k: len(per_check[k]))
    for position, k in enumerate(by_need):  # water-filling: small checks take all they need
        quota[k] = min(len(per_check[k]), left // (len(by_need) - position))
        left -= quota[k]
    kept, caps = [], []
    for k, mine in per_check.items():
        n, q = len(mine), quota[k]
        if q >= n:
            kept += mine
            continue
        picks = sorted({round(i * (n - 1) / (q - 1)) for i in range(q)}) if q > 1 else ([0] if q == 1 else [])
        kept += [mine[i] for i in picks]
        caps.append({"check": k, "cells": n, "kept": len(picks)})
    return kept, caps


def _union_length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(b - a for a, b in merge_spans(intervals))


def window_coverage(checks: Sequence[Check], kept: Sequence[Cell]) -> list[dict[str, Any]]:
    """Per check and window: the seconds asked for and the seconds the kept cells cover (their union clipped
    to the window), so a capped check says how much of its window was seen. ``check`` is the check's place
    in the controller's list (1-based); seconds are rounded to 0.1 s."""
    out = []
    for k, check in enumerate(checks):
        mine = [span for c in kept if c.check == k for span in c.intervals()]
        for a, b in check.windows:
            seen = _union_length([(max(a, s), min(b, e)) for s, e in mine if min(b, e) > max(a, s)])
            out.append({"check": check.position, "window": [a, b], "requested_s": round(b - a, 1),
                        "seen_s": round(seen, 1)})
    return out


def requested_and_seen_s(checks: Sequence[Check], kept: Sequence[Cell]) -> tuple[float, float]:
    """Seconds of window the checks asked for and the kept cells covered, overlapping windows of a check
    counted once."""
    requested = sum(_union_length(check.windows) for check in checks)
    seen = 0.0
    for k, check in enumerate(checks):
        spans = merge_spans(check.windows)
        mine = [span for c in kept if c.check == k for span in c.intervals()]
        seen += _union_length([(max(a, s), min(b, e)) for a, b in spans for s, e in mine if min(b, e) > max(a, s)])
    return requested, seen


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


#: Words that do not make an option distinctive (articles, prepositions, pronouns, connectives).
_FUNCTION_WORDS = frozenset(
    "a an the my me i his her their its our your this that these those to of in on at by for with from into onto "
    "and or is was were are be".split())
#: What stands between options listed side by side: a separator or connective ("3, 4 or 5", "left/right"),
#: quotes or brackets around them; mere space is not a list ("front left" with options front and left).
_QUOTES = r"[\s\"'()\[\]]*"
_SEPARATOR = r"(?:[,;/|]|(?<!\w)(?:or|and|nor|vs\.?|versus)(?!\w))"
_BETWEEN_OPTIONS = re.compile(f"{_QUOTES}{_SEPARATOR}(?:{_QUOTES}{_SEPARATOR})*{_QUOTES}", re.IGNORECASE)
#: A long name: one word of at least this many letters.
LONG_NAME = 12
STRIPPED = "question/option text removed"
REFUSED = "refused"


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """``phrase`` matched word-bounded, case- and punctuation-insensitively."""
    words = normalised(phrase).split()
    return re.compile(r"(?<!\w)" + r"[\W_]+".join(re.escape(w) for w in words) + r"(?!\w)", re.IGNORECASE)


def distinctive_option(option: str) -> bool:
    """Whether an option copied whole into a check would give the option away: several content words (three
    or more), two content words one of which is capitalised (a name: "the Kite Shop"), or a long name (one
    word of :data:`LONG_NAME` letters or more). A lone number or one or two common words is not: a counting
    or relation check needs "3" or "left" in its own text."""
    words = [w for w in re.findall(r"[^\W_]+", option) if w.lower() not in _FUNCTION_WORDS]
    if any(w.isdigit() for w in words) and len(words) < 3:
        return False
    return (len(words) >= 3 or (len(words) == 2 and any(w[0].isupper() for w in words))
            or any(len(w) >= LONG_NAME for w in words))


def strip_choice_text(text: str, question: str, options: Sequence[str]) -> tuple[str, list[str]]:
    """``text`` without what would leak the choice structure to a choice-blind verifier; returns the cleaned
    text and what was removed. Removed are: the question; two or more different options side by side (only
    punctuation or "or" / "and" between them: "3, 4 or 5", "left or right"), the whole list at once; and a
    distinctive option (:func:`distinctive_option`) copied whole. A lone number or common word that happens
    to be an option stays: "count the boxes on the 3 shelf rows" keeps its 3. Matching is word-bounded, case-
    and punctuation-insensitive."""
    removed: list[str] = []
    if normalised(question):
        text, count = _phrase_pattern(question).subn(REDACTED, text)
        if count:
            removed.append(question)
    # Every occurrence of an option; where two overlap, the longer wins ("red" inside "red car").
    found = sorted(((m.start(), m.end(), k) for k, option in enumerate(options) if normalised(option)
                    for m in _phrase_pattern(option).finditer(text)), key=lambda s: (s[0], -(s[1] - s[0])))
    spans: list[tuple[int, int, int]] = []
    for start, end, k in found:
        if spans and start < spans[-1][1]:
            continue
        spans.append((start, end, k))
    # Runs of options separated only by connectives: a listed choice set.
    runs: list[list[tuple[int, int, int]]] = []
    for span in spans:
        if runs and _BETWEEN_OPTIONS.fullmatch(text[runs[-1][-1][1]:span[0]]):
            runs[-1].append(span)
        else:
            runs.append([span])
    cuts = []
    for run in runs:
        if len({k for _, _, k in run}) >= 2:
            cuts.append((run[0][0], run[-1][1]))
        else:
            cuts += [(s, e) for s, e, k in run if distinctive_option(options[k])]
    removed += [text[start:end] for start, end in cuts]
    for start, end in reversed(cuts):
        text = text[:start] + REDACTED + text[end:]
    return text.strip(), removed


def validation_counts(checks: Sequence["Check"], problems: Sequence[str]) -> tuple[int, int]:
    """(stripped, refused) of one :func:`validate_checks` call, for the run-health counts: checks whose text
    lost question or option text (kept or refused), and checks refused (no target or objective left, no
    window inside the video, not an object)."""
    stripped = sum(1 for c in checks if any(STRIPPED in a for a in c.adjustments))
    stripped += sum(1 for p in problems if REFUSED in p and "may not copy" in p)
    refused = sum(1 for p in problems if re.match(r"check \d+: ", p))
    return stripped, refused


def validate_checks(raw: Any, duration_s: float, question: str = "",
                    options: Sequence[str] = ()) -> tuple[list[Check], list[str]]:
    """Checks from a controller's ``checks`` list: fields coerced, question/option text stripped (choice-blind),
    f and B clamped, windows clipped to the valid range [0, duration]; at most 3 checks. Returns (checks,
    problems); each adjustment is recorded on its check, and the caller reports both to the controller."""
    problems: list[str] = []
    if not isinstance(raw, list) or not raw:
        return [], ["verify needs a non-empty list of checks"]
    if len(raw) > MAX_CHECKS:
        problems.append(f"{len(raw)} checks asked, the first {MAX_CHECKS} kept")
    checks = []
    for i, item in enumerate(raw[:MAX_CHECKS]):
        if not isinstance(item, Mapping):
            problems.append(f"check {i + 1}: not an object")
            continue
        adjustments: list[str] = []

        def blind(name: str, value: Any) -> str:
            text, removed = strip_choice_text(str(value or "").strip(), question, options)
            if removed:
                adjustments.append(f"{name}: {STRIPPED} ({'; '.join(removed)})")
            return "" if not text.replace(REDACTED, "").strip(" .,;:-") else text

        target = blind("target_context", item.get("target_context"))
        objective = blind("objective", item.get("objective"))
        requirements = tuple(r for r in (blind("requirement", r) for r in (item.get("requirements") or [])) if r)
        if not target or not objective:
            stripped = [a for a in adjustments if "removed" in a]
            problems.append(f"check {i + 1}: {REFUSED}: target_context and objective are required"
                            + (" and may not copy the question or option text" if stripped else ""))
            continue
        fps = _number(item.get("fps", item.get("f")))
        if fps is None:
            fps = 1.0
            adjustments.append("f missing: 1.0")
        elif not F_MIN <= fps <= F_MAX:
            clamped = min(max(fps, F_MIN), F_MAX)
            adjustments.append(f"f {fps:g} clamped to {clamped:g}")
            fps = clamped
        budget_value = _number(item.get("frame_budget", item.get("budget", item.get("B"))))
        if budget_value is None:
            preset = str(item.get("preset") or "sparse").strip().lower()
            if preset not in PRESETS:
                adjustments.append(f"preset {preset!r} unknown: sparse")
                preset = "sparse"
            budget = PRESETS[preset]
            adjustments.append(f"B from preset {preset}: {budget}")
        else:
            budget = int(round(budget_value))
            if not B_MIN <= budget <= B_MAX:
                clamped_b = min(max(budget, B_MIN), B_MAX)
                adjustments.append(f"B {budget} clamped to {clamped_b}")
                budget = clamped_b
        windows = []
        for window in item.get("windows") or []:
            if isinstance(window, Mapping):
                window = [window.get("start_sec", window.get("start")), window.get("end_sec", window.get("end"))]
            if not isinstance(window, (list, tuple)) or len(window) != 2:
                adjustments.append(f"window {window!r} dropped: not [start, end]")
                continue
            a, b = _number(window[0]), _number(window[1])
            if a is None or b is None:
                adjustments.append(f"window {window!r} dropped: not numbers")
                continue
            clipped = (max(0.0, min(a, b)), min(duration_s, max(a, b)))
            if clipped[1] <= clipped[0]:
                adjustments.append(f"window [{a:g}, {b:g}] dropped: outside the video [0, {duration_s:g}]")
                continue
            if clipped != (a, b):
                adjustments.append(f"window [{a:g}, {b:g}] clipped to [{clipped[0]:g}, {clipped[1]:g}]")
            windows.append(clipped)
        if not windows:
            problems.append(f"check {i + 1}: no window inside the video")
            continue
        refs = tuple(str(r) for r in (item.get("candidate_refs") or []) if str(r).strip())
        checks.append(Check(target, objective, requirements, tuple(windows), fps, budget, tuple(adjustments), refs,
                            i + 1))
    return checks, problems


def cell_times(cell: Cell, fps: float, budget: int) -> list[float]:
    """Frame times in a cell: every 1/f seconds from the start of each of its intervals, capped at B (spread
    uniformly over the intervals' total length if more)."""
    spans = cell.intervals()
    counts = [max(1, math.floor((b - a) * fps + 1e-9)) for a, b in spans]
    if sum(counts) <= budget:
        return [a + k / fps for (a, _), n in zip(spans, counts) for k in range(n)]
    total = sum(b - a for a, b in spans)
    times = []
    for k in range(budget):
        offset = (k + 0.5) * total / budget
        for a, b in spans:
            if offset <= b - a:
                times.append(a + offset)
                break
            offset -= b - a
    return times


def _seconds(value: float) -> str:
    return f"{round(value, 2):g}"


def source_timing(cell: Cell, frame_times: Sequence[float], fps: float, unit: str = "frame") -> str:
    """Where a cell's frames come from in the source video, for the verifier's orientation (the paper: it sees
    the timestamps): per sampled span, its absolute interval, which carrier frames it gave and the sampling
    interval, so frame k ≈ source time a + (k − k0)·Δ. Citations stay on the carrier timeline (V4). ``unit``
    names what was sampled (``moment`` for a text-only verifier, which reads no frames)."""
    parts = []
    first = 0
    for a, b in cell.intervals():
        inside = [t for t in frame_times[first:] if t <= b + 1e-6]
        if not inside:
            continue
        last = first + len(inside) - 1
        step = (inside[-1] - inside[0]) / (len(inside) - 1) if len(inside) > 1 else 1 / fps
        index = "k" if first == 0 else f"(k − {first})"
        parts.append(f"[{_seconds(a)}, {_seconds(b)}] s gave {unit}s {first}–{last}, about one every "
                     f"{_seconds(step)} s ({unit} k ≈ source time {_seconds(inside[0])} + {index} × "
                     f"{_seconds(step)} s)")
        first = last + 1
    return "; ".join(parts)


@dataclass
class Report:
    """One verifier's report with its citations mapped to absolute times; ``gaps`` are requirements without a
    finding and a valid citation. ``requirements`` keeps the check's (R-id, text) pairs so every summary says
    what each R-id stands for."""

    report_id: str
    check: int
    cell: tuple[float, float]
    fields: dict[str, Any]
    evidence_s: list[float]
    requirement_evidence_s: dict[str, list[float]]
    gaps: list[str]
    error: str | None = None
    evidence_frames: list[int] = field(default_factory=list)  # indexes into the cell's frames
    requirements: list[tuple[str, str]] = field(default_factory=list)
    objective: str = ""
    position: int = 0   # the check's place in the controller's list (1-based); 0: unknown

    def record(self) -> dict[str, Any]:
        """The report as data for the trace (the question browser draws its cell and evidence frames on the
        video's time strip): the summary's content with times as numbers."""
        return {"report_id": self.report_id, "check": self.position or self.check + 1,
                "cell": [round(self.cell[0], 3), round(self.cell[1], 3)], "error": self.error,
                "requirements": [list(r) for r in self.requirements], "fields": self.fields,
                "evidence_s": [round(t, 3) for t in self.evidence_s],
                "requirement_evidence_s": {k: [round(t, 3) for t in v] for k, v in self.requirement_evidence_s.items()},
                "gaps": list(self.gaps)}

    def summary(self) -> str:
        """The report as the controller and the updater read it: which check, what each R-id means, the
        findings, the explanation, the stated ambiguity and the evidence still needed."""
        f = self.fields
        lines = [f"[{self.report_id}] check {self.position or self.check + 1}, "
                 f"cell {self.cell[0]:.1f}–{self.cell[1]:.1f}s"]
        if self.objective:
            lines.append(f"  objective: {self.objective}")
        for rid, text in self.requirements:
            lines.append(f"  {rid}{' (target context)' if rid == 'R1' else ''}: {text}")
        if self.error:
            lines.append(f"  no report ({self.error})")
            return "\n".join(lines)
        lines.append(f"  observation: {f.get('observation') or ''}")
        findings = f.get("requirement_findings") or {}
        for rid, finding in findings.items():
            cited = self.requirement_evidence_s.get(rid) or []
            where = f" (at {', '.join(f'{t:.1f}s' for t in cited)})" if cited else ""
            lines.append(f"  finding {rid}: {finding}{where}")
        if f.get("explanation"):
            lines.append(f"  explanation: {f['explanation']}")
        if f.get("ambiguity_reason"):
            lines.append(f"  ambiguity: {f['ambiguity_reason']}")
        if f.get("next_evidence_needed"):
            lines.append(f"  evidence still needed: {f['next_evidence_needed']}")
        if self.evidence_s:
            lines.append("  evidence at " + ", ".join(f"{t:.1f}s" for t in self.evidence_s))
        if self.gaps:
            lines.append("  evidence gaps: " + ", ".join(self.gaps))
        return "\n".join(lines)


REPORT_FIELDS = ("observation", "explanation", "ambiguity_reason", "next_evidence_needed", "evidence_moments",
                 "requirement_findings", "requirement_evidence_moments")


def _offsets(value: Any) -> list[float]:
    """Carrier offsets of a citation list: numbers, or objects with ``offset_sec``."""
    if isinstance(value, (int, float, str, Mapping)):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        if isinstance(item, Mapping):
            item = item.get("offset_sec", item.get("offset"))
        number = _number(item)
        if number is not None:
            out.append(number)
    return out


_REQUIREMENT_ID = re.compile(r"(?:r(?:equirement)?[\s_-]*)?(\d+)", re.IGNORECASE)


def requirement_id(key: Any) -> str:
    """A verifier's requirement key in the form the check names it: "r1", "1", "R1 ", "requirement 1" → "R1"
    (anything else is kept, stripped, so it is still shown)."""
    text = str(key).strip()
    match = _REQUIREMENT_ID.fullmatch(text)
    return f"R{int(match.group(1))}" if match else text


def _by_requirement(value: Any, key: str) -> dict[str, Any]:
    """``{"R1": x}``, or a list of ``{"id"|"requirement_id": "R1", key: x}`` objects, as a dict by R-id (keys
    normalised by :func:`requirement_id`, so "r1" or "1" is not an evidence gap)."""
    if isinstance(value, Mapping):
        return {requirement_id(k): v for k, v in value.items()}
    out: dict[str, Any] = {}
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                rid = item.get("id", item.get("requirement_id"))
                if rid is not None:
                    out[requirement_id(rid)] = item.get(key, item.get("moments", item.get("evidence_moments")))
    return out


def read_report(report_id: str, check_index: int, check: Check | None, cell: Cell, obj: Mapping[str, Any] | None,
                frame_times: Sequence[float], error: str | None = None, guided: bool = True) -> Report:
    """Map carrier-timeline citations (``offset_sec``: frame k is shown during second [k, k+1) of the 1 frame/s
    carrier) to absolute source times; a citation outside the carrier is invalid. With target guidance,
    requirements (R-ids) without a non-empty finding and a valid citation are evidence gaps."""
    span = (cell.start_s, cell.end_s)
    # Without target guidance the verifier never saw the requirements: its report names none.
    requirements = check.requirement_ids() if check is not None and guided else []
    objective = check.objective if check is not None else ""
    position = check.position if check is not None else 0
    ids = [rid for rid, _ in requirements] if guided else []
    if obj is None:
        return Report(report_id, check_index, span, {}, [], {}, ids, error or "no valid report",
                      requirements=requirements, objective=objective, position=position)

    def to_frames(offsets: list[float]) -> list[int]:
        n = len(frame_times)
        return sorted({min(int(math.floor(m + 1e-6)), n - 1) for m in offsets if 0 <= m <= n})

    evidence = to_frames(_offsets(obj.get("evidence_moments")))
    findings = {rid: v for rid, v in _by_requirement(obj.get("requirement_findings"), "finding").items()}
    cited = _by_requirement(obj.get("requirement_evidence_moments"), "offset_sec")
    requirement_frames = {rid: to_frames(_offsets(cited.get(rid))) for rid in (ids or list(cited))}
    gaps = [rid for rid in ids if not str(findings.get(rid) or "").strip() or not requirement_frames[rid]]
    fields = {k: obj.get(k) for k in REPORT_FIELDS}
    fields["requirement_findings"] = {rid: str(v) for rid, v in findings.items() if v is not None}
    all_frames = sorted(set(evidence) | {i for frames in requirement_frames.values() for i in frames})
    return Report(report_id, check_index, span, fields, [frame_times[i] for i in evidence],
                  {rid: [frame_times[i] for i in frames] for rid, frames in requirement_frames.items()}, gaps,
                  evidence_frames=all_frames, requirements=requirements, objective=objective, position=position)
