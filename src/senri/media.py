"""Running ffmpeg and ffprobe as child processes, the one way every stage does it; and the one place audio is cut
from a video (16-kHz 16-bit PCM/WAV per span or clip, 1-s units) for every method and memory system that hears.

Always ``-nostdin`` (a child ffmpeg that reads the parent's stdin stops early or hangs a pipeline), stdin
closed, stderr captured and shown in the error, so a failure names the file and what ffmpeg said.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


class MediaError(RuntimeError):
    """ffmpeg/ffprobe failed on a file; the message names the file and quotes the tool's own error."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MediaError(f"{name} not found on PATH; install it (Debian: apt-get install ffmpeg)")
    return path


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_ffmpeg(args: Sequence[str], what: str) -> None:
    """Run ``ffmpeg -nostdin -hide_banner -loglevel error <args>``; raise :class:`MediaError` on failure."""
    cmd = [_tool("ffmpeg"), "-nostdin", "-hide_banner", "-loglevel", "error", *args]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MediaError(f"{what}: ffmpeg failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")


def ffprobe_json(path: str | Path, args: Sequence[str]) -> dict[str, Any]:
    """Run ffprobe with JSON output on ``path``; a file ffprobe cannot read is a :class:`MediaError`."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such video file")
    cmd = [_tool("ffprobe"), "-v", "error", "-of", "json", *args, str(path)]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MediaError(f"{path}: not a readable video (ffprobe exit {proc.returncode}): {_tail(proc.stderr)}")
    try:
        return json.loads(proc.stdout or "{}")
    except json.JSONDecodeError as exc:
        raise MediaError(f"{path}: ffprobe printed unreadable JSON ({exc})") from exc


# ------------------------------------------------------------------------------------------------------- audio
#: The one sample rate senri cuts audio at: 16 kHz, what Whisper, Qwen2.5-Omni's audio encoder, ERes2NetV2 and
#: Silero VAD read (shared/spec/omni_memory.md M-C4, U-4).
SAMPLE_RATE = 16000


@dataclass(frozen=True)
class WavInfo:
    """A WAV file's header facts: what a build records about the audio it read."""

    sample_rate: int
    channels: int
    sample_width: int
    frames: int

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate if self.sample_rate else 0.0


def wav_bytes(pcm: bytes, sample_rate: int = SAMPLE_RATE, channels: int = 1) -> bytes:
    """16-bit little-endian PCM (interleaved when ``channels`` > 1) as a WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm)
    return out.getvalue()


def wav_info(wav: bytes) -> WavInfo:
    """The header of WAV bytes; bytes that are no 16-bit PCM WAV are a ValueError naming what is wrong."""
    try:
        with wave.open(io.BytesIO(wav), "rb") as reader:
            return WavInfo(reader.getframerate(), reader.getnchannels(), reader.getsampwidth(), reader.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"not a PCM WAV file ({exc})") from exc


def wav_samples(wav: bytes, mono: bool = True) -> tuple[Any, int]:
    """WAV bytes → (float32 samples in [-1, 1), sample rate), what audio processors (Qwen2.5-Omni's feature
    extractor, vLLM's ``multi_modal_data["audio"]``) take. ``mono``: the first channel only (the release's voice
    embedder reads the first channel of a stereo clip, shared/spec/omni_memory.md M-C8); else shape (frames, ch)."""
    import numpy as np

    info = wav_info(wav)
    if info.sample_width != 2:
        raise ValueError(f"WAV sample width {info.sample_width} bytes: only 16-bit PCM is read")
    with wave.open(io.BytesIO(wav), "rb") as reader:
        raw = reader.readframes(info.frames)
    samples = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    samples = samples.reshape(-1, info.channels)
    return (samples[:, 0].copy() if mono else samples), info.sample_rate


def has_audio_track(path: str | Path) -> bool:
    """Whether the file has an audio stream (the probe table's ``has_audio`` is this fact, recorded per video)."""
    streams = ffprobe_json(path, ["-show_entries", "stream=codec_type"]).get("streams") or []
    return any(s.get("codec_type") == "audio" for s in streams)


def audio_pcm(path: str | Path, start_s: float, samples: int, sample_rate: int = SAMPLE_RATE,
              channels: int = 1, what: str = "audio") -> bytes:
    """``samples`` frames of 16-bit PCM at ``sample_rate`` from ``start_s`` (source seconds) of the file's first
    audio track, downmixed to ``channels``; padded with silence where the track ends early, so cumulative
    durations match the spans asked for (VideoARM's audio_transcriber, A-T4). A file without an audio track is a
    :class:`MediaError` (ffmpeg's "matches no streams"): ask :func:`has_audio_track` first where silence is a
    condition to record rather than an error."""
    frame = 2 * channels
    with tempfile.TemporaryDirectory(prefix="senri-audio-") as tmp:
        out = Path(tmp) / "range.pcm"
        run_ffmpeg(["-ss", f"{start_s:.6f}", "-i", str(path), "-map", "0:a:0", "-vn",
                    "-t", f"{samples / sample_rate:.6f}", "-ac", str(channels), "-ar", str(sample_rate),
                    "-f", "s16le", "-acodec", "pcm_s16le", "-y", str(out)], what=f"{what} ({path})")
        pcm = out.read_bytes()[: frame * samples]
    return pcm + b"\0" * (frame * samples - len(pcm))


def clip_wav(path: str | Path, start_s: float, duration_s: float, sample_rate: int = SAMPLE_RATE,
             channels: int = 1) -> bytes | None:
    """One clip's sound as a 16-kHz 16-bit WAV (M3-Agent's per-clip audio, M-C4; Light-Omni's units), or None when
    the file has no audio track: a silent video is a condition the caller records, not an error."""
    if not has_audio_track(path):
        return None
    samples = max(0, round(duration_s * sample_rate))
    return wav_bytes(audio_pcm(path, start_s, samples, sample_rate, channels, what="clip audio"), sample_rate,
                     channels)


def pcm_units(pcm: bytes, unit_s: float = 1.0, sample_rate: int = SAMPLE_RATE, pad_last: bool = True) -> list[bytes]:
    """Mono 16-bit PCM cut into ``unit_s``-second units (1 s: Light-Omni's streaming unit), in order; the last
    partial unit zero-padded to full length (``pad_last``) or kept short."""
    size = 2 * round(unit_s * sample_rate)
    units = [pcm[i:i + size] for i in range(0, len(pcm), size)]
    if units and pad_last and len(units[-1]) < size:
        units[-1] = units[-1] + b"\0" * (size - len(units[-1]))
    return units
