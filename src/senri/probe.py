"""ffprobe every video into one row of facts that later stages plan with (duration, frame rate, GOP, …).

The keyframe interval and the variable-frame-rate check come from a packet scan bounded to the first
``keyframe_scan_s`` seconds, so probing a 2.5-hour file reads a few minutes of packets, not hours.

Damage is checked the same way for every stage that reads video (:func:`check_decodable`): the decodable
length (where the last frame that actually decodes ends) against the duration the container declares. A
recording cut short (a phone that died, a copy that stopped half-way) keeps its full-length index, so
without this check every stage would silently work on a shorter video. The probe table records the verdict
(``truncated``, ``decodable_s``); the frames, anonymize and track stages consult the same check and apply
``on_damaged_video``: ``fail`` (the default: one line naming the file) or ``keep_decodable`` (work on the
decodable part and record every target past it as a failed row with the reason).
"""

from __future__ import annotations

import hashlib
import logging
import re
import statistics
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from senri.media import MediaError, ffprobe_json
from senri.records import VideoInfo

log = logging.getLogger(__name__)

FINGERPRINT_CHUNK = 1 << 20
#: Seconds before the declared end where the damage check starts decoding (plus the GOP it falls in).
DECODE_TAIL_S = 5.0
DAMAGE_POLICIES: tuple[str, ...] = ("fail", "keep_decodable")
#: Start of the container comment a stage writes into a video it made from the decodable part of a damaged one.
DAMAGED_SOURCE_TAG = "senri: decodable part of a damaged source"


def file_sha256(path: str | Path) -> str:
    """The sha256 of a whole file, read in 1 MiB blocks (model files: their identity must be exact)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(path: str | Path) -> str:
    """A cheap content hash: size plus the first and last MiB. Changes when the file is re-encoded or cut."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(FINGERPRINT_CHUNK))
        if size > FINGERPRINT_CHUNK:
            handle.seek(max(FINGERPRINT_CHUNK, size - FINGERPRINT_CHUNK))
            digest.update(handle.read(FINGERPRINT_CHUNK))
    return digest.hexdigest()[:32]


def _rate(text: str | None) -> float:
    if not text or text in ("0/0", "N/A"):
        return 0.0
    try:
        return float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        return 0.0


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _rotation(stream: dict[str, Any]) -> int:
    for side_data in stream.get("side_data_list", []) or []:
        if "rotation" in side_data:
            return int(round(float(side_data["rotation"]))) % 360
    rotate = stream.get("tags", {}).get("rotate")
    return int(rotate) % 360 if rotate else 0


def scan_packets(path: str | Path, scan_s: float) -> tuple[float | None, bool]:
    """(median keyframe interval in seconds, whether frame durations vary) over the first ``scan_s`` seconds."""
    data = ffprobe_json(
        path,
        ["-select_streams", "v:0", "-read_intervals", f"%+{scan_s}", "-show_entries", "packet=pts_time,flags"],
    )
    packets = [p for p in data.get("packets", []) if _float(p.get("pts_time")) is not None]
    keyframes = sorted(float(p["pts_time"]) for p in packets if "K" in p.get("flags", ""))
    gaps = [b - a for a, b in zip(keyframes, keyframes[1:])]
    keyframe_interval = round(statistics.median(gaps), 6) if gaps else None
    times = sorted(float(p["pts_time"]) for p in packets)
    deltas = [b - a for a, b in zip(times, times[1:]) if b > a]
    varies = False
    if len(deltas) >= 2:
        typical = statistics.median(deltas)
        # Allow a timebase tick of jitter (MP4 timebases round 1/30 s); real VFR varies by whole frames.
        varies = any(abs(d - typical) > 0.25 * typical for d in deltas)
    return keyframe_interval, varies


def probe(path: str | Path, video_id: str, keyframe_scan_s: float = 120.0) -> VideoInfo:
    """Probe one file; anything that is not a decodable video stream raises :class:`MediaError` naming it."""
    path = Path(path)
    info = ffprobe_json(path, ["-show_format", "-show_streams"])
    streams = info.get("streams", [])
    video = next((s for s in streams if s.get("codec_type") == "video"
                  and not s.get("disposition", {}).get("attached_pic")), None)
    if video is None:
        raise MediaError(f"{path}: no video stream")
    avg_fps, r_fps = _rate(video.get("avg_frame_rate")), _rate(video.get("r_frame_rate"))
    verdict = check_decodable(path)  # also raises, naming the file, when nothing decodes
    # The video stream's own length (a Matroska tag when the stream has no duration field), not the container's,
    # which a longer audio track may stretch.
    duration = _float(video.get("duration")) or verdict.container_s
    if not duration or duration <= 0 or not (avg_fps or r_fps):
        raise MediaError(f"{path}: video stream has no usable duration or frame rate")
    n_frames = int(video["nb_frames"]) if str(video.get("nb_frames", "")).isdigit() else round(duration * (avg_fps or r_fps))
    keyframe_interval, varies = scan_packets(path, keyframe_scan_s)
    return VideoInfo(
        video_id=video_id,
        path=str(path),
        duration_s=duration,
        avg_fps=avg_fps,
        r_fps=r_fps,
        n_frames=n_frames,
        width=int(video.get("width", 0)),
        height=int(video.get("height", 0)),
        rotation=_rotation(video),
        codec=str(video.get("codec_name", "unknown")),
        keyframe_interval_s=keyframe_interval,
        is_vfr=varies or (avg_fps > 0 and r_fps > 0 and abs(avg_fps - r_fps) / r_fps > 0.01),
        has_audio=any(s.get("codec_type") == "audio" for s in streams),
        size_bytes=path.stat().st_size,
        fingerprint=fingerprint(path),
        truncated=verdict.truncated,
        decodable_s=round(verdict.decodable_s, 6),
    )


# ------------------------------------------------------------------------------------- damaged videos


@dataclass(frozen=True)
class Decodability:
    """How much of a video really decodes, against the duration its container declares."""

    path: str
    first_s: float  # the first frame's timestamp
    container_s: float  # the video stream's declared duration
    decodable_s: float  # seconds from the first frame to the end of the last frame that decodes
    frame_s: float  # a typical frame duration
    error: str | None = None  # the error decoding ended in (None when it ended cleanly)

    @property
    def tolerance_s(self) -> float:
        """Shortfall allowed before a video counts as cut: edit lists and a last frame's duration vary."""
        return max(0.25, 3 * self.frame_s)

    @property
    def truncated(self) -> bool:
        return self.error is not None or self.decodable_s < self.container_s - self.tolerance_s

    @property
    def decodable_end_s(self) -> float:
        """Timestamp where the last decodable frame ends."""
        return self.first_s + self.decodable_s

    def describe(self) -> str:
        why = f"; decoding ends in an error: {self.error}" if self.error else ""
        return (f"{self.path}: damaged video: only {self.decodable_s:.2f} s of its {self.container_s:.2f} s "
                f"decode (truncated or corrupt{why})")


def _decode_to_end(container, stream, seek_pts: int | None) -> tuple[int | None, str | None]:  # noqa: ANN001
    """(last decoded pts, the error decoding ended in) decoding from ``seek_pts`` to the end of the stream."""
    import av

    if seek_pts is not None:
        container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
    last_frame: int | None = None
    error: str | None = None
    try:
        for packet in container.demux(stream):
            try:
                frames = packet.decode()
            except av.FFmpegError as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            for frame in frames:
                if frame.pts is not None:
                    last_frame = frame.pts if last_frame is None else max(last_frame, frame.pts)
                    error = None  # decoding recovered after the error: it does not end in one
    except (av.FFmpegError, EOFError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    return last_frame, error


def check_decodable(path: str | Path, tail_s: float = DECODE_TAIL_S) -> Decodability:
    """Decode the last seconds the container declares and see whether the video really reaches its end.

    Cheap for an intact file of any length (one GOP plus ``tail_s`` decoded). When the tail yields no frame
    (the data stops earlier), the packets are scanned from the start to find where they stop and the last
    GOP is decoded from its keyframe. Anything that is not a readable video stream raises :class:`MediaError`.
    A stage's copy of a damaged video's decodable part (its container comment starts with
    :data:`DAMAGED_SOURCE_TAG`) is judged against the source's declared length, so it stays damaged downstream.
    """
    import av

    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such video file")
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise MediaError(f"{path}: not a readable video ({exc})") from exc
    with container:
        if not container.streams.video:
            raise MediaError(f"{path}: no video stream")
        stream = container.streams.video[0]
        time_base = Fraction(stream.time_base)
        start = stream.start_time or 0
        tagged = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", str(stream.metadata.get("DURATION", "")).strip())
        if stream.duration:
            declared = float(stream.duration * time_base)
        elif tagged:  # Matroska keeps a stream's length in a tag; the container's may be a longer audio track's
            declared = int(tagged.group(1)) * 3600 + int(tagged.group(2)) * 60 + float(tagged.group(3))
        elif container.duration:
            declared = container.duration / 1_000_000
        else:
            raise MediaError(f"{path}: video stream declares no duration")
        # A copy a stage made of a damaged video's decodable part (keep_decodable) declares the source's length.
        inherited = re.match(rf"{re.escape(DAMAGED_SOURCE_TAG)}: [\d.]+ of ([\d.]+) s",
                             str(container.metadata.get("comment", "")))
        rate = stream.average_rate or stream.guessed_rate
        frame_s = 1 / float(rate) if rate and 0 < rate <= 1000 else 1 / 30
        tail_start = start + round(Fraction(max(0.0, declared - tail_s)) / time_base)
        if inherited:
            declared = max(declared, float(inherited.group(1)))
        last_frame, error = _decode_to_end(container, stream, tail_start if tail_start > start else None)
        if last_frame is None and tail_start > start:
            # The tail holds nothing: find where the packets stop, then decode the GOP that holds that point.
            container.seek(start, stream=stream, backward=True, any_frame=False)
            keyframes = []
            try:
                for packet in container.demux(stream):
                    if packet.size and packet.pts is not None and packet.is_keyframe:
                        keyframes.append(packet.pts)
            except (av.FFmpegError, EOFError):
                pass
            if keyframes:
                last_frame, error = _decode_to_end(container, stream, max(keyframes))
        if last_frame is None:
            raise MediaError(f"{path}: no video frame decodes"
                             + (f" ({error})" if error else ""))
        decodable = float((last_frame - start) * time_base) + frame_s
        return Decodability(str(path), float(start * time_base), declared, decodable, frame_s, error)


def require_intact(path: str | Path, on_damaged: str) -> Decodability:
    """:func:`check_decodable`, applying the ``on_damaged_video`` policy: ``fail`` raises one line naming the
    file; ``keep_decodable`` logs a warning and hands the verdict to the stage, which fails what lies past it."""
    if on_damaged not in DAMAGE_POLICIES:
        raise ValueError(f"on_damaged_video: {on_damaged!r} is not one of {', '.join(DAMAGE_POLICIES)}")
    verdict = check_decodable(path)
    if verdict.truncated:
        if on_damaged == "fail":  # (a stage's copy of a damaged video's decodable part counts as damaged too)
            raise MediaError(f"{verdict.describe()}; set on_damaged_video: keep_decodable to use the decodable part")
        log.warning("%s; on_damaged_video=keep_decodable: using the decodable part, later targets fail",
                    verdict.describe())
    return verdict
