"""``direct``: direct perception — N frames sampled uniformly over the whole video, with the question.

The frames come from the decode stage's frame store of the method's plan (``plan``, by default
``uniform_<frames>``, which the config adds to the sampling plans), so every run and model with the same
budget sees exactly the same frames. They are sent as timestamped images, or as the store's 1 frame/s
carrier video when ``visual_input`` is ``video`` (or ``auto`` and the backend takes video).
A list of budgets in the config (``frames: [32, 64, ...]``) becomes one run per budget.
"""

from __future__ import annotations

import polars as pl

from senri.backends.base import ImagePart, Part, VideoPart
from senri.methods.base import RunContext
from senri.methods.prompted import PromptedChoice
from senri.records import FrameRow, Question, read_table


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class DirectPerception(PromptedChoice):
    approach = "direct_perception"
    uses_model = True
    uses_frames = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        if context.frames is None:
            raise ValueError(f"method {context.method_name!r} needs its frame store (plan "
                             f"{context.method_config.get('plan')!r}); none was given")
        store = read_table(context.frames, FrameRow).filter(pl.col("jpeg").is_not_null()).sort("target_s")
        if store.is_empty():
            raise ValueError(f"{context.frames}: the frame store holds no decoded frame")
        self.images = [ImagePart(row["jpeg"], row["pts_s"]) for row in store.iter_rows(named=True)]
        capabilities = context.backend.capabilities if context.backend is not None else None
        wanted = str(context.method_config.get("visual_input", "auto"))
        takes_video = capabilities is not None and capabilities.video and context.carrier is not None
        self.as_video = wanted == "video" or (wanted == "auto" and takes_video and not capabilities.images)
        if self.as_video and (context.carrier is None or not takes_video):
            raise ValueError(f"method {context.method_name!r}: visual_input video needs a backend that takes "
                             f"video and the plan's carrier (sampling.carriers: true)")
        if not self.as_video and capabilities is not None and not capabilities.images:
            raise ValueError(f"method {context.method_name!r}: model {context.model_name!r} takes no images; "
                             f"direct perception needs a vision-language model")
        self.video_part = VideoPart(context.carrier.read_bytes(), 1.0) if self.as_video else None

    def visual_parts(self, question: Question) -> list[Part]:
        return [self.video_part] if self.video_part is not None else list(self.images)

    def context_text(self, question: Question) -> str:
        duration = format_duration(self.context.video.duration_s)
        if self.video_part is not None:
            return (f"The clip packs {len(self.images)} frames sampled uniformly from a {duration} first-person "
                    f"video (one frame per clip second, in time order). The video is mine: 'I' is the camera wearer.")
        return (f"Above are {len(self.images)} frames sampled uniformly from a {duration} first-person video, in "
                f"time order, each after its timestamp. The video is mine: 'I' is the camera wearer.")
