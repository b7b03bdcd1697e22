"""Target-guided visual checks (SENRI-Agent's ``verify``): check validation, adaptive temporal cells, the
verifier's report and the mapping of its citations back to the source video. Pure functions, no I/O.

A check is ``(target_context, objective, requirements[])`` plus absolute windows, a sampling rate ``f``
(clamped to [0.05, 4] frames/s) and a frame budget ``B`` (clamped to [8, 64]; presets sparse = 8, dense = 16
when omitted). Each window [a, b] with D = b − a > 0 is split independently into cells:

    τ = min(D, B / f);  L = max(1, ⌈2D/τ − 1⌉);  δ = 2D / (L + 1);
    cell r (1-based) = [a + (r − 1)·δ/2, a + (r − 1)·δ/2 + δ]

so the first cell starts at a, the last ends at b, and neighbours overlap by 50 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

F_MIN, F_MAX = 0.05, 4.0
B_MIN, B_MAX = 8, 64
PRESETS = {"sparse": 8, "dense": 16}
MAX_CHECKS = 3


@dataclass(frozen=True)
class Check:
    target_context: str
    objective: str
    requirements: tuple[str, ...]   # R2, R3, … (R1 is the target context)
    windows: tuple[tuple[float, float], ...]
    fps: float
    budget: int
    adjustments: tuple[str, ...] = ()  # what validation clamped, clipped or dropped

    def requirement_ids(self) -> list[tuple[str, str]]:
        """(R-id, condition): R1 is the target context, the listed requirements follow."""
        return [("R1", self.target_context)] + [(f"R{i + 2}", r) for i, r in enumerate(self.requirements)]


@dataclass(frozen=True)
class Cell:
    check: int
    window: int
    start_s: float
    end_s: float


def cells_for_window(a: float, b: float, fps: float, budget: int) -> list[tuple[float, float]]:
    """The spec's adaptive cells of one window (empty for D ≤ 0)."""
    duration = b - a
    if duration <= 0:
        return []
    tau = min(duration, budget / fps)
    count = max(1, math.ceil(2 * duration / tau - 1 - 1e-9))
    delta = 2 * duration / (count + 1)
    return [(a + (r - 1) * delta / 2, a + (r - 1) * delta / 2 + delta) for r in range(1, count + 1)]


def check_cells(checks: Sequence[Check], split: bool = True) -> list[Cell]:
    """Cells of every check, chronological within a check; ``split=False`` gives one cell per window."""
    out = []
    for k, check in enumerate(checks):
        spans = []
        for w, (a, b) in enumerate(check.windows):
            parts = cells_for_window(a, b, check.fps, check.budget) if split else ([(a, b)] if b > a else [])
            spans += [(s, e, w) for s, e in parts]
        out += [Cell(k, w, s, e) for s, e, w in sorted(spans)]
    return out


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def validate_checks(raw: Any, duration_s: float) -> tuple[list[Check], list[str]]:
    """Checks from a controller's ``checks`` list: fields coerced, f and B clamped, windows clipped to
    [0, duration]; at most 3 checks. Returns (checks, problems); each adjustment is recorded on its check."""
    problems: list[str] = []
    if not isinstance(raw, list) or not raw:
        return [], ["verify needs a non-empty list of checks"]
    if len(raw) > MAX_CHECKS:
        problems.append(f"{len(raw)} checks asked, the first {MAX_CHECKS} kept")
    checks = []
    for i, item in enumerate(raw[:MAX_CHECKS]):
        if not isinstance(item, Mapping):
            problems.append(f"check {i}: not an object")
            continue
        adjustments: list[str] = []
        target = str(item.get("target_context") or "").strip()
        objective = str(item.get("objective") or "").strip()
        requirements = tuple(str(r).strip() for r in (item.get("requirements") or []) if str(r).strip())
        if not target or not objective:
            problems.append(f"check {i}: target_context and objective are required")
            continue
        fps = _number(item.get("fps", item.get("f")))
        if fps is None:
            fps = 1.0
            adjustments.append("f missing: 1.0")
        elif not F_MIN <= fps <= F_MAX:
            clamped = min(max(fps, F_MIN), F_MAX)
            adjustments.append(f"f {fps:g} clamped to {clamped:g}")
            fps = clamped
        budget_raw = item.get("budget", item.get("B"))
        budget_value = _number(budget_raw)
        if budget_value is None:
            preset = str(item.get("preset") or "sparse")
            budget = PRESETS.get(preset, PRESETS["sparse"])
            adjustments.append(f"B from preset {preset if preset in PRESETS else 'sparse'}: {budget}")
        else:
            budget = int(round(budget_value))
            if not B_MIN <= budget <= B_MAX:
                clamped_b = min(max(budget, B_MIN), B_MAX)
                adjustments.append(f"B {budget} clamped to {clamped_b}")
                budget = clamped_b
        windows = []
        for window in item.get("windows") or []:
            if not isinstance(window, (list, tuple)) or len(window) != 2:
                adjustments.append(f"window {window!r} dropped: not [start, end]")
                continue
            a, b = _number(window[0]), _number(window[1])
            if a is None or b is None:
                adjustments.append(f"window {window!r} dropped: not numbers")
                continue
            clipped = (max(0.0, min(a, b)), min(duration_s, max(a, b)))
            if clipped != (a, b):
                adjustments.append(f"window [{a:g}, {b:g}] clipped to [{clipped[0]:g}, {clipped[1]:g}]")
            if clipped[1] > clipped[0]:
                windows.append(clipped)
            else:
                adjustments.append(f"window [{a:g}, {b:g}] dropped: outside the video")
        if not windows:
            problems.append(f"check {i}: no window inside the video")
            continue
        checks.append(Check(target, objective, requirements, tuple(windows), fps, budget, tuple(adjustments)))
    return checks, problems


def cell_times(cell: Cell, fps: float, budget: int) -> list[float]:
    """Frame times in a cell: every 1/f seconds from its start, capped at B (spread uniformly if more)."""
    span = cell.end_s - cell.start_s
    count = max(1, math.floor(span * fps + 1e-9))
    if count <= budget:
        return [cell.start_s + k / fps for k in range(count)]
    return [cell.start_s + (k + 0.5) * span / budget for k in range(budget)]


@dataclass
class Report:
    """One verifier's report with its citations mapped to absolute times; ``gaps`` are requirements without a
    finding and a valid citation."""

    report_id: str
    check: int
    cell: tuple[float, float]
    fields: dict[str, Any]
    evidence_s: list[float]
    requirement_evidence_s: dict[str, list[float]]
    gaps: list[str]
    error: str | None = None
    evidence_frames: list[int] = field(default_factory=list)  # indexes into the cell's frames

    def summary(self) -> str:
        f = self.fields
        findings = f.get("requirement_findings") or {}
        parts = [f"[{self.report_id}] cell {self.cell[0]:.1f}–{self.cell[1]:.1f}s"]
        if self.error:
            return parts[0] + f": no report ({self.error})"
        parts.append(f"observation: {f.get('observation', '')}")
        if findings:
            parts.append("findings: " + "; ".join(f"{k}: {v}" for k, v in findings.items()))
        if self.evidence_s:
            parts.append("evidence at " + ", ".join(f"{t:.1f}s" for t in self.evidence_s))
        if f.get("ambiguity_reason"):
            parts.append(f"ambiguity: {f['ambiguity_reason']}")
        if f.get("next_evidence_needed"):
            parts.append(f"needs: {f['next_evidence_needed']}")
        if self.gaps:
            parts.append("evidence gaps: " + ", ".join(self.gaps))
        return " | ".join(parts)


REPORT_FIELDS = ("observation", "explanation", "ambiguity_reason", "next_evidence_needed", "evidence_moments",
                 "requirement_findings", "requirement_evidence_moments")


def _moments(value: Any) -> list[float]:
    if isinstance(value, (int, float, str)):
        value = [value]
    if not isinstance(value, list):
        return []
    return [n for n in (_number(v) for v in value) if n is not None]


def read_report(report_id: str, check_index: int, check: Check | None, cell: Cell, obj: Mapping[str, Any] | None,
                frame_times: Sequence[float], error: str | None = None) -> Report:
    """Map carrier-timeline citations (second k = frame k, frames shown at 1 frame/s) to absolute times;
    a citation outside the carrier is invalid. Requirements (R-ids) without a non-empty finding and a valid
    citation are evidence gaps."""
    span = (cell.start_s, cell.end_s)
    ids = [rid for rid, _ in check.requirement_ids()] if check is not None else []
    if obj is None:
        return Report(report_id, check_index, span, {}, [], {}, ids, error or "no valid report")

    def to_frames(moments: list[float]) -> list[int]:
        return sorted({int(round(m)) for m in moments if 0 <= round(m) < len(frame_times)})

    evidence = to_frames(_moments(obj.get("evidence_moments")))
    findings = obj.get("requirement_findings") if isinstance(obj.get("requirement_findings"), Mapping) else {}
    cited = obj.get("requirement_evidence_moments")
    cited = cited if isinstance(cited, Mapping) else {}
    requirement_frames = {rid: to_frames(_moments(cited.get(rid))) for rid in ids}
    gaps = [rid for rid in ids if not str(findings.get(rid) or "").strip() or not requirement_frames[rid]]
    fields = {k: obj.get(k) for k in REPORT_FIELDS}
    all_frames = sorted(set(evidence) | {i for frames in requirement_frames.values() for i in frames})
    return Report(report_id, check_index, span, fields, [frame_times[i] for i in evidence],
                  {rid: [frame_times[i] for i in frames] for rid, frames in requirement_frames.items()}, gaps,
                  evidence_frames=all_frames)
