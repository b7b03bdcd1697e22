"""A face model as the omni-memory builds call it: a detector (by name, from the anonymize stage's registry) and a
face embedder (by name, :data:`~senri.memory.identity.FACE_EMBEDDERS`) → per frame, every face's box, detection
score, five-point-style keypoints (eyes, nose) and RAW embedding, as insightface's FaceAnalysis gives them to the
releases (M-C5, L-C2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class FaceDetection:
    """One face: box [x0, y0, x1, y1] in frame pixels, the detector's score, keypoints (image-left eye, image-right
    eye, nose; None when the embedder gives none) and the raw (unnormalised) embedding."""

    bbox: tuple[float, float, float, float]
    score: float
    kps: tuple[tuple[float, float], ...] | None
    embedding: tuple[float, ...]

    def as_m3(self) -> dict[str, Any]:
        """M3-Agent's per-face record (what :func:`senri.memory.m3_agent.perception.frame_faces` reads)."""
        return {"bbox": list(self.bbox), "score": self.score, "embedding": list(self.embedding)}


class FaceAnalyzer:
    """``detector`` + ``embedder``: :meth:`analyze` one RGB frame (H×W×3 uint8); calling it on a list of frames
    gives M3-Agent's ``face_model`` interface (per frame, a list of ``{bbox, score, embedding}``)."""

    def __init__(self, detector: str, embedder: str, config: Mapping[str, Any] | None = None) -> None:
        from senri.anonymize.detectors import DETECTORS
        from senri.memory.identity import load_face_embedder

        config = dict(config or {})
        detector_class = DETECTORS.load(detector)
        if "face" not in getattr(detector_class, "classes", ()):
            raise ValueError(f"face detector {detector!r} detects {detector_class.classes}, not faces")
        self.detector = detector_class(dict(config.get("detector_config") or {}))
        self.embedder = load_face_embedder(embedder, config.get("embedder_config"))
        self.scales = self.embedder.scales
        self.name = f"{detector}+{embedder}"

    def analyze(self, rgb: np.ndarray) -> list[FaceDetection]:
        frame = np.ascontiguousarray(rgb, dtype=np.uint8)
        found = []
        for box in self.detector.detect(frame):
            if box.cls != "face":
                continue
            bbox = (box.x0, box.y0, box.x1, box.y1)
            embedding, kps = self.embedder.embed(frame, bbox)
            found.append(FaceDetection(tuple(float(v) for v in bbox), float(box.score), kps,
                                       tuple(float(v) for v in embedding)))
        return found

    def __call__(self, images: Sequence[np.ndarray]) -> list[list[dict[str, Any]]]:
        return [[face.as_m3() for face in self.analyze(image)] for image in images]

    def describe(self) -> dict[str, Any]:
        """What the build records: the names, the packages the weights came from, the scales used."""
        return {"model": self.name, "standin": True, "weights": self.embedder.weights,
                "detector": type(self.detector).__name__, "scales": self.scales.record()}


def open_face_analyzer(detector: str | None, embedder: str | None, where: str,
                       config: Mapping[str, Any] | None = None) -> FaceAnalyzer | None:
    """Both names, or neither (None: no face model, the releases' default here); one without the other is an
    error naming the config keys."""
    if not detector and not embedder:
        return None
    if not detector or not embedder:
        raise ValueError(f"{where}: face_detector and face_embedder go together (got face_detector={detector!r}, "
                         f"face_embedder={embedder!r})")
    return FaceAnalyzer(str(detector), str(embedder), config)
