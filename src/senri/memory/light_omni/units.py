"""L-C1: a video as Light-Omni's 1-s units — one 16-kHz mono PCM WAV and one ``fps=1`` PNG per second, paired
in sorted file order, unit i at START_TIME + i s.

The release runs two ffmpeg commands (the segment muxer for the audio with reset timestamps; ``fps=1/1`` for the
frames); when the audio command fails (no audio track) it writes the same number of 1-s SILENT segments from
``anullsrc`` limited to the video's duration. senri does the same, and records which audio was read, so a
build over a silent (e.g. anonymized) video says so. The >600-s random truncation is off in the release's
evaluation (long_video_sample=False) and is not offered.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from senri.memory.light_omni.replies import START_TIME, add_time


@dataclass(frozen=True)
class Unit:
    index: int
    timestamp: str
    image: Path
    audio: Path


@dataclass(frozen=True)
class Units:
    units: list[Unit]
    #: "track" (the video's own audio) or "silent" (no readable audio track: 1-s silences, L-C1)
    audio_source: str


def _probe_duration(video: Path) -> float | None:
    try:
        out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                              "default=noprint_wrappers=1:nokey=1", str(video)], capture_output=True, text=True,
                             check=True)
        return float(out.stdout.strip())
    except (subprocess.CalledProcessError, ValueError, OSError):
        return None


def extract_units(video: Path, out_dir: Path, start_time: str = START_TIME) -> Units:
    """The video's units under ``out_dir`` (``sampled_images/image_<TS>.png``, ``audio_clips/audio_<TS>.wav``).
    A video ffmpeg cannot read raises naming the file (the release returned an empty list, which made the
    video vanish from its scores: L-Q1; senri records the failure instead)."""
    video, out_dir = Path(video), Path(out_dir)
    if not video.is_file():
        raise FileNotFoundError(f"{video}: no such video for Light-Omni's unit extraction")
    temp = out_dir / f"temp_{video.name}"
    audio_tmp, image_tmp = temp / "audio", temp / "video"
    images_dir, audio_dir = out_dir / "sampled_images", out_dir / "audio_clips"
    for folder in (audio_tmp, image_tmp, images_dir, audio_dir):
        folder.mkdir(parents=True, exist_ok=True)
    segment = ["-f", "segment", "-segment_time", "1.0", "-c:a", "pcm_s16le", "-ar", "16000", "-ac", "1",
               "-reset_timestamps", "1", str(audio_tmp / "audio_%05d.wav")]
    try:
        source = "track"
        try:
            subprocess.run(["ffmpeg", "-nostdin", "-y", "-i", str(video), *segment], check=True, capture_output=True)
        except subprocess.CalledProcessError:
            for stale in audio_tmp.iterdir():
                stale.unlink()
            duration = _probe_duration(video)
            subprocess.run(["ffmpeg", "-nostdin", "-y", "-t", str(duration), "-f", "lavfi", "-i",
                            "anullsrc=r=16000:cl=mono", *segment], check=True, capture_output=True)
            source = "silent"
        try:
            subprocess.run(["ffmpeg", "-nostdin", "-y", "-i", str(video), "-vf", "fps=1/1.0", "-q:v", "2",
                            str(image_tmp / "image_%05d.png")], check=True, capture_output=True)
        except subprocess.CalledProcessError as exc:
            raise ValueError(f"{video}: ffmpeg could not read its frames for Light-Omni's units: "
                             f"{exc.stderr.decode(errors='replace')[-400:]}") from None
        audios, images = sorted(audio_tmp.iterdir()), sorted(image_tmp.iterdir())
        units = []
        for i in range(min(len(audios), len(images))):
            stamp = add_time(start_time, add_sec=i)
            image, audio = images_dir / f"image_{stamp}.png", audio_dir / f"audio_{stamp}.wav"
            shutil.move(str(images[i]), image)
            shutil.move(str(audios[i]), audio)
            units.append(Unit(i, stamp, image, audio))
        return Units(units, source)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
