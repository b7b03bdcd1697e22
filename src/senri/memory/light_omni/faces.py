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
