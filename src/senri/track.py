"""The ego-motion track: where the wearer turned, stood and walked, and which signs were in view — no VLM.

Text memory keeps *what* happened and loses *where*; an egocentric video carries two spatial signals that
need no vision-language model. This stage measures both, once per video:

- **motion** at ``fps`` (5 by default) on frames shrunk to ``flow_width``: the horizontal image shift of a
  similarity transform fitted (RANSAC) to tracked corners (pyramidal Lucas–Kanade) is the camera's yaw,
  ``yaw = −shift / f`` with ``f = (width/2)/tan(hfov/2)`` (content moving left = turning right = positive);
  the median corner motion says moving vs still; a colour-histogram change
  flags scene cuts, where the shift is meaningless and the yaw is set to 0;
- **turn events**: runs of |turn rate| ≥ ``turn_rate_min_deg_s`` (1 s moving average), merged across short
  gaps, integrated to an angle; ≥ ``turn_min_deg`` is a turn, ≥ ``uturn_min_deg`` a U-turn;
- **text** at ``ocr_fps`` with RapidOCR (PP-OCR models inside the wheel; Chinese and English); a frame whose
  view has not changed since the last read reuses that read (rows say ``reused``);
- **place labels**: the tallest text read at two consecutive OCR samples without drifting more than
  ``label_max_drift`` frame widths — a sign, not a passing caption — held for ``label_hold_s`` or until
  the next scene cut.

Every number is a measurement under a stated model (pinhole camera with the configured field of view,
rotation-dominated shift); nothing is guessed. Outputs: the track and OCR tables and a PNG of the
dead-reckoned path (unit speed while moving: distances are "seconds of motion", not metres).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from senri import memtrim
from senri.records import OcrRow, TrackRow, to_frame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackConfig:
    fps: float = 5.0
    short_side: int = 720          # decode size: OCR reads these pixels
    flow_width: int = 256          # motion is measured on frames shrunk to this width
    hfov_deg: float = 90.0         # the camera's horizontal field of view
    ocr_fps: float = 1.0
    ocr_min_score: float = 0.8
    ocr_change_fraction: float = 0.01   # share of changed pixels that makes a fresh OCR read worthwhile
    turn_rate_min_deg_s: float = 8.0
    turn_min_deg: float = 30.0
    uturn_min_deg: float = 150.0
    turn_merge_gap_s: float = 0.6
    moving_min: float = 0.01       # median corner motion, frame widths per second, above which the camera moves
    min_pause_s: float = 2.0
    cut_threshold: float = 0.5
    label_max_drift: float = 0.15
    label_hold_s: float = 10.0

    @property
    def ocr_every(self) -> int:
        """Every how many motion samples OCR reads one (the track stage and the captioner count alike)."""
        return max(1, round(self.fps / self.ocr_fps))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "TrackConfig":
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"track config: unknown key(s) {unknown}")
        return cls(**{k: type(fields[k].default)(v) for k, v in data.items()})


@dataclass(frozen=True)
class Interval:
    """A measured span of the track: a turn (``label`` like "right 90°") or a pause ("standing still")."""

    start_s: float
    end_s: float
    label: str
    degrees: float = 0.0


def clock(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``): the time notation of every caption and trace."""
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def focal_px(width: float, hfov_deg: float) -> float:
    return (width / 2) / math.tan(math.radians(hfov_deg) / 2)


# ------------------------------------------------------------------------------------- pure measurements


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if window <= 1 or data.size == 0:
        return data
    kernel = np.ones(window) / window
    padded = np.pad(data, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """Index ranges [a, b) where ``flags`` is true."""
    runs, start = [], None
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(flags)))
    return runs


def turn_events(times: Sequence[float], rates: Sequence[float], config: TrackConfig) -> list[Interval]:
    """Turns from a turn-rate series (deg/s, right positive), sampled at ``times``.

    A run is where the 1 s moving average of |rate| ≥ ``turn_rate_min_deg_s`` with one sign; runs of the
    same sign closer than ``turn_merge_gap_s`` merge; the angle is the integral of the raw rate over the
    run, widened while the raw rate keeps its sign above a quarter of the threshold. Runs under ``turn_min_deg`` are dropped (head wobble); ≥ ``uturn_min_deg`` are U-turns.
    """
    if len(times) < 2:
        return []
    t = np.asarray(times, dtype=float)
    rate = np.asarray(rates, dtype=float)
    dt = float(np.median(np.diff(t)))
    smooth = moving_average(rate, max(1, round(1.0 / dt)))
    events: list[list[int]] = []  # [start, end, sign]
    for sign in (1, -1):
        for a, b in _runs(sign * smooth >= config.turn_rate_min_deg_s):
            if events and events[-1][2] == sign and t[a] - t[events[-1][1] - 1] <= config.turn_merge_gap_s + dt:
                events[-1][1] = b
            else:
                events.append([a, b, sign])
        events.sort()
    out = []
    for a, b, sign in sorted(events):
        # The moving average blurs a turn's edges: widen the run while the raw rate keeps its sign.
        while a > 0 and sign * rate[a - 1] >= 0.25 * config.turn_rate_min_deg_s:
            a -= 1
        while b < len(rate) and sign * rate[b] >= 0.25 * config.turn_rate_min_deg_s:
            b += 1
        degrees = float(np.sum(rate[a:b]) * dt)
        if abs(degrees) < config.turn_min_deg or np.sign(degrees) != sign:
            continue
        side = "right" if degrees > 0 else "left"
        kind = f"U-turn {side}" if abs(degrees) >= config.uturn_min_deg else side
        out.append(Interval(float(t[a] - dt), float(t[b - 1]), f"{kind} {abs(degrees):.0f}°", degrees))
    return out


def pauses(times: Sequence[float], moving: Sequence[bool], config: TrackConfig) -> list[Interval]:
    """Spans of at least ``min_pause_s`` where the camera did not move."""
    out = []
    for a, b in _runs([not m for m in moving]):
        start, end = float(times[a]), float(times[b - 1])
        if end - start >= config.min_pause_s:
            out.append(Interval(start, end, "standing still"))
    return out


def normalize_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def place_labels(ocr: pl.DataFrame, width: float, config: TrackConfig) -> list[tuple[float, str]]:
    """(time, label) at every OCR sample that has a stationary text: the tallest text also read at the
    previous sample whose box centre moved less than ``label_max_drift`` widths."""
    labels: list[tuple[float, str]] = []
    previous: dict[str, float] = {}
    for (t_s,), rows in ocr.sort("t_s").group_by(["t_s"], maintain_order=True):
        current = {}
        best, best_height = None, 0.0
        for row in rows.iter_rows(named=True):
            centre = (row["x0"] + row["x1"]) / 2
            current[row["text"]] = centre
            moved = abs(centre - previous[row["text"]]) / width if row["text"] in previous else math.inf
            height = row["y1"] - row["y0"]
            if moved <= config.label_max_drift and height > best_height:
                best, best_height = row["text"], height
        if best is not None:
            labels.append((float(t_s), best))
        previous = current
    return labels


def label_at(labels: Sequence[tuple[float, str]], t: float, hold_s: float, since_s: float = -math.inf) -> str | None:
    """The last label read at or before ``t``, if read within ``hold_s`` and not before ``since_s`` (the
    last scene cut: a sign seen before a cut says nothing about where the camera is after it)."""
    found = None
    for when, label in labels:
        if when > t + 1e-9:
            break
        found = (when, label)
    if found is None or t - found[0] > hold_s or found[0] < since_s - 1e-9:
        return None
    return found[1]


# ----------------------------------------------------------------------------------------------- images


def _gray_small(image: np.ndarray, width: int) -> np.ndarray:
    import cv2

    height = max(2, round(image.shape[0] * width / image.shape[1]))
    return cv2.cvtColor(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY)


def _hist(image: np.ndarray) -> np.ndarray:
    import cv2

    hsv = cv2.cvtColor(cv2.resize(image, (128, 72), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2HSV)
    hist = cv2.calcHist([hsv], [0, 1], None, [30, 16], [0, 180, 0, 256])
    return cv2.normalize(hist, hist).flatten()


def _grid_corners(gray: np.ndarray, grid: int = 4, per_cell: int = 16) -> np.ndarray | None:
    """Corners spread over a grid×grid tiling, each cell's own strongest: a high-contrast object (a caption,
    a sign) cannot supply most of the corners, so it cannot win the RANSAC consensus."""
    import cv2

    height, width = gray.shape
    found = []
    for row in range(grid):
        for col in range(grid):
            y0, y1 = row * height // grid, (row + 1) * height // grid
            x0, x1 = col * width // grid, (col + 1) * width // grid
            cell = cv2.goodFeaturesToTrack(gray[y0:y1, x0:x1], maxCorners=per_cell, qualityLevel=0.05, minDistance=4)
            if cell is not None:
                found.append(cell + np.array([x0, y0], dtype=np.float32))
    return np.concatenate(found).astype(np.float32) if found else None


class MotionMeter:
    """Consecutive-frame measurements: the camera's horizontal image shift (px at ``width``), the median
    feature motion (px) and the appearance change.

    Corners spread over the frame are tracked with pyramidal Lucas–Kanade (large pans stay within its
    pyramid's reach) and a similarity transform is fitted with RANSAC, so a passer-by or a vehicle — a
    minority of the corners — does not move the estimate; the shift is the transform's displacement of the frame centre. Dense
    Farnebäck flow underestimated fast pans here (72° measured for a 90° turn in 4 s) and phase correlation
    locked onto a moving caption.
    """

    def __init__(self, width: int) -> None:
        self.width = width
        self._prev: np.ndarray | None = None
        self._prev_hist: np.ndarray | None = None

    def step(self, image: np.ndarray) -> tuple[float, float, float]:
        import cv2

        gray = _gray_small(image, self.width)
        hist = _hist(image)
        prev, self._prev = self._prev, gray
        prev_hist, self._prev_hist = self._prev_hist, hist
        if prev is None or prev.shape != gray.shape:
            return 0.0, 0.0, 0.0
        change = max(0.0, 1.0 - float(cv2.compareHist(prev_hist, hist, cv2.HISTCMP_CORREL)))
        corners = _grid_corners(prev)
        if corners is None or len(corners) < 8:
            return 0.0, 0.0, change  # a textureless view: no measurable motion
        moved, status, _err = cv2.calcOpticalFlowPyrLK(prev, gray, corners, None, winSize=(21, 21), maxLevel=4)
        ok = status.ravel() == 1
        if ok.sum() < 8:
            return 0.0, 0.0, change
        src, dst = corners[ok].reshape(-1, 2), moved[ok].reshape(-1, 2)
        magnitude = float(np.median(np.hypot(*(dst - src).T)))
        transform, _inliers = cv2.estimateAffinePartial2D(src, dst, method=cv2.RANSAC, ransacReprojThreshold=2.0)
        if transform is None:
            return float(np.median(dst[:, 0] - src[:, 0])), magnitude, change
        cx, cy = gray.shape[1] / 2, gray.shape[0] / 2
        dx = transform[0, 0] * cx + transform[0, 1] * cy + transform[0, 2] - cx
        return float(dx), magnitude, change


class OcrReader:
    """RapidOCR with its bundled models, loaded once; returns (text, score, box) per line above ``min_score``.

    Its three ONNX sessions (detection, direction, recognition) run on the job's cores without spin-waiting
    (:mod:`senri.ort`): RapidOCR's own sessions take every core of the machine and spin, 1.6× the CPU of these
    on a busy machine for the same reads."""

    def __init__(self, min_score: float = 0.8) -> None:
        import os

        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from rapidocr import RapidOCR

        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        self.engine = RapidOCR(params={"Global.log_level": "error"})
        self.sessions = [_quiet_session(load().session) for load in (
            self.engine._load_det_model, self.engine._load_cls_model, self.engine._load_rec_model)]
        self.min_score = min_score

    def read(self, image_rgb: np.ndarray) -> list[tuple[str, float, tuple[float, float, float, float]]]:
        result = self.engine(np.ascontiguousarray(image_rgb[..., ::-1]))  # RapidOCR takes BGR like OpenCV
        if result.txts is None:
            return []
        lines = []
        for text, score, box in zip(result.txts, result.scores, result.boxes):
            text = normalize_text(text)
            if score < self.min_score or len(text) < 2:
                continue
            xs, ys = [p[0] for p in box], [p[1] for p in box]
            lines.append((text, float(score), (float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys)))))
        return lines


def _quiet_session(engine: Any) -> Any:  # noqa: ANN401 - rapidocr's OrtInferSession in, its InferenceSession out
    """Replace the ONNX session inside one of RapidOCR's models by one over the same model file with the same
    options but :func:`senri.ort.quiet_options`' threads (RapidOCR 3.10 offers no way to pass them)."""
    import onnxruntime

    from senri.ort import quiet_options

    loaded = engine.session
    engine.session = onnxruntime.InferenceSession(loaded._model_path, quiet_options(loaded.get_session_options()),
                                                  providers=loaded.get_providers())
    return engine.session


class TextReader:
    """OCR behind the unchanged-view gate: a frame whose view has not changed since the last read reuses that
    read (its rows say ``reused``). The track stage and the perception captioner read text through this."""

    def __init__(self, config: "TrackConfig", ocr: OcrReader | None = None) -> None:
        self.ocr = ocr or OcrReader(config.ocr_min_score)
        self.gate = ChangeGate(config.ocr_change_fraction)
        self.last: list[tuple[str, float, tuple[float, float, float, float]]] = []
        self.reads = 0
        self.reused = 0

    def rows(self, video_id: str, frame: Any) -> list[OcrRow]:  # noqa: ANN401 - a decoded SampledFrame
        fresh = self.gate.changed(frame.image)
        if fresh:
            self.last = self.ocr.read(frame.image)
            self.reads += 1
        else:
            self.reused += 1
        return [OcrRow(video_id, float(frame.pts_s), int(frame.frame_index), text, score, *box, not fresh)
                for text, score, box in self.last]


class ChangeGate:
    """Says whether a frame differs enough from the last one read to be worth reading again."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self._last: np.ndarray | None = None

    def changed(self, image: np.ndarray) -> bool:
        small = _gray_small(image, 160).astype(np.int16)
        if self._last is None or self._last.shape != small.shape:
            self._last = small
            return True
        changed = float(np.mean(np.abs(small - self._last) > 30)) > self.fraction
        if changed:
            self._last = small
        return changed


# ------------------------------------------------------------------------------------------------- stage


def compute_track(video: str | Path, video_id: str, config: TrackConfig, ocr: OcrReader | None = None,
                  on_damaged: str = "fail") -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Measure the track and read the text of one video; returns (track rows, OCR rows, stats).

    An unreadable video, or a damaged one under ``on_damaged="fail"``, raises :class:`MediaError`; so does a
    video of which no sample decodes (an empty track is never a success). Failed samples are counted in
    ``stats`` and the first reason is logged.
    """
    from senri.decode import FramePlan, read_frames
    from senri.media import MediaError

    texts = TextReader(config, ocr)
    meter = MotionMeter(config.flow_width)
    samples: list[dict[str, Any]] = []
    ocr_rows: list[OcrRow] = []
    stats = {"samples": 0, "failed": 0, "width": 0}
    plan = FramePlan(kind="fps", rate=config.fps, accuracy="exact")
    first_error: str | None = None
    for k, frame in enumerate(read_frames(video, plan.targets, accuracy="exact", short_side=config.short_side,
                                          on_damaged=on_damaged)):
        if frame.image is None:
            stats["failed"] += 1
            first_error = first_error or frame.error
            continue
        stats["samples"] += 1
        memtrim.every(stats["samples"])
        stats["width"] = frame.image.shape[1]
        shift, magnitude, change = meter.step(frame.image)
        samples.append({"t_s": frame.pts_s, "frame_index": frame.frame_index, "shift": shift,
                        "magnitude": magnitude, "change": change})
        if k % config.ocr_every == 0:
            ocr_rows += texts.rows(video_id, frame)
    if stats["failed"]:
        if not stats["samples"]:
            raise MediaError(f"{video}: none of the track's {stats['failed']} samples decoded (first: {first_error})")
        log.warning("%s: %d of %d track samples failed (first: %s)", video, stats["failed"],
                    stats["failed"] + stats["samples"], first_error)
    stats.update(ocr_reads=texts.reads, ocr_reused=texts.reused)
    ocr_table = to_frame(ocr_rows, OcrRow)
    track = assemble_track(video_id, samples, ocr_table, stats["width"] or 1, config)
    return track, ocr_table, stats


def assemble_track(video_id: str, samples: Sequence[Mapping[str, Any]], ocr: pl.DataFrame, width: float,
                   config: TrackConfig) -> pl.DataFrame:
    """Turn per-sample measurements into track rows: yaw rate, cumulative heading, events, place labels."""
    if not samples:
        return to_frame([], TrackRow)
    t = np.array([s["t_s"] for s in samples], dtype=float)
    dt = np.diff(t, prepend=t[0] - 1.0 / config.fps)
    dt[dt <= 0] = 1.0 / config.fps
    scale = width / config.flow_width  # shifts are measured on the shrunk frames
    f_small = focal_px(config.flow_width, config.hfov_deg)
    cut = np.array([s["change"] >= config.cut_threshold for s in samples])
    shift = np.array([s["shift"] for s in samples]) * ~cut
    rate = np.degrees(-shift / f_small) / dt
    heading = np.cumsum(rate * dt)
    motion = np.array([s["magnitude"] for s in samples]) / config.flow_width / dt
    moving = motion >= config.moving_min
    events = turn_events(t, rate, config)
    labels = place_labels(ocr, width, config)
    rows = []
    last_cut = -math.inf
    for i, sample in enumerate(samples):
        if cut[i]:
            last_cut = float(t[i])
        event = next((e.label for e in events if e.start_s - 1e-9 <= t[i] <= e.end_s + 1e-9), None)
        rows.append(TrackRow(
            video_id=video_id, t_s=float(t[i]), frame_index=int(sample["frame_index"]),
            shift_px=round(float(shift[i] * scale), 3), turn_rate_deg_s=round(float(rate[i]), 3),
            heading_deg=round(float(heading[i]), 3), motion=round(float(motion[i]), 5), moving=bool(moving[i]),
            appearance_change=round(float(sample["change"]), 4), scene_cut=bool(cut[i]), turn_event=event,
            place_label=label_at(labels, float(t[i]), config.label_hold_s, last_cut),
        ))
    return to_frame(rows, TrackRow)


def track_intervals(track: pl.DataFrame, config: TrackConfig) -> tuple[list[Interval], list[Interval]]:
    """(turns, pauses) of a stored track, recomputed from its columns (the same functions as the stage)."""
    if track.is_empty():
        return [], []
    times = track["t_s"].to_list()
    return (turn_events(times, track["turn_rate_deg_s"].to_list(), config),
            pauses(times, track["moving"].to_list(), config))


def plot_track(track: pl.DataFrame, out: str | Path, title: str) -> Path:
    """The dead-reckoned path (unit speed while moving, heading from the track), place labels, time ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    fig, ax = plt.subplots(figsize=(7, 7), dpi=100)
    if not track.is_empty():
        t = track["t_s"].to_numpy()
        dt = np.diff(t, prepend=t[0])
        heading = np.radians(track["heading_deg"].to_numpy())
        speed = track["moving"].to_numpy().astype(float)
        # Heading 0 = up (north on the plot), clockwise positive: x = sin, y = cos.
        x = np.cumsum(speed * dt * np.sin(heading))
        y = np.cumsum(speed * dt * np.cos(heading))
        ax.plot(x, y, "-", color="#3060a0", lw=1.5)
        ax.plot(x[:1], y[:1], "o", color="green", label="start")
        ax.plot(x[-1:], y[-1:], "s", color="red", label="end")
        tick_every = max(10.0, 10 ** math.floor(math.log10(max(t[-1], 1.0))))
        next_tick = 0.0
        for i, when in enumerate(t):
            if when >= next_tick:
                ax.annotate(clock(when), (x[i], y[i]), fontsize=6, color="gray")
                next_tick += tick_every
        labels = track["place_label"].to_list()
        shown: set[str] = set()
        for i, label in enumerate(labels):
            if label and label not in shown:
                shown.add(label)
                ax.annotate(label, (x[i], y[i]), fontsize=8, color="black", xytext=(4, 4),
                            textcoords="offset points")
        ax.legend(loc="best", fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(f"{title}: dead-reckoned path (unit speed while moving)", fontsize=10)
    ax.set_xlabel("seconds of motion")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def window(table: pl.DataFrame, start_s: float, end_s: float, column: str = "t_s") -> pl.DataFrame:
    """The rows of a per-time table within [start_s, end_s): how every clip reads the track, OCR and boxes."""
    return table.filter((pl.col(column) >= start_s) & (pl.col(column) < end_s))


def describe_track(track: pl.DataFrame, start_s: float, end_s: float, config: TrackConfig) -> list[str]:
    """Factual sentences about the track within [start_s, end_s): turns, pauses, heading change, cuts."""
    span = window(track, start_s, end_s)
    if span.is_empty():
        return []
    turns, still = track_intervals(span, config)
    lines = []
    for event in turns:
        lines.append(f"Turned {event.label} at {clock(event.start_s)}–{clock(event.end_s)}.")
    for pause in still:
        lines.append(f"Stood still {clock(pause.start_s)}–{clock(pause.end_s)}.")
    moving_share = float(span["moving"].mean())
    change = _heading_span(span)
    lines.append(f"Camera moving {moving_share:.0%} of the time; heading change {change:+.0f}° "
                 f"(positive = to the right).")
    cuts = span.filter(pl.col("scene_cut"))["t_s"].to_list()
    if cuts:
        lines.append("Scene changes at " + ", ".join(clock(c) for c in cuts[:8])
                     + (f" and {len(cuts) - 8} more" if len(cuts) > 8 else "") + ".")
    return lines


def active_labels(track: pl.DataFrame, start_s: float, end_s: float) -> list[str]:
    return list(dict.fromkeys(x for x in window(track, start_s, end_s)["place_label"].to_list() if x))


def _heading_span(span: pl.DataFrame) -> float:
    return 0.0 if span.height < 2 else float(span["heading_deg"][-1] - span["heading_deg"][0])


def heading_change(track: pl.DataFrame, start_s: float, end_s: float) -> float:
    return _heading_span(window(track, start_s, end_s))


def iter_texts(ocr: pl.DataFrame, start_s: float, end_s: float) -> Iterable[tuple[str, float, float]]:
    """Distinct texts read within [start_s, end_s) with when each was first and last read."""
    span = window(ocr, start_s, end_s)
    if span.is_empty():
        return []
    spans = span.group_by("text").agg(pl.col("t_s").min().alias("first"), pl.col("t_s").max().alias("last"))
    return [(r["text"], r["first"], r["last"]) for r in spans.sort("first", "text").iter_rows(named=True)]
