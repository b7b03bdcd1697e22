"""Inputs for the face/voice stand-in tests (tests/test_identity_standins.py) and for the generator of their
reference vectors (bench/identity_refs.py): real face photos that ship inside installed PyPI packages, and
synthetic "voices" made with numpy.

Photos: scikit-image's astronaut (Eileen Collins) and cameraman, matplotlib's Grace Hopper — one photo per person,
so "the same person" is the same photo mirrored, halved, darkened, JPEG-compressed at quality 30 or rotated 8°.
Voices: a glottal pulse train (f0 with a slow vibrato) through three vowel formants (a 180-ms vowel at a time,
Hann-enveloped, some vowels silent), one speaker = one (f0, vocal-tract scale) pair; different seeds give different
utterances of the same speaker."""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
VOWELS = ((730, 1090, 2440), (270, 2290, 3010), (530, 1840, 2480), (300, 870, 2240), (660, 1720, 2410))
SPEAKERS = {"low": (110.0, 1.0), "high": (230.0, 1.25)}


def photo(name: str) -> np.ndarray:
    """An RGB uint8 photo: ``astronaut``, ``camera`` (grey, as three channels) or ``hopper``."""
    if name == "hopper":
        import matplotlib.cbook
        from PIL import Image

        return np.asarray(Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg")).convert("RGB"))
    from skimage import data

    image = getattr(data, name)()
    return np.stack([image] * 3, axis=-1) if image.ndim == 2 else image


def variants(image: np.ndarray) -> dict[str, np.ndarray]:
    import cv2

    h, w = image.shape[:2]
    jpeg = cv2.imdecode(cv2.imencode(".jpg", image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 30])[1], 1)[..., ::-1]
    turn = cv2.getRotationMatrix2D((w / 2, h / 2), 8, 1.0)
    return {"orig": image, "mirror": np.ascontiguousarray(image[:, ::-1]),
            "half": cv2.resize(image, (w // 2, h // 2), interpolation=cv2.INTER_AREA),
            "dark": (image * 0.6).astype(np.uint8), "jpeg30": np.ascontiguousarray(jpeg),
            "rot8": cv2.warpAffine(image, turn, (w, h))}


def voice(speaker: str, seconds: float, seed: int) -> np.ndarray:
    """float32 samples at 16 kHz, peak 0.5."""
    from scipy.signal import lfilter

    f0, tract = SPEAKERS[speaker]
    rng = np.random.default_rng(seed)
    n, step = int(SAMPLE_RATE * seconds), int(0.18 * SAMPLE_RATE)
    out, phase = np.zeros(n), 0.0
    for start in range(0, n, step):
        m = min(step, n - start)
        pitch = f0 * (1 + 0.08 * np.sin(2 * np.pi * rng.uniform(2, 5) * np.arange(m) / SAMPLE_RATE
                                        + rng.uniform(0, 6)))
        cycles = phase + np.cumsum(pitch) / SAMPLE_RATE
        phase = cycles[-1]
        y = (np.diff(np.floor(cycles), prepend=np.floor(cycles[0])) > 0).astype(float)
        y += 0.02 * rng.normal(size=m)
        for formant, bandwidth in zip(VOWELS[rng.integers(len(VOWELS))], (80, 100, 120)):
            r, theta = np.exp(-np.pi * bandwidth / SAMPLE_RATE), 2 * np.pi * formant * tract / SAMPLE_RATE
            y = lfilter([1 - r], [1, -2 * r * np.cos(theta), r * r], y)
        out[start:start + m] = y * (np.hanning(m) if rng.uniform() > 0.15 else 0.0)
    return (0.5 * out / (np.abs(out).max() + 1e-9)).astype(np.float32)


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
