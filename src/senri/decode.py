"""Frame sampling: which frames a plan means, and getting exactly those frames cheaply, one at a time.

A plan turns into target times (``uniform``, ``at_fps``, ``at_times``). Before decoding, one demux pass
(packets only, no decoding: ~0.04 s for 6,000 frames) builds a :class:`VideoIndex` of every frame's
presentation timestamp and every keyframe. Then each target is resolved *before* any pixel is decoded:

- ``exact``: the frame whose timestamp is nearest the target; a tie goes to the earlier frame. Decoding
  goes forward and seeks only when a keyframe lies between the last decoded frame and the wanted one, and
  the decoder skips non-reference frames (most B-frames) that nobody asked for, so the work is close to
  the least a decoder can do (a wanted frame needs the reference frames of its GOP prefix). When the
  next wanted frame is past a keyframe, the decoder is drained right after the wanted frame's packet
  instead of being fed the packets after it (its B-frame reorder delay).
- ``keyframe``: the keyframe nearest the target (tie → earlier); one seek and exactly one decoded frame
  per sample (its packet, then the same drain: the next pick is past a keyframe), spread over ``threads``
  decoders. The returned timestamp and its
  deviation are recorded.
- ``auto``: ``keyframe`` when the keyframe interval is at most ``keyframe_fraction`` (default ¼) of the
  spacing between targets, else ``exact``.

Every time in and out (targets, ``pts_s``, plan windows) is on the video's own timeline: seconds from the
stream's start time (:func:`senri.probe.timeline_origin`), so a camcorder's program stream whose clock starts
at 0.54 s has its first frame at 0 s, like an MP4. Demuxers that seek by decode time (MPEG program and
transport streams) land past a keyframe asked for by its pts; the first seek tells, and the video's later
seeks go to one tick before its keyframes' decode times (:func:`senri.probe.seek_point`).

Frame times are integers in the stream's time base and targets exact rationals on it (no float ties). Frames come out upright
(the display matrix is applied) and resized while decoding, and are yielded one by one, so memory does not
grow with the number of frames. A target with no frame near it (a truncated file), a frame that fails to
decode, a target outside the video (in every accuracy mode), or a video that outlasts its watchdog yields a
:class:`SampledFrame` with ``error`` set; nothing raises mid-video. A file that is not a readable video
raises :class:`~senri.media.MediaError` at once. A damaged video (its decodable length short of its declared
duration, :func:`senri.probe.check_decodable`) raises too under ``on_damaged_video: fail``; under
``keep_decodable`` the plan is laid over the declared duration and every target past the decodable end is a
failed row that says so, never a silently shorter plan.
"""

from __future__ import annotations

import bisect
import io
import itertools
import logging
import math
import statistics
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Literal, Sequence

import numpy as np

if TYPE_CHECKING:
    from senri.probe import Decodability

log = logging.getLogger(__name__)

Placement = Literal["center", "linspace", "interior"]
Accuracy = Literal["exact", "keyframe", "auto"]
PLACEMENTS: tuple[str, ...] = ("center", "linspace", "interior")
ACCURACIES: tuple[str, ...] = ("exact", "keyframe", "auto")


# ------------------------------------------------------------------------------------------ sampling plans


def uniform(n: int, start: float, end: float, placement: Placement = "center") -> list[float]:
    """``n`` target times over [start, end].

    - ``center``: t_i = start + (i + ½)·(end − start)/n — each sample in the middle of its 1/n of the span;
    - ``linspace``: start, …, end inclusive (the harness convention ``linspace(0, n_frames − 1, N)``
      when ``end`` is the last frame's time, keeping both ends);
    - ``interior``: t_i = start + i·(end − start)/(n + 1) for i = 1..n (the ``i·n/(N+1)`` convention,
      dropping both ends).
    """
    if n < 1:
        raise ValueError(f"uniform: n must be ≥ 1, got {n}")
    if end < start:
        raise ValueError(f"uniform: end {end} is before start {start}")
    span = end - start
    if placement == "center":
        return [start + (i + 0.5) * span / n for i in range(n)]
    if placement == "linspace":
        return [start + span / 2] if n == 1 else [start + i * span / (n - 1) for i in range(n)]
    if placement == "interior":
        return [start + i * span / (n + 1) for i in range(1, n + 1)]
    raise ValueError(f"unknown placement {placement!r}; use one of {PLACEMENTS}")


def at_fps(rate: float, start: float, end: float) -> list[float]:
    """Targets every 1/rate seconds from ``start``, strictly before ``end``: t_k = start + k/rate."""
    if rate <= 0:
        raise ValueError(f"fps: rate must be > 0, got {rate}")
    count = max(0, math.ceil((end - start) * rate - 1e-9))
    return [start + k / rate for k in range(count)]


def at_times(times: Sequence[float]) -> list[float]:
    return [float(t) for t in times]


@dataclass(frozen=True)
class FramePlan:
    """A named way of sampling a video; ``start_s``/``end_s`` default to the video's first and last frame."""

    kind: Literal["uniform", "fps", "timestamps"]
    n: int | None = None
    rate: float | None = None
    placement: Placement = "center"
    times: tuple[float, ...] = ()
    start_s: float | None = None
    end_s: float | None = None
    accuracy: Accuracy = "auto"

    def targets(self, first_s: float, last_s: float) -> list[float]:
        start = first_s if self.start_s is None else max(first_s, self.start_s)
        if self.start_s is not None and self.end_s is not None and self.end_s < self.start_s:
            raise ValueError(f"plan window: end_s {self.end_s:g} is before start_s {self.start_s:g}")
        if start > last_s:
            raise ValueError(f"plan window: start_s {start:g} is after the video's last frame ({last_s:.2f} s)")
        if self.end_s is not None and self.end_s < first_s:
            raise ValueError(f"plan window: end_s {self.end_s:g} is before the video's first frame ({first_s:.2f} s)")
        if self.kind == "uniform":
            end = last_s if self.end_s is None else min(last_s, self.end_s)
            assert self.n is not None
            return uniform(self.n, start, end, self.placement)
        if self.kind == "fps":
            # The window is half-open; by default it runs to just past the last frame so that frame can be hit.
            end = (last_s + 1e-6) if self.end_s is None else self.end_s
            assert self.rate is not None
            return at_fps(self.rate, start, end)
        return at_times(self.times)


# ---------------------------------------------------------------------------------------------- the index


@dataclass
class VideoIndex:
    """Every frame's presentation timestamp (sorted, stream time-base units) and the keyframes among them.

    Seconds are on the video's timeline: measured from ``origin``, the stream's start time
    (:func:`senri.probe.timeline_origin`), so the first frame of an MPEG stream that starts at 0.54 s is at 0 s
    for every stage, as it is for an MP4.
    """

    time_base: Fraction
    pts: list[int]
    keyframes: list[int]
    frame_duration: int  # median distance between consecutive frames, in time-base units
    origin: int = 0  # the pts at 0 s of the timeline
    #: Each keyframe's decode time, where it lies before its presentation time.
    keyframe_dts: dict[int, int] = field(default_factory=dict)
    #: Whether this demuxer seeks by decode time (MPEG-PS/TS, raw streams): learnt from the first seek.
    seeks_by_dts: bool = False

    def seconds(self, pts: int) -> float:
        """The timeline time of ``pts``."""
        return float((pts - self.origin) * self.time_base)

    def span_s(self, ticks: int | Fraction) -> float:
        """A length of ``ticks`` time-base units in seconds."""
        return float(ticks * self.time_base)

    def to_pts(self, seconds: float) -> Fraction:
        """A target time on the stream's timeline, exactly (not rounded to a tick: a target halfway between two
        frames that falls between ticks must still tie, and a tie goes to the earlier frame)."""
        return self.origin + Fraction(seconds) / self.time_base

    def seek_target(self, keyframe: int) -> int:
        """What to seek to for ``keyframe`` in a demuxer that seeks by decode time."""
        from senri.probe import seek_point

        return seek_point(keyframe, self.keyframe_dts.get(keyframe))

    def frame_index(self, pts: int) -> int:
        return bisect.bisect_left(self.pts, pts)

    #: Two frames whose distances to a target differ by less than this (seconds) are a tie: targets are
    #: floats (5.98333… for 359/60 s), so an exact comparison would break a true tie by rounding noise.
    TIE_S = 1e-9

    def _nearest(self, sorted_pts: list[int], target: int | Fraction) -> int:
        """Nearest value to ``target``; on a tie (within :data:`TIE_S`) the earlier one."""
        i = bisect.bisect_left(sorted_pts, target)
        if i == 0:
            return sorted_pts[0]
        if i == len(sorted_pts):
            return sorted_pts[-1]
        before, after = sorted_pts[i - 1], sorted_pts[i]
        return before if (target - before) - (after - target) <= Fraction(self.TIE_S) / self.time_base else after

    def nearest_frame(self, target: int | Fraction) -> int:
        return self._nearest(self.pts, target)

    def nearest_keyframe(self, target: int | Fraction) -> int:
        return self._nearest(self.keyframes, target)

    def keyframe_at_or_before(self, pts: int) -> int:
        i = bisect.bisect_right(self.keyframes, pts)
        return self.keyframes[i - 1] if i else self.keyframes[0]

    def keyframe_between(self, after: int, up_to: int) -> bool:
        """Whether a keyframe K satisfies after < K ≤ up_to (then seeking beats decoding forward)."""
        i = bisect.bisect_right(self.keyframes, after)
        return i < len(self.keyframes) and self.keyframes[i] <= up_to

    @property
    def keyframe_interval_s(self) -> float:
        gaps = [b - a for a, b in zip(self.keyframes, self.keyframes[1:])]
        return float(statistics.median(gaps) * self.time_base) if gaps else math.inf


def build_index(container, stream) -> VideoIndex:  # noqa: ANN001 - PyAV objects
    """One demux pass over the packets (no decoding). Packets without a timestamp are skipped."""
    import av

    from senri.probe import timeline_origin, untimed_first_pts

    pts: list[int] = []
    keyframes: list[int] = []
    keyframe_dts: dict[int, int] = {}
    try:
        for packet in container.demux(stream):
            stamp = packet.pts if packet.pts is not None else packet.dts
            if stamp is None or packet.size == 0:
                continue
            pts.append(stamp)
            if packet.is_keyframe:
                keyframes.append(stamp)
                if packet.pts is not None and packet.dts is not None and packet.dts < packet.pts:
                    keyframe_dts[stamp] = packet.dts
    except (av.error.FFmpegError, EOFError) as exc:  # a truncated file: index what is there
        log.warning("packet index stops at %d packets: %s", len(pts), exc)
    if not pts:
        raise ValueError("no video packets")
    pts.sort()
    keyframes.sort()
    if not keyframes:
        keyframes = [pts[0]]
    gaps = [b - a for a, b in zip(pts, pts[1:]) if b > a]
    frame_duration = int(statistics.median(gaps)) if gaps else 1
    restamped = untimed_first_pts(stream, pts[0], pts[1], frame_duration) if len(pts) > 1 else pts[0]
    if restamped != pts[0]:  # a raw elementary stream: the index takes the stamp a seek gives its first frame
        keyframes = [restamped if k == pts[0] else k for k in keyframes]
        keyframe_dts = {restamped if k == pts[0] else k: d for k, d in keyframe_dts.items()}
        pts[0] = restamped
    return VideoIndex(Fraction(stream.time_base), pts, keyframes, frame_duration,
                      origin=timeline_origin(stream, pts[0]), keyframe_dts=keyframe_dts)


# ------------------------------------------------------------------------------------------------ frames


@dataclass
class SampledFrame:
    """One target of a plan and the frame that answers it (``image`` is None when ``error`` says why)."""

    target_s: float
    frame_index: int | None = None
    pts_s: float | None = None
    deviation_s: float | None = None
    image: np.ndarray | None = field(default=None, repr=False)  # H×W×3 uint8 RGB, upright
    error: str | None = None


def output_size(width: int, height: int, short_side: int | None) -> tuple[int, int]:
    """Scale (width, height) so the shorter side is ``short_side`` (never upscaling), keeping the aspect."""
    if not short_side or min(width, height) <= short_side:
        return width, height
    scale = short_side / min(width, height)
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def upright_rgb(frame, short_side: int | None) -> np.ndarray:  # noqa: ANN001 - av.VideoFrame
    """RGB pixels, resized while converting (swscale), then rotated as the display matrix says."""
    width, height = output_size(frame.width, frame.height, short_side)
    image = frame.to_ndarray(width=width, height=height, format="rgb24", interpolation="AREA")
    rotation = round(getattr(frame, "rotation", 0) or 0) % 360  # counter-clockwise, as the display matrix
    if rotation:
        image = np.ascontiguousarray(np.rot90(image, k=rotation // 90))
    return image


def _landed_past(packet, index: VideoIndex, keyframe: int) -> bool:  # noqa: ANN001 - av.Packet
    """Whether the first packet after a seek comes after ``keyframe`` in decode order (the seek overshot)."""
    if packet.dts is not None:
        return packet.dts > index.keyframe_dts.get(keyframe, keyframe)
    return packet.pts is not None and packet.pts > keyframe


class _Decoder:
    """Decodes forward from where it is, seeking only when that is less work. Skips undecodable packets."""

    def __init__(self, container, stream, index: VideoIndex, deadline: float,  # noqa: ANN001
                 wanted: set[int] | None = None, counters: dict[str, int] | None = None) -> None:
        self.container, self.stream, self.index, self.deadline = container, stream, index, deadline
        self.counters = counters if counters is not None else {"decoded": 0, "seeks": 0, "bad_packets": 0}
        # Packets of frames nobody asked for are decoded only if other frames reference them: a
        # non-reference frame (most B-frames) on the way to a wanted frame is skipped by the decoder.
        self.wanted_pts = wanted
        self._wanted_sorted = sorted(wanted) if wanted else []
        self._drain_at: int | None = None
        self._skipping = False
        self._frames: Iterator | None = None
        self.last_pts: int | None = None  # the last frame decoded
        self.carry = None  # a frame decoded past the previous wanted one, kept for the next request

    def _seek(self, keyframe: int) -> Iterator:
        """The packets from ``keyframe`` on.

        A demuxer that seeks by decode time (MPEG program and transport streams) asked for a keyframe's pts
        lands on the packet after it, which cannot decode without it: the first seek that lands past its
        keyframe tells, and from then on this video's seeks go to its keyframes' decode times.
        """
        index = self.index
        for _attempt in range(2):
            by_dts = index.seeks_by_dts  # read once: parallel workers share the index and may set it meanwhile
            target = index.seek_target(keyframe) if by_dts else keyframe
            self.container.seek(target, stream=self.stream, backward=True, any_frame=False)
            packets = self.container.demux(self.stream)
            first = next(packets, None)
            if first is None:
                return iter(())
            if by_dts or keyframe not in index.keyframe_dts or not _landed_past(first, index, keyframe):
                break
            index.seeks_by_dts = True
        return itertools.chain((first,), packets)

    def _frame_stream(self, packets: Iterator) -> Iterator:
        for packet in packets:
            if time.monotonic() > self.deadline:
                raise TimeoutError("watchdog")
            if self.wanted_pts is not None:
                skip = (not self.index.seeks_by_dts and packet.pts is not None
                        and packet.pts not in self.wanted_pts)
                if skip != self._skipping:
                    self.stream.codec_context.skip_frame = "NONREF" if skip else "DEFAULT"
                    self._skipping = skip
            drain = packet.pts is not None and packet.pts == self._drain_at
            try:
                frames = packet.decode()
                if drain:
                    # The next wanted frame lies past a keyframe (a seek): hand out the frames the decoder
                    # holds back for B-frame reordering now, instead of decoding packets nobody needs.
                    frames = [*frames, *self.stream.codec_context.decode(None)]
                    self.stream.codec_context.flush_buffers()
            except Exception as exc:  # noqa: BLE001 - corrupt data: skip the packet, keep going
                self.counters["bad_packets"] += 1
                log.debug("skipping undecodable packet at pts %s: %s", packet.pts, exc)
                continue
            for frame in frames:
                if frame.pts is not None:
                    self.counters["decoded"] += 1
                    yield frame
            if drain:
                return  # the decoder is reset; the next request seeks

    def _seek_follows(self, wanted: int) -> bool:
        """Whether the next wanted frame after ``wanted`` (if any) will be reached by a seek."""
        if not self._wanted_sorted:
            return False
        i = bisect.bisect_right(self._wanted_sorted, wanted)
        return i == len(self._wanted_sorted) or self.index.keyframe_between(wanted, self._wanted_sorted[i])

    def frame_at(self, wanted: int, keyframe: int):  # noqa: ANN201 - av.VideoFrame | None
        """The frame with pts == ``wanted``, or None when the stream does not deliver it.

        ``keyframe`` is where to seek from when a seek is needed: the keyframe at or before ``wanted``.
        """
        if self.carry is not None and self.carry.pts == wanted:
            frame, self.carry = self.carry, None
            return frame
        position = self.carry.pts if self.carry is not None else self.last_pts
        if self._frames is None or position is None or position >= wanted or self.index.keyframe_between(
            position, wanted
        ):
            self._frames = self._frame_stream(self._seek(keyframe))
            self.counters["seeks"] += 1
        self.carry = None
        # Packet timestamps next to a seek in a stream that seeks by decode time are guesses (a program stream
        # labels the packet before a keyframe with the keyframe's pts), so there the decoder is neither drained
        # at a packet's label nor told to skip frames by it.
        self._drain_at = wanted if (not self.index.seeks_by_dts and self._seek_follows(wanted)) else None
        for frame in self._frames:
            self.last_pts = frame.pts
            if frame.pts == wanted:
                return frame
            if frame.pts > wanted:
                self.carry = frame
                return None
        self._frames = None  # end of stream
        return None


def choose_accuracy(accuracy: Accuracy, index: VideoIndex, targets: Sequence[float],
                    keyframe_fraction: float = 0.25) -> Literal["exact", "keyframe"]:
    if accuracy != "auto":
        return accuracy
    ordered = sorted(targets)
    gaps = [b - a for a, b in zip(ordered, ordered[1:]) if b > a]
    spacing = statistics.median(gaps) if gaps else math.inf
    return "keyframe" if index.keyframe_interval_s <= keyframe_fraction * spacing else "exact"


def read_frames(
    path: str | Path,
    targets: Sequence[float] | Callable[[float, float], Sequence[float]],
    accuracy: Accuracy = "auto",
    short_side: int | None = None,
    keyframe_fraction: float = 0.25,
    watchdog_s: float | None = None,
    max_deviation_s: float | None = None,
    stats: dict | None = None,
    threads: int = 2,
    on_damaged: str | None = None,
) -> Iterator[SampledFrame]:
    """Yield one :class:`SampledFrame` per target, in the order the targets were given.

    ``targets`` may be a function of the video's (first, last) frame time, e.g. ``plan.targets``: it is
    called with the span read from the packet index, so the file is indexed once.

    Frames are decoded in timestamp order; targets given out of order are answered from a small buffer
    of at most one image per distinct wanted frame (plans give sorted targets, so the buffer stays empty).
    ``max_deviation_s`` (default: max(1 s, 2 frame durations)) bounds how far the chosen frame may be from
    its target in ``exact`` mode before the target counts as failed (a truncated file). ``on_damaged`` is
    the ``on_damaged_video`` policy (``fail`` | ``keep_decodable``) the stages pass; None (readers of a video
    a stage has already checked) skips the damage check and takes the packet index as the video.
    """
    import av

    from senri.media import MediaError
    from senri.probe import Decodability, require_intact

    deadline = time.monotonic() + (watchdog_s if watchdog_s else math.inf)
    # Unreadable as a whole (empty, not a video, cut before its MP4 index, no video stream) or damaged
    # under on_damaged_video=fail: one clear error before anything is written.
    verdict = require_intact(path, on_damaged) if on_damaged is not None else None
    try:
        container = av.open(str(path))
        stream = container.streams.video[0]
        index = build_index(container, stream)
    except (av.error.FFmpegError, IndexError, ValueError, OSError) as exc:
        raise MediaError(f"{path}: not a readable video ({exc})") from exc
    first_s = index.seconds(index.pts[0])  # on the video's timeline (0 s at the stream's start time)
    if verdict is None:  # no damage check asked for: the packet index is the video
        span = index.seconds(index.pts[-1]) + index.span_s(index.frame_duration)
        verdict = Decodability(str(path), index.span_s(index.origin), span, span, index.span_s(index.frame_duration))
    # A damaged video's plan covers the duration its container declares; what lies past the decodable end fails.
    last_s = (verdict.container_s - verdict.frame_s) if verdict.truncated else index.seconds(index.pts[-1])
    if callable(targets):
        try:
            targets = targets(first_s, last_s)
        except ValueError as exc:
            container.close()
            raise MediaError(f"{path}: {exc}") from exc
    with container:
        mode = choose_accuracy(accuracy, index, targets, keyframe_fraction)
        tolerance = max_deviation_s if max_deviation_s is not None else max(1.0, 2 * index.span_s(index.frame_duration))
        # Targets outside the video fail in every mode (a keyframe pick would otherwise answer 999 s with the
        # last keyframe); a damaged video allows no slack past its decodable end.
        wanted, results = _pick_frames(index, targets, mode, tolerance, (first_s, verdict.decodable_end_s),
                                       damaged=verdict if verdict.truncated else None)
        picks = sorted(set(wanted.values()))
        counters = {"decoded": 0, "seeks": 0, "bad_packets": 0}
        if mode == "exact" and not _seek_bound(index, picks):
            # Dense picks: one decoder going forward, frame-threaded, wins.
            stream.thread_type = "AUTO"
            decoder = _Decoder(container, stream, index, deadline, wanted=set(picks), counters=counters)
            images = ((pick, _decode_image(decoder, pick, short_side)) for pick in picks)
        else:
            # Every pick starts at its own keyframe: independent decoders, one per core, each taking every
            # `threads`-th pick, beat one decoder whose frame threads drain at every seek.
            images = _parallel_images(path, index, picks, short_side, deadline, max(1, threads), counters)
        image: np.ndarray | str | None = None
        image_pts: int | None = None
        next_out = 0
        for i in sorted(range(len(targets)), key=lambda k: targets[k]):  # decode in time order
            if i in wanted:
                pick = wanted[i]
                if pick != image_pts:  # targets sharing a frame reuse its image
                    image_pts, image = next(images)
                    assert image_pts == pick
                results[i] = (
                    SampledFrame(targets[i], index.frame_index(pick), index.seconds(pick),
                                 index.seconds(pick) - targets[i], image)
                    if isinstance(image, np.ndarray)
                    else SampledFrame(targets[i], error=_explain(image, watchdog_s, index.seconds(pick)))
                )
            while next_out in results:  # emit in the caller's order
                yield results.pop(next_out)
                next_out += 1
        images.close()  # stops and joins parallel workers, so their counters are in
        if stats is not None:
            stats.update(mode=mode, n_frames=len(index.pts), keyframe_interval_s=index.keyframe_interval_s, **counters)


def _seek_bound(index: VideoIndex, picks: list[int]) -> bool:
    """Whether most consecutive picks have a keyframe between them (so each pick costs its own seek)."""
    if len(picks) < 2:
        return True
    seeks = sum(index.keyframe_between(a, b) for a, b in zip(picks, picks[1:]))
    return seeks >= 0.8 * (len(picks) - 1)


def _parallel_images(path: str | Path, index: VideoIndex, picks: list[int], short_side: int | None,
                     deadline: float, threads: int, counters: dict[str, int]) -> Iterator[tuple[int, np.ndarray | str]]:
    """Frames decoded by ``threads`` workers (each its own demuxer and decoder), yielded in ``picks`` order.

    When every pick needs its own seek, a serial loop leaves a core idle; PyAV releases the GIL while
    decoding, so workers taking every ``threads``-th pick use them all. Each runs at most a few frames ahead.
    """
    import queue
    import threading

    import av

    stop = threading.Event()
    queues: list[queue.Queue] = [queue.Queue(maxsize=4) for _ in range(threads)]
    lock = threading.Lock()

    def deliver(worker: int, item: tuple[int, np.ndarray | str]) -> bool:
        while not stop.is_set():
            try:
                queues[worker].put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer went away

    def work(worker: int) -> None:
        mine = picks[worker::threads]
        local = {"decoded": 0, "seeks": 0, "bad_packets": 0}
        done = 0
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "NONE"  # a few frames per seek: frame threads would only add latency
                decoder = _Decoder(container, stream, index, deadline, wanted=set(mine), counters=local)
                for pick in mine:
                    item = WATCHDOG if time.monotonic() > deadline else _decode_image(decoder, pick, short_side)
                    if not deliver(worker, (pick, item)):
                        return
                    done += 1
        except Exception as exc:  # noqa: BLE001 - the worker's remaining picks fail with the reason
            for pick in mine[done:]:
                if not deliver(worker, (pick, f"decode error: {exc}")):
                    return
        finally:
            with lock:
                for key, value in local.items():
                    counters[key] += value

    workers = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(threads)]
    for worker in workers:
        worker.start()
    try:
        for j in range(len(picks)):
            yield queues[j % threads].get()
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=5)


WATCHDOG = "watchdog"


def _pick_frames(index: VideoIndex, targets: Sequence[float], mode: str, tolerance: float,
                 span: tuple[float, float] = (-math.inf, math.inf),
                 damaged: "Decodability | None" = None) -> tuple[dict[int, int], dict[int, SampledFrame]]:
    """Resolve every target to the pts it wants, before decoding.

    A target fails when it lies more than ``tolerance`` outside ``span`` (the video's first frame to the end
    of its last decodable frame; no slack past the end of a ``damaged`` video) or, in exact mode, when no
    frame is within ``tolerance`` of it.
    """
    wanted: dict[int, int] = {}
    failed: dict[int, SampledFrame] = {}
    first, end = span
    for i, target in enumerate(targets):
        if damaged is not None and target > end:
            failed[i] = SampledFrame(target, error=(
                f"target {target:.3f} s is past the decodable end at {end:.3f} s of a damaged video "
                f"({damaged.decodable_s:.2f} of {damaged.container_s:.2f} s decode)"))
            continue
        if not first - tolerance <= target <= end + tolerance:
            failed[i] = SampledFrame(target, error=f"target {target:.3f} s is outside the video ({first:.2f}–{end:.2f} s)")
            continue
        target_pts = index.to_pts(target)
        pick = index.nearest_frame(target_pts) if mode == "exact" else index.nearest_keyframe(target_pts)
        if mode == "exact" and abs(index.span_s(pick - target_pts)) > tolerance:
            failed[i] = SampledFrame(target, error=(
                f"no frame within {tolerance:.2f} s of {target:.3f} s (nearest at {index.seconds(pick):.3f} s; "
                "truncated file?)"))
        else:
            wanted[i] = pick
    return wanted, failed


def _decode_image(decoder: _Decoder, pick: int, short_side: int | None) -> np.ndarray | str:
    """The upright, resized image of frame ``pick``, or why there is none."""
    import av

    try:
        frame = decoder.frame_at(pick, decoder.index.keyframe_at_or_before(pick))
    except TimeoutError:
        return WATCHDOG
    except av.error.FFmpegError as exc:
        return f"decode error: {exc}"
    return "frame could not be decoded" if frame is None else upright_rgb(frame, short_side)


def _explain(reason: str | None, watchdog_s: float | None, pts_s: float) -> str:
    if reason == WATCHDOG:
        return f"watchdog: video not done within {watchdog_s} s"
    return f"{reason} (pts {pts_s:.3f} s)"


def probe_span(path: str | Path) -> tuple[float, float]:
    """First and last frame time of a video (from its packet index)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        index = build_index(container, stream)
        return index.seconds(index.pts[0]), index.seconds(index.pts[-1])


def encode_jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------ frame store


def write_frame_store(
    frames: Iterable[SampledFrame],
    out: str | Path,
    video_id: str,
    plan: str,
    jpeg_quality: int = 90,
    batch_size: int = 32,
) -> dict[str, int]:
    """Stream sampled frames into a Parquet frame store, ``batch_size`` rows per row group.

    Only one batch of JPEGs is in memory at a time; the file appears atomically when complete. A plan with
    targets of which none yields a frame raises :class:`~senri.media.MediaError` with the first reason and
    writes nothing: a frame store without a frame is never a success.
    """
    from senri.media import MediaError
    from senri.records import FrameRow, TableStream

    counts = {"frames": 0, "failed": 0}
    first_error: str | None = None
    with TableStream(out, FrameRow, batch_size=batch_size) as table:
        for sampled in frames:
            first_error = first_error or sampled.error
            image = sampled.image
            table.write(FrameRow(
                video_id=video_id, plan=plan, target_s=sampled.target_s, frame_index=sampled.frame_index,
                pts_s=sampled.pts_s, deviation_s=sampled.deviation_s,
                width=None if image is None else int(image.shape[1]),
                height=None if image is None else int(image.shape[0]),
                jpeg=None if image is None else encode_jpeg(image, jpeg_quality), error=sampled.error,
            ))
            counts["frames" if sampled.error is None else "failed"] += 1
        if counts["failed"] and not counts["frames"]:
            raise MediaError(f"{video_id}: plan {plan!r}: none of its {counts['failed']} targets gave a frame "
                             f"(first: {first_error})")
    return counts


def decode_jpeg(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def write_carrier(frame_store: str | Path, out: str | Path, fps: float = 1.0) -> int:
    """Pack a frame store's frames into a short H.264 video at ``fps`` (default 1 frame per second).

    For vision-language models that take video: carrier frame k is the k-th successfully sampled row of
    the store (rows with ``jpeg`` null are skipped), so carrier time k/fps maps back to that row's ``pts_s``.
    """
    import av
    import pyarrow.parquet as pq

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    written = 0
    try:
        with av.open(str(tmp), "w") as container:
            stream = None
            for batch in pq.ParquetFile(frame_store).iter_batches(columns=["jpeg"], batch_size=32):
                for data in batch.column(0).to_pylist():
                    if data is None:
                        continue
                    image = decode_jpeg(data)
                    height, width = (image.shape[0] // 2) * 2, (image.shape[1] // 2) * 2
                    if stream is None:
                        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
                        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
                        stream.options = {"crf": "20", "preset": "veryfast"}
                    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[:height, :width]), format="rgb24")
                    frame.pts = written
                    for packet in stream.encode(frame):
                        container.mux(packet)
                    written += 1
            if stream is not None:
                for packet in stream.encode(None):
                    container.mux(packet)
        if written == 0:
            raise ValueError(f"{frame_store}: no frames to pack into a carrier")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return written


def carrier_from_jpegs(jpegs: Sequence[bytes], fps: float = 1.0) -> bytes:
    """An in-memory carrier of ``jpegs`` (frame k at second k/fps), packed by :func:`write_carrier` itself so a
    verifier's carrier is encoded exactly like direct perception's."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="senri-carrier-") as folder:
        store, out = Path(folder) / "frames.parquet", Path(folder) / "carrier.mp4"
        pq.write_table(pa.table({"jpeg": pa.array(list(jpegs), pa.binary())}), store)
        write_carrier(store, out, fps=fps)
        return out.read_bytes()


def carrier_frame_count(mp4: bytes | str | Path) -> int:
    """Frames in a carrier video, counted from its packets (no decode): the check that a carrier holds exactly
    the frames that were sampled."""
    import av

    source = io.BytesIO(mp4) if isinstance(mp4, bytes) else str(mp4)
    with av.open(source) as container:
        stream = container.streams.video[0]
        return sum(1 for packet in container.demux(stream) if packet.size)
