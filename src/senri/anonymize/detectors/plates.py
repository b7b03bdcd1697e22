"""``plates``: a classical, **weak** licence-plate detector that needs no model file.

Nothing good detects plates offline from PyPI alone (EgoBlur's plate model is a user-supplied file, and
OpenCV 5 no longer ships its plate cascade). This detector finds plate-like regions: a bright, roughly
uniform rectangle, 2–6 times wider than tall, with a row of dark strokes (characters) inside. It catches
frontal, upright, well-lit plates and misses angled, dirty, dark-on-light-variant or small ones; it can also
fire on other signs with text. It is opt-in (``detectors: [centerface, plates]``) and documented as weak —
real plate coverage needs ``egoblur`` with its plate model.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from senri.anonymize.detectors.base import Box, Detector


class Plates(Detector):
    classes = ("plate",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.min_width = int(config.get("plate_min_width", 40))
        self.threshold = float(config.get("plate_threshold", 0.5))

    def detect(self, rgb: np.ndarray) -> list[Box]:
        import cv2

        gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        # Bright plate background: threshold well above the frame's median, close the character holes.
        level = max(150, int(np.percentile(gray, 90)))
        bright = (gray >= level).astype(np.uint8) * 255
        closed = cv2.morphologyEx(bright, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_RECT, (9, 5)))
        contours, _ = cv2.findContours(closed, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        boxes = []
        for contour in contours:
            x, y, w, h = cv2.boundingRect(contour)
            if w < self.min_width or not (2.0 <= w / max(h, 1) <= 6.0):
                continue
            fill = cv2.contourArea(contour) / float(w * h)  # rectangular, not a blob
            inner = gray[y + h // 5:y + h - h // 5, x + w // 10:x + w - w // 10]
            if inner.size == 0:
                continue
            strokes = float(np.mean(inner < level - 60))  # dark character pixels inside the plate
            score = fill * min(1.0, strokes / 0.15) if 0.05 <= strokes <= 0.6 else 0.0
            if score >= self.threshold:
                boxes.append(Box("plate", score, float(x), float(y), float(x + w), float(y + h)))
        return boxes
