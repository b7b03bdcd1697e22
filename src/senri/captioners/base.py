"""What a captioner is given (a clip and the video's media) and what it returns."""

from __future__ import annotations

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
    """A captioner's text for one clip; ``error`` (text empty) when it could not describe the clip."""

    text: str
    n_frames: int
    error: str | None = None


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
