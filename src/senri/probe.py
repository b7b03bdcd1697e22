"""ffprobe every video into one row of facts that later stages plan with (duration, frame rate, GOP, …).

The keyframe interval and the variable-frame-rate check come from a packet scan bounded to the first
``keyframe_scan_s`` seconds, so probing a 2.5-hour file reads a few minutes of packets, not hours.
"""

from __future__ import annotations

import hashlib
import statistics
from fractions import Fraction
from pathlib import Path
from typing import Any

from senri.media import MediaError, ffprobe_json
from senri.records import VideoInfo

FINGERPRINT_CHUNK = 1 << 20


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
    duration = _float(video.get("duration")) or _float(info.get("format", {}).get("duration"))
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
    )
