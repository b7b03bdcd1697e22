"""``dlib_resnet``: a face-embedding STAND-IN whose weights ship on PyPI — dlib's ResNet face descriptor (128-d,
``dlib_face_recognition_resnet_model_v1.dat``) aligned by dlib's 5-point landmark model
(``shape_predictor_5_face_landmarks.dat``), both from the face-recognition-models 0.3.0 package, run by the
dlib-bin 20.0.1 wheel (dlib's own code: a manylinux wheel, nothing compiled here).

Not the releases' ArcFace (insightface buffalo_l / buffalo_s, 512-d): its descriptors are not centred, so cosines
of different people are high (0.82–0.90 measured on the packaged photos in tests/test_identity_standins.py, the
same person under mirror/JPEG/rotation ≥ 0.95), and their norm (1.2–1.5) is no quality score. Its
:data:`SCALES` say so, and the builds use them instead of the release's 0.3/0.5 cosines and 20/22 norms.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from senri.memory.identity import Scales

LANDMARKS_FILE = "shape_predictor_5_face_landmarks.dat"
DESCRIPTOR_FILE = "dlib_face_recognition_resnet_model_v1.dat"
#: Measured on scikit-image's astronaut, matplotlib's Grace Hopper and scikit-image's cameraman (CenterFace boxes):
#: same person 0.950–0.998, different people 0.811–0.904; 0.93 sits in the gap.
SCALES = Scales(quality=None, face_matching=0.93, identity_cosine=0.93,
                measured="dlib_resnet on packaged photos: same person >= 0.95, different <= 0.904 (cosine); "
                         "its norm is no quality score")


def models_folder() -> Path:
    """face_recognition_models/models inside the installed package (its own __init__ imports pkg_resources,
    which recent setuptools no longer has: the folder is found without importing it)."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("face embedder dlib_resnet needs face-recognition-models==0.3.0 (make install puts it in "
                          "the venv, without its dependencies): its models/ folder holds the weights")
    folder = Path(list(spec.submodule_search_locations)[0]) / "models"
    for name in (LANDMARKS_FILE, DESCRIPTOR_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name}: missing from the installed face-recognition-models package")
    return folder


class DlibResNetFaces:
    dimension = 128
    scales = SCALES
    weights = "face-recognition-models 0.3.0 (dlib ResNet v1 + 5-point landmarks), dlib-bin 20.0.1"

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        try:
            import dlib
        except ImportError as exc:
            raise ImportError("face embedder dlib_resnet needs dlib (the dlib-bin==20.0.1.post1 wheel)") from exc
        folder = models_folder()
        self._dlib = dlib
        self.landmarks = dlib.shape_predictor(str(folder / LANDMARKS_FILE))
        self.network = dlib.face_recognition_model_v1(str(folder / DESCRIPTOR_FILE))
        self.jitter = int((config or {}).get("jitter", 0))  # dlib's num_jitters (0: the face as aligned)

    def embed(self, rgb: np.ndarray, bbox) -> tuple[np.ndarray, tuple[tuple[float, float], ...]]:
        """The raw 128-d descriptor of the face in ``bbox`` and its keypoints (image-left eye centre, image-right
        eye centre, nose base): dlib's 5-point model gives two corners per eye (points 0–1 the image-right eye,
        2–3 the image-left one) and the nose base (point 4)."""
        x0, y0, x1, y1 = (int(round(float(v))) for v in bbox)
        image = np.ascontiguousarray(rgb, dtype=np.uint8)
        shape = self.landmarks(image, self._dlib.rectangle(x0, y0, x1, y1))
        vector = np.asarray(self.network.compute_face_descriptor(image, shape, self.jitter), dtype=np.float32)
        points = [(float(p.x), float(p.y)) for p in shape.parts()]
        mid = lambda a, b: ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)  # noqa: E731
        return vector, (mid(points[2], points[3]), mid(points[0], points[1]), points[4])
