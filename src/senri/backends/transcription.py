"""Speech recognition over the OpenAI-compatible audio transcription API (``POST {base_url}/audio/transcriptions``).

VideoARM's ``audio_transcriber`` (spec A-T4, A-M5: whisper-1) sends one WAV per call and reads ``verbose_json``
back: ``{text, segments: [{start, end, text}]}``. The ASR model is an ordinary ``backend: openai`` model config
(``base_url``, ``model``, ``api_key_env``, ``timeout_s``, ``max_retries``, ``backoff_base_s``, ``backoff_cap_s``)
— the same keys and the same retry rule as the chat backend (429/5xx, timeouts and dropped connections are
retried with full-jitter backoff; a server's ``Retry-After`` is obeyed up to the cap) — so any server that
serves both (vLLM with a Whisper model, a hosted API, faster-whisper behind an OpenAI-compatible shim) is named
once. Transcripts are not kept in the response cache: the audio is not part of a chat request's identity.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx

from senri.backends.base import BackendError
from senri.backends.openai import bearer_headers, endpoint_settings, post_with_retries
from senri.secrets import scrub

from senri.media import SAMPLE_RATE, wav_bytes  # noqa: F401  (A-T4: 16 kHz mono 16-bit PCM, what Whisper reads)


@dataclass
class Transcript:
    """One transcription: the joined text and the timed segments (seconds into the audio sent)."""

    text: str = ""
    segments: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    latency_s: float = 0.0
    attempts: int = 0


def parse_verbose_json(payload: Any) -> Transcript:
    """``verbose_json`` → a :class:`Transcript`; a body without the fields is this call's error, never a crash."""
    if not isinstance(payload, Mapping):
        return Transcript(error=f"transcription reply is not a JSON object: {str(payload)[:200]!r}")
    segments = []
    for k, seg in enumerate(payload.get("segments") or []):
        try:
            start, end = float(seg["start"]), float(seg["end"])
        except (KeyError, TypeError, ValueError):
            return Transcript(error=f"transcription reply: segment {k} has no numeric start/end: {str(seg)[:200]!r}")
        if not (math.isfinite(start) and math.isfinite(end)):
            return Transcript(error=f"transcription reply: segment {k} has a non-finite time")
        segments.append({"start": start, "end": max(start, end), "text": str(seg.get("text", "")).strip()})
    text = payload.get("text")
    text = str(text).strip() if text is not None else " ".join(s["text"] for s in segments if s["text"])
    return Transcript(text=text, segments=segments)


class Transcriber:
    """A client of one ASR model config (``backend: openai``) for the audio transcription endpoint."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if config.get("backend") != "openai":
            raise BackendError(f"ASR model config: backend must be openai (an OpenAI-compatible "
                               f"/audio/transcriptions server), got {config.get('backend')!r}")
        endpoint_settings(self, config, "the ASR model (an OpenAI-compatible /audio/transcriptions server)")
        self._client = httpx.Client(timeout=self.timeout_s)

    def close(self) -> None:
        self._client.close()

    def transcribe(self, wav: bytes, prompt: str | None = None) -> Transcript:
        """One WAV → its transcript (``response_format=verbose_json``), retried as the chat backend retries."""
        data = {"model": self.model, "response_format": "verbose_json"}
        if prompt:
            data["prompt"] = prompt
        headers = bearer_headers(self)
        started = time.perf_counter()
        done = post_with_retries(self, lambda: self._client.post(
            f"{self.base_url}/audio/transcriptions", data=data, headers=headers,
            files={"file": ("audio.wav", wav, "audio/wav")}))
        if done.response is None:
            return Transcript(error=done.error, latency_s=time.perf_counter() - started, attempts=done.attempts)
        try:
            result = parse_verbose_json(done.response.json())
        except ValueError:
            return Transcript(error=f"HTTP 200 with a body that is not JSON: {scrub(done.response.text)[:200]!r}",
                              latency_s=time.perf_counter() - started, attempts=done.attempts)
        result.latency_s, result.attempts = time.perf_counter() - started, done.attempts
        result.error = scrub(result.error)
        return result
