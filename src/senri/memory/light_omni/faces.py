"""Light-Omni's face filter (L-C2, K-13): which detections may be identified, and the yaw deviation that
decides registration and best-shot replacement. The detector (insightface buffalo_s) is a model role of the
build; these rules are fixed by the release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

MIN_DET_SCORE = 0.7
MIN_FACE_HEIGHT = 80
MIN_EYE_RATIO = 0.20
#: L-C2 (C): a new face is registered only below this yaw deviation; (A)/(B) match above these cosines.
REGISTER_YAW = 0.5
TRACK_COSINE = 0.5
DATABASE_COSINE = 0.5
BEST_SHOT_MARGIN = 0.1
TRACK_EMA = 0.2


def yaw_deviation(kps: Sequence[Sequence[float]] | None) -> float:
    """|d_left − d_right| / (d_left + d_right) over the eyes' and the nose's x; 1.0 without keypoints or
    when both distances are 0."""
    if kps is None:
        return 1.0
    left, right, nose = kps[0][0], kps[1][0], kps[2][0]
    d_left, d_right = abs(nose - left), abs(right - nose)
    total = d_left + d_right
    return 1.0 if total == 0 else float(abs(d_left - d_right) / total)


@dataclass(frozen=True)
class FaceCheck:
    kept: bool
    yaw_dev: float | None = None
    eye_ratio: float | None = None


def confident_face(bbox: Sequence[float], det_score: float, kps: Sequence[Sequence[float]] | None) -> FaceCheck:
    """pm get_confident_face for one detection: det ≥ 0.7, int-truncated box height ≥ 80, eye distance / box
    width ≥ 0.20 (all inclusive). A face without keypoints raises TypeError, as in the release."""
    if det_score < MIN_DET_SCORE:
        return FaceCheck(False)
    box = np.asarray(bbox).astype(int)
    width, height = box[2] - box[0], box[3] - box[1]
    if height < MIN_FACE_HEIGHT:
        return FaceCheck(False)
    yaw = yaw_deviation(kps)
    if kps is None:
        raise TypeError("'NoneType' object is not subscriptable")
    points = np.asarray(kps, dtype=np.float32)
    ratio = float(np.linalg.norm(points[0] - points[1]) / width)
    if ratio < MIN_EYE_RATIO:
        return FaceCheck(False)
    return FaceCheck(True, float(yaw), ratio)


@dataclass(frozen=True)
class Detection:
    """One detector output as insightface gives it: box, five keypoints, score, RAW embedding."""

    bbox: tuple[float, float, float, float]
    kps: tuple[tuple[float, float], ...] | None
    det_score: float
    embedding: tuple[float, ...]


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32).reshape(1, -1)
    norm = float(np.sqrt((v * v).sum()))
    return v / norm if norm > 0 else v


class FaceBook:
    """L-C2's identities (pm process_image): per frame, each confident face is matched (A) to the best previous
    frame track with cosine > 0.5, else (B) to the top-1 registered embedding > 0.5 — the index as of the end of the
    last frame that changed it (the release rebuilds its faiss index only then) —, else (C) registered as
    ``<face_N>`` if its yaw deviation < 0.5; (D) a known face whose yaw < stored quality − 0.1 replaces the stored
    embedding, quality and avatar; (E) tracks = EMA(0.2 new + 0.8 old), renormalised, only this frame's kept.
    Identified faces are drawn (green box, label) and the frame shrunk to long edge 480 (INTER_AREA)."""

    def __init__(self, meta: dict | None = None, vectors: np.ndarray | None = None,
                 identity_cosine: float = TRACK_COSINE) -> None:
        # the dict itself is kept (not copied): a build shares it with the memory's profiles (one profiles.json)
        self.meta = meta if meta is not None else {}
        for key, empty in (("face_counter", 0), ("mapping", []), ("qualities", [])):
            self.meta.setdefault(key, empty)
        #: (A)/(B)'s cosine: the release's 0.5 (buffalo_s); a stand-in face model brings its own (identity.Scales)
        self.track_cosine = self.database_cosine = float(identity_cosine)
        if len(self.meta["qualities"]) < len(self.meta["mapping"]):  # metadata without qualities: 100 each
            self.meta["qualities"] = list(self.meta["qualities"]) + [100.0] * (
                len(self.meta["mapping"]) - len(self.meta["qualities"]))
        self.known = [np.asarray(v, dtype=np.float32) for v in (vectors if vectors is not None else [])]
        self.index = np.stack(self.known) if self.known else np.zeros((0, 0), dtype=np.float32)
        self.tracks: dict[str, np.ndarray] = {}
        self.avatars: dict[str, tuple[int, int, int, int]] = {}

    def _register(self, emb: np.ndarray, yaw: float, bbox) -> str:
        name = f"<face_{self.meta['face_counter']}>"
        self.meta["mapping"].append(name)
        self.meta["qualities"].append(float(yaw))
        self.meta["face_counter"] += 1
        self.known.append(emb.flatten())
        self.avatars[name] = tuple(int(x) for x in np.asarray(bbox).astype(int))
        return name

    def process(self, frame: np.ndarray, detections: Sequence[Detection], long_edge: int | None = 480
                ) -> tuple[np.ndarray, list[str]]:
        import cv2

        names: list[str] = []
        next_tracks: dict[str, np.ndarray] = {}
        changed = False
        for face in detections:
            if not confident_face(face.bbox, face.det_score, face.kps).kept:
                continue
            emb = _unit(face.embedding)
            kps = None if face.kps is None else np.asarray(face.kps, dtype=np.float32)
            yaw = yaw_deviation(kps)
            name, best, idx = None, 0.0, -1
            for track, hist in self.tracks.items():
                score = float((emb @ hist.T)[0][0])
                if score > self.track_cosine and score > best:
                    best, name = score, track
                    idx = self.meta["mapping"].index(track) if track in self.meta["mapping"] else -1
            if name is None and self.known and len(self.index):
                scores = self.index @ emb.reshape(-1)
                top = int(np.argmax(scores))
                if float(scores[top]) > self.database_cosine and top < len(self.meta["mapping"]):
                    name, idx = self.meta["mapping"][top], top
            if name is None and yaw < REGISTER_YAW:
                name = self._register(emb, yaw, face.bbox)
                changed = True
                idx = len(self.known) - 1
            if idx != -1 and idx < len(self.meta["qualities"]) and idx < len(self.known):
                if yaw < self.meta["qualities"][idx] - BEST_SHOT_MARGIN:
                    self.known[idx] = emb.flatten()
                    self.meta["qualities"][idx] = float(yaw)
                    self.avatars[name] = tuple(int(x) for x in np.asarray(face.bbox).astype(int))
                    changed = True
            if name is None:
                continue
            if name in self.tracks:
                next_tracks[name] = _unit(TRACK_EMA * emb + (1 - TRACK_EMA) * self.tracks[name])
            else:
                next_tracks[name] = emb
            names.append(name)
            h, w = frame.shape[:2]
            scale, thick = (w / 1000.0) * 1.5, max(1, int((w / 1000.0) * 4))
            box = np.asarray(face.bbox).astype(int)
            cv2.rectangle(frame, (int(box[0]), int(box[1])), (int(box[2]), int(box[3])), (0, 255, 0), thick)
            cv2.putText(frame, name, (int(box[0]), int(box[1]) - 10), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 255, 0),
                        thick)
        self.tracks = next_tracks
        if changed:
            self.index = np.stack(self.known).astype(np.float32)
        if long_edge is not None:
            h, w = frame.shape[:2]
            if max(h, w) > long_edge:
                s = long_edge / max(h, w)
                frame = cv2.resize(frame, (int(w * s), int(h * s)), interpolation=cv2.INTER_AREA)
        return frame, names
