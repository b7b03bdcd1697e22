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

Every stage works on the video's own timeline: seconds measured from the stream's start time
(:func:`timeline_origin`, read once from the container), not the container's raw timestamps. An MP4 starts at
0, so for it the two agree; an MPEG program or transport stream from a camcorder or a TV recording starts at
0.54 s or 1.4 s or hours in, and its first frame is still at 0 s for frames, anonymize, track and the answer
stage. The probe table records that start (``start_s``) and where the duration came from
(``duration_source``): a duration the stream does not declare, or one contradicted by what decodes (a raw
MPEG-1/2 elementary stream's bitrate estimate says 0.01 s of a 3 s video), is replaced by the decoded extent.
"""

from __future__ import annotations

import hashlib
import logging
import re
import statistics
from dataclasses import dataclass, field
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
#: Where a video's duration came from: the stream's duration field, its Matroska DURATION tag, the container's
#: duration, or the decoded extent (the declared one was missing or shorter than what decodes).
DURATION_SOURCES: tuple[str, ...] = ("stream", "tag", "container", "decoded")


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


def stream_time_base(text: Any) -> str | None:
    """ffprobe's ``time_base`` of a stream ("1/15360") as a reduced fraction string; None where it is absent or
    not a positive fraction ("0/0", "N/A"), so a stage that needs it falls back rather than dividing by it."""
    try:
        value = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        return None
    return str(value) if value > 0 else None


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
    # which a longer audio track may stretch; the decoded extent when none is declared or it is contradicted.
    duration = verdict.declared_s if verdict.duration_source != "decoded" else verdict.container_s
    if not duration or duration <= 0 or not (avg_fps or r_fps):
        raise MediaError(f"{path}: video stream has no usable duration or frame rate")
    if verdict.duration_source == "decoded" and verdict.frames_seen is not None:
        n_frames = verdict.frames_seen  # counted from the first frame to the last: no declared count to trust
    elif str(video.get("nb_frames", "")).isdigit():
        n_frames = int(video["nb_frames"])
    else:
        n_frames = round(duration * (avg_fps or r_fps))
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
        start_s=round(verdict.start_s, 6),
        duration_source=verdict.duration_source,
        time_base=stream_time_base(video.get("time_base")),
    )


# ------------------------------------------------------------------------------------- damaged videos


def timeline_origin(stream, first_pts: int | None = None) -> int:  # noqa: ANN001 - av.VideoStream
    """The pts that is 0 s on the video's timeline, in the stream's time base.

    The stream's start time as the container reports it when the file is opened (no extra pass over the
    packets): 0 for an MP4, 0.54 s for a camcorder's program stream, 1.4 s or hours for a transport stream. A
    stream without one (a raw elementary stream) starts at its first packet, ``first_pts`` when known, else 0.
    """
    if stream.start_time is not None:
        return int(stream.start_time)
    return first_pts if first_pts is not None else 0


def untimed_first_pts(stream, first: int, second: int, frame_ticks: float) -> int:  # noqa: ANN001
    """The first frame's pts as a seek back to it stamps it.

    A raw elementary stream (no start time) has no timestamps: its parser stamps the first frame 0 when the
    file is opened but one frame before the second frame after a seek back to it, as it stamps every later
    frame. Taking the seek's stamp puts every frame at k/fps on the timeline.
    """
    if stream.start_time is None and second - first > 1.5 * frame_ticks:
        return round(second - frame_ticks)
    return first


def seek_point(pts: int, dts: int | None) -> int:
    """Where to seek to land on a keyframe (presentation time ``pts``, decode time ``dts``) in any demuxer.

    MP4 and Matroska seek by presentation time; MPEG program and transport streams and raw elementary streams
    by decode time, and a keyframe's decode time lies before its presentation time, so seeking to its pts
    lands on the frame after it. One tick before its decode time lands on the packet before it (a program
    stream's parser that starts at the keyframe's own pack loses its picture header): on the keyframe, or
    one GOP before it, in every demuxer.
    """
    return pts if dts is None or dts >= pts else dts - 1


def _declared_duration(stream, container) -> tuple[float | None, str]:  # noqa: ANN001 - PyAV objects
    """(the duration the file declares for its video stream, where it came from), (None, "decoded") if none."""
    tagged = re.fullmatch(r"(\d+):(\d+):(\d+(?:\.\d+)?)", str(stream.metadata.get("DURATION", "")).strip())
    if stream.duration:
        return float(stream.duration * Fraction(stream.time_base)), "stream"
    if tagged:  # Matroska keeps a stream's length in a tag; the container's may be a longer audio track's
        return int(tagged.group(1)) * 3600 + int(tagged.group(2)) * 60 + float(tagged.group(3)), "tag"
    if container.duration:
        return container.duration / 1_000_000, "container"
    return None, "decoded"


def length_tolerance_s(frame_s: float) -> float:
    """How far a decoded length may differ from a declared one and still agree with it (either way): edit
    lists and a last frame's duration vary."""
    return max(0.25, 3 * frame_s)


@dataclass(frozen=True)
class Decodability:
    """How much of a video really decodes, against the duration its container declares.

    Times are on the video's timeline (seconds from ``start_s``, :func:`timeline_origin`).
    """

    path: str
    start_s: float  # the stream's start time in container seconds: 0 s of the video's timeline
    container_s: float  # the duration stages plan with: the declared one, or the decoded extent (duration_source)
    decodable_s: float  # seconds from the start to the end of the last frame that decodes
    frame_s: float  # a typical frame duration
    error: str | None = None  # the error decoding ended in (None when it ended cleanly)
    declared_s: float | None = None  # what the video stream itself declares (None: nothing)
    duration_source: str = "stream"  # one of DURATION_SOURCES
    frames_seen: int | None = None  # frames from the first to the last, when the check went through all of them

    @property
    def tolerance_s(self) -> float:
        return length_tolerance_s(self.frame_s)

    @property
    def truncated(self) -> bool:
        return self.error is not None or self.decodable_s < self.container_s - self.tolerance_s

    @property
    def decodable_end_s(self) -> float:
        """Where the last decodable frame ends on the video's timeline."""
        return self.decodable_s

    def describe(self) -> str:
        why = f"; decoding ends in an error: {self.error}" if self.error else ""
        return (f"{self.path}: damaged video: only {self.decodable_s:.2f} s of its {self.container_s:.2f} s "
                f"decode (truncated or corrupt{why})")


@dataclass
class _Scan:
    last_pts: int | None = None  # the last frame decoded
    error: str | None = None  # the error decoding ended in
    frames: int = 0  # frames decoded, plus packets only demuxed past ``decode_until``
    untimed: int = 0  # frames that decoded without a timestamp
    first_pts: list[int] = field(default_factory=list)  # the first three frames' pts (decoded in order)


def _decode_to_end(container, stream, seek_to: int | None, decode_until: int | None = None) -> _Scan:  # noqa: ANN001
    """Decode from ``seek_to`` (None: from where the container is) to the end of the stream.

    Past ``decode_until`` (a declared end the stream runs beyond) packets are only demuxed, which costs no
    decoding, and at the end the GOP of the last keyframe is decoded: so a raw elementary stream whose bitrate
    estimate says 0.01 s is measured to its real end without decoding hours of it.
    """
    import av

    if seek_to is not None:
        container.seek(seek_to, stream=stream, backward=True, any_frame=False)
    scan = _Scan()
    last_keyframe: int | None = None  # where to seek for the last GOP, once decoding stopped
    try:
        for packet in container.demux(stream):
            if last_keyframe is None and decode_until is not None and packet.is_keyframe \
                    and packet.pts is not None and packet.pts > decode_until:
                last_keyframe = seek_point(packet.pts, packet.dts)
                scan.frames += sum(f.pts is not None for f in stream.codec_context.decode(None))  # reorder delay
                stream.codec_context.flush_buffers()
            if last_keyframe is not None:
                if packet.size and packet.pts is not None:
                    scan.frames += 1
                    if packet.is_keyframe:
                        last_keyframe = seek_point(packet.pts, packet.dts)
                continue
            try:
                frames = packet.decode()
            except av.FFmpegError as exc:
                scan.error = f"{type(exc).__name__}: {exc}"
                continue
            for frame in frames:
                scan.untimed += frame.pts is None
                if frame.pts is not None:
                    scan.frames += 1
                    if len(scan.first_pts) < 3:
                        scan.first_pts.append(frame.pts)
                    scan.last_pts = frame.pts if scan.last_pts is None else max(scan.last_pts, frame.pts)
                    scan.error = None  # decoding recovered after the error: it does not end in one
    except (av.FFmpegError, EOFError) as exc:
        scan.error = f"{type(exc).__name__}: {exc}"
    if last_keyframe is not None:
        tail = _decode_to_end(container, stream, last_keyframe)
        scan.error = tail.error
        if tail.last_pts is not None:
            scan.last_pts = tail.last_pts if scan.last_pts is None else max(scan.last_pts, tail.last_pts)
    return scan


def check_decodable(path: str | Path, tail_s: float = DECODE_TAIL_S) -> Decodability:
    """Decode the last seconds the container declares and see whether the video really reaches its end.

    Cheap for an intact file of any length (one GOP plus ``tail_s`` decoded). When the tail yields no frame
    (the data stops earlier), the packets are scanned from the start to find where they stop and the last
    GOP is decoded from its keyframe. A stream that runs past its declared end (or declares none) is measured
    to its real end, and that decoded extent is its duration. Anything that is not a readable video stream
    raises :class:`MediaError`. A stage's copy of a damaged video's decodable part (its container comment starts
    with :data:`DAMAGED_SOURCE_TAG`) is judged against the source's declared length, so it stays damaged
    downstream.
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
        start = timeline_origin(stream)
        declared, source = _declared_duration(stream, container)
        # A copy a stage made of a damaged video's decodable part (keep_decodable) declares the source's length.
        inherited = re.match(rf"{re.escape(DAMAGED_SOURCE_TAG)}: [\d.]+ of ([\d.]+) s",
                             str(container.metadata.get("comment", "")))
        rate = stream.average_rate or stream.guessed_rate
        frame_s = 1 / float(rate) if rate and 0 < rate <= 1000 else 1 / 30
        tail_start = start + round(Fraction(max(0.0, (declared or 0.0) - tail_s)) / time_base)
        decode_until = start + round(Fraction((declared or 0.0) + tail_s) / time_base)
        from_start = tail_start <= start  # a fresh container reads from its first packet: no seek needed
        scan = _decode_to_end(container, stream, None if from_start else tail_start, decode_until)
        if scan.last_pts is None and not from_start:
            # The tail holds nothing: find where the packets stop (demux only), then decode the GOP that holds it.
            scan = _decode_to_end(container, stream, start, decode_until=start)
        if scan.last_pts is None and scan.untimed:
            raise MediaError(f"{path}: {scan.untimed} video frames decode but none has a timestamp (a raw H.264 or "
                             "HEVC stream?); put it in a container first, e.g. ffmpeg -r <fps> -i <file> -c copy "
                             "out.mp4")
        if scan.last_pts is None:
            raise MediaError(f"{path}: no video frame decodes"
                             + (f" ({scan.error})" if scan.error else ""))
        if from_start and len(scan.first_pts) == 3 and stream.start_time is None:
            # A raw stream: its rate as opened is a guess (25 fps for a 30 fps MPEG-1 stream); the frames say.
            first, second, third = scan.first_pts
            frame_s = float((third - second) * time_base) or frame_s
            start = untimed_first_pts(stream, first, second, third - second)
        decodable = float((scan.last_pts - start) * time_base) + frame_s
        duration = declared
        if declared is None or decodable > declared + length_tolerance_s(frame_s):
            duration, source = decodable, "decoded"  # missing, or contradicted by what decodes
        if inherited:
            duration = max(duration, float(inherited.group(1)))
        return Decodability(str(path), float(start * time_base), duration, decodable, frame_s, scan.error,
                            declared_s=declared, duration_source=source,
                            frames_seen=scan.frames if from_start else None)


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
