"""What a captioner is given (a clip and the video's media) and what it returns."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence


@dataclass(frozen=True)
class Clip:
    """A span of the video to describe at a frame rate, following an instruction, at a memory depth."""

    start_s: float
    end_s: float
    fps: float
    instruction: str
    level: str


@dataclass(frozen=True)
class Caption:
    """A captioner's text for one clip; ``error`` (text empty) when it could not describe the clip.
    ``dropped_frames``: frames the clip's rate gave that a frame cap left out; tokens and ``latency_s`` are
    the model call's (0 for a measuring captioner). ``sent``: whether a request reached the model (False for a
    clip that failed before any call, e.g. no frame could be decoded), so call counts hold only real calls.
    ``finish_reason``: the model call's (``length``: the caption was cut at the token limit; None for a
    measuring captioner); ``calls``: model calls it took (2 when a looping caption was retried)."""

    text: str
    n_frames: int
    error: str | None = None
    dropped_frames: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    sent: bool = True
    finish_reason: str | None = None
    calls: int = 1


def code_digest(roots: Sequence[Any], modules: Sequence[Any]) -> str:
    """sha256 of the source of ``roots`` and of every function or class of ``modules`` they reach by name,
    transitively: the code a captioner runs, and no more, so editing an unrelated function of a shared
    module (say the track stage's plotting) does not re-key every caption. A name is followed when it is a
    module-level function or class of one of ``modules`` (over-inclusion only costs a re-caption)."""
    import inspect
    import re

    namespaces = [vars(m) for m in modules]
    sources: dict[str, str] = {}
    todo = list(roots)
    while todo:
        obj = todo.pop()
        name = f"{obj.__module__}.{obj.__qualname__}"
        if name in sources:
            continue
        sources[name] = inspect.getsource(obj)
        for word in set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", sources[name])):
            for namespace in namespaces:
                member = namespace.get(word)
                defined_here = getattr(member, "__module__", None) == namespace["__name__"]
                if (inspect.isfunction(member) or inspect.isclass(member)) and defined_here:
                    todo.append(member)
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name].encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class VideoMedia:
    """Everything about one video a captioner may read: the (anonymized) video and the per-video tables."""

    video_id: str
    video: Path
    fingerprint: str
    duration_s: float
    track: Path | None = None
    ocr: Path | None = None
    detections: Path | None = None


class Captioner:
    """Base class. ``is_vlm`` says whether each caption is a vision-language model call (costed as such)."""

    is_vlm: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any], media: VideoMedia) -> None:
        self.config = config
        self.media = media

    def identity(self) -> dict[str, Any]:
        """What makes two captioners' captions interchangeable: part of every caption's cache key."""
        raise NotImplementedError

    def caption_many(self, clips: Sequence[Clip]) -> list[Caption]:
        """Describe several clips (GPU backends see them as one batch)."""
        raise NotImplementedError

    def close(self) -> None:
        pass
