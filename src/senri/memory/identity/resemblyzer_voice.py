"""``resemblyzer``: a voice-embedding STAND-IN whose weights ship on PyPI — Resemblyzer 0.1.4's GE2E speaker
encoder (``resemblyzer/pretrained.pt``: a 3-layer LSTM over 40-band mel frames, 256-d output), in place of the
release's ERes2NetV2 (192-d, ModelScope weights, not available offline).

Only the weight file of the package is used: importing ``resemblyzer`` pulls librosa (whose feature module takes
~20 s to import on this machine) and webrtcvad for its preprocessing, so the mel spectrogram (librosa's
``melspectrogram`` at Resemblyzer's hparams: 16 kHz, n_fft 400, hop 160, Hann window, centred with zero padding,
power 2, 40 Slaney-normalised Slaney-scale bands) and ``embed_utterance`` (partials of 160 frames every
round(16000 / 1.3 / 160) = 77 frames, the last dropped below 75 % coverage, the L2-normed mean of the partials'
embeddings) are computed here. tests/test_identity_standins.py checks both against vectors Resemblyzer's own code
computed (bench/identity_refs.py). Input: the segment's 16-kHz PCM as ``senri.media`` cuts it, volume raised to
Resemblyzer's −30 dBFS (``normalize_volume(increase_only=True)``); its webrtcvad silence trimming is NOT applied
(the release embeds the diarized segment as cut). A silent segment gives the zero vector (recorded by the build
as a voice that matches nothing).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from senri.memory.identity import Scales

SAMPLE_RATE = 16000
N_FFT, HOP, N_MELS = 400, 160, 40
PARTIAL_FRAMES = 160
RATE, MIN_COVERAGE = 1.3, 0.75
TARGET_DBFS = -30.0
HIDDEN, LAYERS = 256, 3
#: Measured on two synthetic "voices" (glottal pulse trains through vowel formants; tests/test_identity_standins.py):
#: same voice 0.85–0.96, different 0.60–0.73; 0.8 sits in the gap. Synthetic, not human speech.
SCALES = Scales(voice_matching=0.8, measured="resemblyzer on synthetic voices: same 0.85-0.96, different "
                                             "0.60-0.73 (cosine); not measured on human speech")


def weights_path() -> Path:
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("voice embedder resemblyzer needs resemblyzer==0.1.4 (make install puts it in the venv, "
                          "without its dependencies): its pretrained.pt is the model")
    path = Path(list(spec.submodule_search_locations)[0]) / "pretrained.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing from the installed resemblyzer package")
    return path


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """The Slaney scale (librosa's default, htk=False): linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(hz >= min_log_hz, min_log_mel + np.log(np.maximum(hz, 1e-10) / min_log_hz) / logstep,
                    hz / f_sp)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)), f_sp * mel)


def mel_filters(sample_rate: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Triangular filters between n_mels + 2 Slaney-scale points over [0, sr/2], each scaled to unit area
    (Slaney normalisation 2 / bandwidth): (n_mels, 1 + n_fft // 2), float32."""
    fft_hz = np.linspace(0, sample_rate / 2, 1 + n_fft // 2)
    points = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sample_rate / 2.0), n_mels + 2))
    widths = np.diff(points)
    ramps = points[:, None] - fft_hz[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (points[2:n_mels + 2] - points[:n_mels]))[:, None]
    return weights.astype(np.float32)


def mel_frames(samples: np.ndarray) -> np.ndarray:
    """(frames, 40) power mel spectrogram (not log), as Resemblyzer's ``wav_to_mel_spectrogram``."""
    y = np.asarray(samples, dtype=np.float32)
    padded = np.pad(y, (N_FFT // 2, N_FFT // 2), mode="constant")
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)  # periodic Hann
    index = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spectrum = np.abs(np.fft.rfft(padded[index] * window, n=N_FFT, axis=1)) ** 2
    return (spectrum.astype(np.float32) @ mel_filters().T).astype(np.float32)


def partial_slices(n_samples: int, rate: float = RATE, min_coverage: float = MIN_COVERAGE) -> list[tuple[int, int]]:
    """The mel-frame ranges of the partial utterances: every ``step`` frames a 160-frame window while it starts
    before the utterance's end; the last is dropped when it covers under 75 % of its span with samples (and
    there is more than one)."""
    n_frames = int(np.ceil((n_samples + 1) / HOP))
    step = int(np.round((SAMPLE_RATE / rate) / HOP))
    starts = range(0, max(1, n_frames - PARTIAL_FRAMES + step + 1), step)
    spans = [(s, s + PARTIAL_FRAMES) for s in starts]
    last_start = spans[-1][0] * HOP
    coverage = (n_samples - last_start) / (PARTIAL_FRAMES * HOP)
    if coverage < min_coverage and len(spans) > 1:
        spans = spans[:-1]
    return spans


def normalize_volume(samples: np.ndarray, target_dbfs: float = TARGET_DBFS) -> np.ndarray:
    """Raised (never lowered) to ``target_dbfs`` RMS, as Resemblyzer's preprocessing; silence stays silence."""
    y = np.asarray(samples, dtype=np.float32)
    rms = float(np.sqrt(np.mean((y.astype(np.float64) * 32767) ** 2))) if y.size else 0.0
    if rms == 0.0:
        return y
    change = target_dbfs - 20 * np.log10(rms / 32767)
    return y if change < 0 else (y * (10 ** (change / 20))).astype(np.float32)


class ResemblyzerVoice:
    """Callable on a segment's WAV bytes (or float samples at 16 kHz) → its 256-d embedding (unit norm; zero for
    silence)."""

    dimension = 256
    scales = SCALES
    weights = "resemblyzer 0.1.4 (pretrained.pt, GE2E)"

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        import torch

        state = torch.load(str(weights_path()), map_location="cpu", weights_only=True)["model_state"]
        self._torch = torch
        self.lstm = torch.nn.LSTM(N_MELS, HIDDEN, LAYERS, batch_first=True)
        self.linear = torch.nn.Linear(HIDDEN, 256)
        self.lstm.load_state_dict({k[len("lstm."):]: v for k, v in state.items() if k.startswith("lstm.")})
        self.linear.load_state_dict({k[len("linear."):]: v for k, v in state.items() if k.startswith("linear.")})
        self.lstm.eval()
        self.linear.eval()

    def partial_embeddings(self, mels: np.ndarray) -> np.ndarray:
        """(n, 160, 40) mel partials → (n, 256) unit embeddings: the last layer's final hidden state, linear, ReLU,
        L2 norm."""
        torch = self._torch
        with torch.no_grad():
            _, (hidden, _) = self.lstm(torch.from_numpy(np.ascontiguousarray(mels, dtype=np.float32)))
            raw = torch.relu(self.linear(hidden[-1]))
            return (raw / torch.norm(raw, dim=1, keepdim=True)).numpy()

    def embed_samples(self, samples: np.ndarray) -> np.ndarray:
        y = normalize_volume(samples)
        if not y.size or not np.any(y):
            return np.zeros(self.dimension, dtype=np.float32)
        spans = partial_slices(len(y))
        needed = spans[-1][1] * HOP
        if needed >= len(y):
            y = np.pad(y, (0, needed - len(y)))
        mels = mel_frames(y)
        partials = self.partial_embeddings(np.stack([mels[a:b] for a, b in spans]))
        mean = partials.mean(axis=0)
        return (mean / np.linalg.norm(mean)).astype(np.float32)

    def __call__(self, wav: bytes | np.ndarray) -> list[float]:
        if isinstance(wav, (bytes, bytearray)):
            from senri.media import wav_samples

            samples, rate = wav_samples(bytes(wav))
            if rate != SAMPLE_RATE:
                raise ValueError(f"voice embedder resemblyzer: a {rate}-Hz WAV (it takes {SAMPLE_RATE} Hz, as "
                                 "senri.media cuts clips)")
        else:
            samples = np.asarray(wav, dtype=np.float32)
        return self.embed_samples(np.asarray(samples, dtype=np.float32)).tolist()
