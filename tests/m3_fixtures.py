"""Fixture models for M3-Agent's build on the demo (named in its config as ``m3_fixtures:<name>``, with tests/ on
the path): face detections and voice vectors that are fixed functions of what they are given, so a test knows
which nodes the build must make. Not models: stand-ins that let the graph logic run end to end without weights."""

from __future__ import annotations

import numpy as np

PEOPLE = 2  # two fixture identities


def _identity_vector(person: int, dim: int) -> np.ndarray:
    vector = np.random.default_rng(1000 + person).normal(size=dim)
    return vector / np.linalg.norm(vector)


def faces(images):
    """Every frame shows both fixture people: person p's box at a fixed place, det 0.95, a raw embedding of norm 25
    near the person's direction (a little per-frame noise), so HDBSCAN finds two clusters per clip and the
    second clip's clusters match the first clip's nodes."""
    out = []
    for k, image in enumerate(images):
        rng = np.random.default_rng(k)
        found = []
        for person in range(PEOPLE):
            direction = _identity_vector(person, 512) + 0.05 * rng.normal(size=512)
            x = 20 + 120 * person
            found.append({"bbox": [x, 20, x + 60, 100], "score": 0.95,
                          "embedding": (25.0 * direction / np.linalg.norm(direction)).tolist()})
        out.append(found)
    return out


def negative_box_faces(images):
    """As :func:`faces`, but the first frame's first box starts at x = −5: that frame loses both its faces."""
    out = faces(images)
    if out:
        out[0][0]["bbox"] = [-5, 20, 55, 100]
    return out


def voices(wav: bytes) -> list[float]:
    """A segment's vector: its speaker is fixed by which half of the clip it starts in (the scripted diarizer puts
    speaker 0 first, speaker 1 second), read from the WAV's length parity: even seconds → 0, odd → 1."""
    from senri.media import wav_info

    person = int(round(wav_info(wav).duration_s)) % 2
    return (3.0 * _identity_vector(10 + person, 192)).tolist()
