"""What a detector returns, and the box arithmetic every detector shares (NMS, scaling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np


@dataclass(frozen=True)
class Box:
    """One detection in frame pixels; ``cls`` is ``face`` or ``plate``."""

    cls: str
    score: float
    x0: float
    y0: float
    x1: float
    y1: float

    def scaled(self, factor: float, width: int, height: int) -> "Box":
        """The box grown about its centre by ``factor`` (EgoBlur's scale factor), clipped to the frame."""
        cx, cy = (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2
        hw, hh = (self.x1 - self.x0) * factor / 2, (self.y1 - self.y0) * factor / 2
        return Box(self.cls, self.score, max(0.0, cx - hw), max(0.0, cy - hh), min(float(width), cx + hw),
                   min(float(height), cy + hh))


class Detector:
    """Base class: :meth:`detect` takes one RGB frame (H×W×3 uint8) and returns boxes in its pixels."""

    classes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def detect(self, rgb: np.ndarray) -> list[Box]:
        raise NotImplementedError


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression, highest score first."""
    if len(boxes) == 0:
        return []
    x0, y0, x1, y1 = boxes.T
    areas = np.maximum(0, x1 - x0) * np.maximum(0, y1 - y0)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0, np.minimum(x1[i], x1[rest]) - np.maximum(x0[i], x0[rest]))
        h = np.maximum(0, np.minimum(y1[i], y1[rest]) - np.maximum(y0[i], y0[rest]))
        inter = w * h
        iou = inter / np.maximum(1e-9, areas[i] + areas[rest] - inter)
        order = rest[iou < iou_threshold]
    return keep
