"""Carrier videos for vLLM, in process and served, decoded one way.

In process, :class:`~senri.backends.vllm.VLLMBackend` hands ``LLM.generate`` each carrier as its decoded frames
and the metadata Qwen-VL processors read (:func:`video_metadata`: the carrier's rate, and its frames' source
times as ``frames_indices``). ``vllm serve`` instead loads a ``video_url`` with a video loader of its own, which
knows nothing of source times (frames 0…n−1 at the MP4's rate): the same request would reach the model with
other timestamps and give other answers under the same cache key.

So a served carrier travels as a *senri carrier* (:data:`CARRIER_MEDIA_TYPE`: the MP4 behind a one-line JSON
header holding its rate, source times and timeline), and the server decodes it with senri's own loader,
registered in the server process as a vLLM plugin (:func:`register`, the ``vllm.general_plugins`` entry point
in ``pyproject.toml``) and selected by ``VLLM_VIDEO_LOADER_BACKEND=senri`` (:func:`server_env`). That loader
calls :func:`carrier_video`, the function the in-process engine calls: the processor gets the same frames and
the same metadata either way.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any, Mapping

from senri.backends.base import BackendError, VideoPart

#: The data-URL media type of a senri carrier; vLLM hands any media type but ``video/jpeg`` to its loader.
CARRIER_MEDIA_TYPE = "video/x-senri-carrier"
#: The name the loader is registered under in vLLM's video-loader registry.
LOADER_NAME = "senri"
#: The environment variable that selects a vLLM server's video loader.
LOADER_ENV = "VLLM_VIDEO_LOADER_BACKEND"
#: What opens a senri carrier's bytes (then one JSON line, then the MP4).
CARRIER_MAGIC = b"SENRI-CARRIER/1\n"


def carrier_bytes(part: VideoPart) -> bytes:
    """The carrier's wire form: :data:`CARRIER_MAGIC`, a JSON line with its rate, source times and timeline,
    then its MP4 bytes unchanged."""
    header = {"fps": float(part.fps), "times_s": [float(t) for t in part.times_s], "timeline": part.timeline}
    return CARRIER_MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n" + part.mp4


def carrier_data_url(part: VideoPart) -> str:
    return f"data:{CARRIER_MEDIA_TYPE};base64," + base64.b64encode(carrier_bytes(part)).decode("ascii")


def read_carrier(data: bytes) -> VideoPart:
    """The :class:`VideoPart` a :func:`carrier_bytes` holds; a plain MP4 (no header) is a carrier on its own
    timeline at its container's rate. A ValueError says what is wrong with anything else."""
    if not data.startswith(CARRIER_MAGIC):
        if data[4:8] != b"ftyp":
            raise ValueError("a video input that is neither a senri carrier nor an MP4 file")
        return VideoPart(data, _container_rate(data), (), timeline="carrier")
    header, newline, mp4 = data[len(CARRIER_MAGIC):].partition(b"\n")
    try:
        fields = json.loads(header) if newline else None
        part = VideoPart(mp4, float(fields["fps"]), tuple(float(t) for t in fields["times_s"]),
                         timeline=str(fields["timeline"]))
    except (TypeError, KeyError, ValueError) as exc:
        raise ValueError(f"a senri carrier with an unreadable header ({type(exc).__name__}: {exc})") from None
    if mp4[4:8] != b"ftyp":
        raise ValueError("a senri carrier whose video is not an MP4 file")
    return part


def _container_rate(mp4: bytes) -> float:
    import av

    with av.open(io.BytesIO(mp4)) as container:
        rate = container.streams.video[0].average_rate
    return float(rate) if rate else 1.0


def video_metadata(part: VideoPart, n_frames: int) -> dict[str, Any]:
    """The metadata vLLM's Qwen2.5-VL / Qwen3-VL processors read for one carrier of ``n_frames`` frames.

    ``fps`` is the carrier's rate and ``total_num_frames`` its frame count, so Qwen2.5-VL's sampled rate
    (frames kept / total × fps) is the carrier's; ``frames_indices`` are the frames' source times × fps (rounded
    to the carrier's frame step) so Qwen3-VL's timestamps (index / fps) are the source times, or 0…n−1 (carrier
    offsets) for a part on its carrier's timeline or without source times."""
    if part.times_s and len(part.times_s) != n_frames:
        raise ValueError(f"a carrier of {n_frames} frames came with {len(part.times_s)} source times")
    if part.timeline == "source" and part.times_s:
        indices = [int(round(float(t) * part.fps)) for t in part.times_s]
    else:
        indices = list(range(n_frames))
    return {"fps": float(part.fps), "frames_indices": indices, "total_num_frames": n_frames,
            "duration": n_frames / part.fps, "video_backend": LOADER_NAME, "do_sample_frames": False}


def carrier_video(part: VideoPart) -> tuple[Any, dict[str, Any]]:
    """(every frame of the carrier as one uint8 array of shape frames × height × width × 3, its
    :func:`video_metadata`): what a Qwen-VL processor in vLLM gets for one video, in process or served."""
    import numpy as np

    from senri.backends.transformers import carrier_frames

    frames = np.stack([np.asarray(f) for f in carrier_frames(part)])
    return frames, video_metadata(part, len(frames))


def load_carrier(data: bytes, num_frames: int = -1, **_: Any) -> tuple[Any, dict[str, Any]]:
    """The served twin of the in-process input: the loader vLLM's server calls with a ``video_url``'s bytes.
    ``num_frames`` (the server's ``--media-io-kwargs``) is not applied: in process the carrier passes whole,
    so served it does too."""
    return carrier_video(read_carrier(data))


def server_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The environment a ``vllm serve`` of ``config`` needs: senri's video loader for a model that takes video.
    A BackendError when this environment's vLLM would not find that loader (senri installed without its entry
    points): the server would fail every video request, or decode carriers as plain MP4s without their times."""
    if not config.get("video"):
        return {}
    if not plugin_installed():
        raise BackendError(f"model config {config.get('name') or config.get('model')!r} takes video, and a served "
                           "vLLM model decodes carriers with senri's video loader, which this environment does not "
                           "register (no 'vllm.general_plugins' entry point senri_carrier_video): reinstall senri "
                           "here (pip install -e .)")
    return {LOADER_ENV: LOADER_NAME}


def plugin_installed() -> bool:
    """Whether this environment's vLLM will load :func:`register` (senri installed with its entry points)."""
    from importlib.metadata import entry_points

    return any(e.value == f"{__name__}:register" for e in entry_points(group="vllm.general_plugins"))


def register() -> None:
    """vLLM's general-plugin hook (run in every vLLM process): adds senri's loader to the video-loader registry
    under :data:`LOADER_NAME`. A vLLM without a video-loader registry is left as it is."""
    try:
        from vllm.multimodal.video import VIDEO_LOADER_REGISTRY, VideoLoader
    except ImportError:
        return
    if LOADER_NAME in getattr(VIDEO_LOADER_REGISTRY, "name2class", {}):
        return

    class SenriCarrierLoader(VideoLoader):
        """Decodes senri carriers as :func:`load_carrier` does (the in-process engine's frames and metadata)."""

        @classmethod
        def load_bytes(cls, data: bytes, num_frames: int = -1, **kwargs: Any):
            return load_carrier(data, num_frames, **kwargs)

    VIDEO_LOADER_REGISTRY.register(LOADER_NAME)(SenriCarrierLoader)
