"""``egoblur``: EgoBlur's two TorchScript detectors (faces, licence plates), from files the user provides.

The weights are distributed by Meta on request, not on PyPI; set ``egoblur_face_model`` and/or
``egoblur_plate_model`` to the ``.jit`` paths. As in EgoBlur's demo: the frame goes in as a BGR uint8 CHW
tensor, the model returns ``(boxes, labels, scores, dims)``, NMS at ``nms_iou`` (EgoBlur Gen1: 0.3) runs
first, then the score threshold (Gen1: 0.9 for both classes).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from senri.anonymize.detectors.base import Box, Detector, nms


class EgoBlur(Detector):
    classes = ("face", "plate")

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import torch

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.models: list[tuple[str, Any, float]] = []
        for cls in ("face", "plate"):
            path = config.get(f"egoblur_{cls}_model")
            if not path:
                continue
            path = Path(path).expanduser()
            if not path.is_file():
                raise FileNotFoundError(f"anonymize.detector_config.egoblur_{cls}_model: {path} does not exist "
                                        "(EgoBlur's weights are distributed on request by Meta)")
            model = torch.jit.load(str(path), map_location=self.device).eval()
            self.models.append((cls, model, float(config.get(f"egoblur_{cls}_threshold", 0.9))))
        if not self.models:
            raise ValueError("detector egoblur: set anonymize.detector_config.egoblur_face_model and/or "
                             "egoblur_plate_model to EgoBlur's .jit files")
        self.nms_iou = float(config.get("egoblur_nms_iou", 0.3))

    def detect(self, rgb: np.ndarray) -> list[Box]:
        torch = self.torch
        bgr = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1))
        tensor = torch.from_numpy(bgr).to(self.device)
        found: list[Box] = []
        with torch.no_grad():
            for cls, model, threshold in self.models:
                boxes, _labels, scores, _dims = model(tensor)
                boxes, scores = boxes.cpu().numpy().reshape(-1, 4), scores.cpu().numpy().reshape(-1)
                for i in nms(boxes, scores, self.nms_iou):
                    if scores[i] > threshold:
                        x0, y0, x1, y1 = (float(v) for v in boxes[i])
                        found.append(Box(cls, float(scores[i]), x0, y0, x1, y1))
        return found
