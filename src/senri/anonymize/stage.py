"""The anonymization stage: decode → detect → blur → encode, streaming, with bounded memory.

Detection runs on every ``stride``-th frame (and on the last frame). Frames in between are covered by the
boxes of *both* bracketing detection frames plus each track's box interpolated between them, and a track
missed by the detector coasts on its velocity for up to ``max_missed`` detection frames
(:mod:`senri.anonymize.tracks`); at most ``stride`` decoded frames are held at once, whatever the video's
length. Boxes are grown by ``box_scale`` and blurred as EgoBlur does it: a box
blur of the region composited through the ellipse inscribed in the box, with the kernel a fraction of the
box size so small faces get a proportionally strong blur.

The output keeps the input's resolution (upright: a display rotation is applied to the pixels), frame count
and timestamps — a variable-frame-rate phone video keeps every frame's own timestamp, because the encoder
works in the input's time base (the detections table gives them on the video's timeline, seconds from the
stream's start, as the frame stores do); H.264 yuv420p (yuv444p when a side is odd, which 4:2:0 cannot hold); audio
is dropped unless ``keep_audio``. Every frame's boxes go to the detections table with ``source`` detected or
propagated.

A damaged input (decodable length short of its declared duration, :func:`senri.probe.check_decodable`)
fails with one line under ``on_damaged_video: fail``; under ``keep_decodable`` the decodable part is written
and the output's container comment says so, so probing the shorter copy still flags it ``truncated``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from senri import memtrim
from senri.anonymize.detectors import DETECTORS
from senri.anonymize.detectors.base import Box, Detector
from senri.anonymize.tracks import Tracker, interpolate
from senri.media import MediaError
from senri.probe import DAMAGED_SOURCE_TAG, Decodability, require_intact, timeline_origin
from senri.records import Detection, TableStream

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnonymizeConfig:
    detectors: tuple[str, ...] = ("centerface",)
    detector_config: Mapping[str, Any] = field(default_factory=dict)
    stride: int = 5
    max_missed: int = 2
    box_scale: float = 1.3
    blur_fraction: float = 0.5
    keep_audio: bool = False
    crf: int = 18
    preset: str = "veryfast"
    on_damaged_video: str = "fail"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "AnonymizeConfig":
        return cls(
            detectors=tuple(data.get("detectors", ("centerface",))),
            detector_config=dict(data.get("detector_config") or {}),
            stride=int(data.get("stride", 5)),
            max_missed=int(data.get("max_missed", 2)),
            box_scale=float(data.get("box_scale", 1.3)),
            blur_fraction=float(data.get("blur_fraction", 0.5)),
            keep_audio=bool(data.get("keep_audio", False)),
            crf=int(data.get("crf", 18)),
            preset=str(data.get("preset", "veryfast")),
            on_damaged_video=str(data.get("on_damaged_video", "fail")),
        )


@dataclass
class AnonymizeStats:
    frames: int = 0
    detected_frames: int = 0
    propagated_frames: int = 0
    boxes: int = 0
    detect_s: float = 0.0
    wall_s: float = 0.0


def blur_boxes(image: np.ndarray, boxes: list[Box], blur_fraction: float) -> None:
    """Blur each box in place: box blur of the region, composited through its inscribed ellipse."""
    import cv2

    height, width = image.shape[:2]
    for box in boxes:
        x0, y0 = max(0, int(np.floor(box.x0))), max(0, int(np.floor(box.y0)))
        x1, y1 = min(width, int(np.ceil(box.x1))), min(height, int(np.ceil(box.y1)))
        if x1 - x0 < 2 or y1 - y0 < 2:
            continue
        region = image[y0:y1, x0:x1]
        kernel = max(3, int(round(max(x1 - x0, y1 - y0) * blur_fraction)))
        # Two passes of a box blur approximate a Gaussian: no block edges that hint at the original.
        blurred = cv2.blur(cv2.blur(region, (kernel, kernel)), (kernel, kernel))
        mask = np.zeros(region.shape[:2], np.uint8)
        cv2.ellipse(mask, (((x1 - x0) / 2, (y1 - y0) / 2), (float(x1 - x0), float(y1 - y0)), 0.0), 255, -1)
        region[mask > 0] = blurred[mask > 0]


def _detect(detectors: list[Detector], image: np.ndarray, scale: float) -> list[Box]:
    height, width = image.shape[:2]
    return [box.scaled(scale, width, height) for detector in detectors for box in detector.detect(image)]


def _write(table: TableStream, video_id: str, index: int, pts_s: float, boxes: list[Box], source: str) -> None:
    """One detections-table row per box of one frame."""
    for b in boxes:
        table.write(Detection(video_id=video_id, frame_index=index, pts_s=pts_s, cls=b.cls, score=round(b.score, 4),
                              x0=round(b.x0, 2), y0=round(b.y0, 2), x1=round(b.x1, 2), y1=round(b.y1, 2),
                              source=source))


def anonymize_video(src: str | Path, out: str | Path, detections_out: str | Path, video_id: str,
                    config: AnonymizeConfig) -> AnonymizeStats:
    """Write the anonymized video and its detections table; both appear atomically when complete."""
    src, out, detections_out = Path(src), Path(out), Path(detections_out)
    started = time.perf_counter()
    verdict = require_intact(src, config.on_damaged_video)  # an unreadable or (by default) damaged video stops here
    detectors = [DETECTORS.load(name)(config.detector_config) for name in config.detectors]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        # Detections stream to disk as they are made: memory stays flat however long the video.
        with TableStream(detections_out, Detection) as rows:
            stats = _stream(src, tmp, video_id, config, detectors, rows, verdict)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stats.boxes = rows.rows
    stats.wall_s = time.perf_counter() - started
    log.info("%s: %d frames (%d detected, %d propagated), %d boxes, detection %.1f s of %.1f s", video_id,
             stats.frames, stats.detected_frames, stats.propagated_frames, stats.boxes, stats.detect_s, stats.wall_s)
    return stats


def _stream(src: Path, tmp: Path, video_id: str, config: AnonymizeConfig, detectors: list[Detector],
            rows: TableStream, verdict: Decodability) -> AnonymizeStats:
    import av

    from senri.decode import upright_rgb

    stats = AnonymizeStats()
    try:
        source = av.open(str(src))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"{src}: cannot open as a video ({exc})") from exc
    with source:
        if not source.streams.video:
            raise MediaError(f"{src}: no video stream")
        video_in = source.streams.video[0]
        # Frame threads silently drop the frames around a corrupt packet; a damaged input decodes slice-threaded.
        video_in.thread_type = "SLICE" if verdict.truncated else "AUTO"
        audio_in = source.streams.audio[0] if (config.keep_audio and source.streams.audio) else None
        rate = video_in.average_rate or video_in.guessed_rate
        if not rate or rate <= 0 or rate > 1000:
            raise MediaError(f"{src}: unusable frame rate metadata ({rate}); re-mux the file with a valid rate")
        with av.open(str(tmp), "w") as sink:
            if verdict.truncated:
                sink.metadata["comment"] = (f"{DAMAGED_SOURCE_TAG}: {verdict.decodable_s:.3f} of "
                                            f"{verdict.container_s:.3f} s decode")
            video_out = None
            audio_out = sink.add_stream_from_template(audio_in) if audio_in is not None else None
            pending: list[tuple[int, float, int | None, np.ndarray]] = []  # frames since the last detection
            previous: list[Box] = []
            tracker = Tracker(max_missed=config.max_missed)

            def encode(image: np.ndarray, pts: int | None) -> None:
                nonlocal video_out
                if video_out is None:
                    height, width = image.shape[:2]
                    video_out = sink.add_stream("libx264", rate=Fraction(rate).limit_denominator(100000))
                    video_out.width, video_out.height = width, height
                    video_out.pix_fmt = "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"
                    # The encoder counts in the input's time base, not 1/rate: with 1/rate a variable-frame-
                    # rate input gets decode timestamps past its presentation ones and the muxer refuses them.
                    video_out.time_base = video_in.time_base
                    video_out.codec_context.time_base = video_in.time_base
                    # A keyframe every second, as action cameras record: frame sampling stays cheap downstream.
                    video_out.options = {"crf": str(config.crf), "preset": config.preset,
                                         "g": str(max(1, round(float(rate))))}
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                frame.pts, frame.time_base = pts, video_in.time_base
                for packet in video_out.encode(frame):
                    sink.mux(packet)

            def flush(detected: list[Box]) -> None:
                """Blur and encode the pending frames: the last is a detection frame, the rest lie between
                it and the previous one and get the tracks' interpolated boxes plus both ends' boxes."""
                nonlocal previous
                *between, (index, pts_s, pts, image) = pending
                step = tracker.update(index, detected)
                now = step.detected + step.predicted
                last_index = between[0][0] - 1 if between else index
                for j, p_s, p, img in between:
                    fraction = (j - last_index) / (index - last_index)
                    covered = previous + now + [interpolate(a, b, fraction) for a, b in step.spans]
                    blur_boxes(img, covered, config.blur_fraction)
                    _write(rows, video_id, j, p_s, covered, "propagated")
                    encode(img, p)
                    stats.propagated_frames += 1
                blur_boxes(image, now, config.blur_fraction)
                _write(rows, video_id, index, pts_s, step.detected, "detected")
                _write(rows, video_id, index, pts_s, step.predicted, "propagated")
                encode(image, pts)
                stats.detected_frames += 1
                previous = now
                pending.clear()

            def detect_last() -> list[Box]:
                t0 = time.perf_counter()
                boxes = _detect(detectors, pending[-1][3], config.box_scale)
                stats.detect_s += time.perf_counter() - t0
                return boxes

            index = 0
            if video_in.start_time is None:
                # A raw elementary stream's parser stamps its first frame one frame early unless it was sought
                # to; reading from a seek to the start stamps every frame as the frame sampler's index does.
                source.seek(0, stream=video_in, backward=True, any_frame=False)
            origin = timeline_origin(video_in)  # detections' times are on the video's timeline, as frames' are
            streams = [video_in] + ([audio_in] if audio_in is not None else [])
            held_audio: list[Any] = []  # audio packets demuxed before the video stream was added
            try:
                for packet in source.demux(*streams):
                    if audio_in is not None and packet.stream is audio_in:
                        if packet.dts is not None:
                            packet.stream = audio_out
                            # The muxer writes its header at the first packet: audio demuxed before the first
                            # video frame waits until the video stream exists (muxed into a header without it,
                            # the encoder's first packet crashed the process: SIGFPE).
                            if video_out is None:
                                held_audio.append(packet)
                            else:
                                for held in held_audio:
                                    sink.mux(held)
                                held_audio.clear()
                                sink.mux(packet)
                        continue
                    try:
                        frames = packet.decode()
                    except av.FFmpegError as exc:  # a corrupt packet: skip it, as the frame sampler does
                        log.warning("%s: skipping an undecodable packet after frame %d (%s)", src, index, exc)
                        continue
                    for frame in frames:
                        pts_s = (float((frame.pts - origin) * video_in.time_base) if frame.pts is not None
                                 else float("nan"))
                        pending.append((index, pts_s, frame.pts, upright_rgb(frame, None)))
                        if index % config.stride == 0:
                            flush(detect_last())
                        index += 1
                        memtrim.every(index)  # keeps resident memory flat over hours of frames
            except av.FFmpegError as exc:
                log.warning("%s: decoding stopped at frame %d (%s); the frames before it are kept", src, index, exc)
            if pending:
                flush(detect_last())
            if video_out is None:
                raise MediaError(f"{src}: no decodable video frame")
            for packet in held_audio:
                sink.mux(packet)
            for packet in video_out.encode():
                sink.mux(packet)
        stats.frames = index
    return stats
