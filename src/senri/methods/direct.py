"""``direct``: direct perception — N frames sampled uniformly over the whole video, with the question.

The frames come from the decode stage's frame store of the method's plan (``plan``, by default
``uniform_<frames>``, which the config adds to the sampling plans), so every run and model with the same
budget sees exactly the same frames. As the paper ran it, a backend that takes video (the Qwen-VL family via
vLLM or transformers, a video-capable OpenAI-compatible server) gets them through its native video interface:
the store's 1 frame/s carrier, one video of exactly the sampled frames (checked at run time; at most
``max_video_frames`` = 512), with the source time of every carrier second in the text. Other backends get
timestamped images (``visual_input: images`` forces that). Decoding is greedy (``greedy: true``).
A list of budgets in the config (``frames: [32, 64, ...]``) becomes one run per budget (senri.config.LIST_PARAMETERS).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import polars as pl

from senri.backends.base import Capabilities, ImagePart, Part, VideoPart
from senri.methods.base import MethodAnswer, RunContext
from senri.methods.prompted import PromptedChoice
from senri.records import FrameRow, Question, read_table
from senri.track import clock

log = logging.getLogger(__name__)
VISUAL_INPUTS = ("auto", "video", "images")


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class DirectPerception(PromptedChoice):
    approach = "direct_perception"
    uses_model = True
    uses_frames = True

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str,
                            capabilities: Capabilities | None,
                            roles: Mapping[str, tuple[str, Capabilities | None]] | None = None) -> list[str]:
        """The frames go as images or as one video (``visual_input``); auto takes either. Whether a video fits
        (``max_video_frames``) and has its carrier is the job's to check."""
        wanted = str(spec.get("visual_input", "auto"))
        images = capabilities is not None and capabilities.images
        video = capabilities is not None and capabilities.video
        if wanted == "video" and not video:
            return [f"method {method!r}: visual_input video, but model {model!r} takes no video (model config "
                    f"video: true); use visual_input images or auto"]
        if not images and not (wanted == "auto" and video):
            return [f"method {method!r}: model {model!r} takes no images; direct perception needs a "
                    f"vision-language model"]
        return []

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        if context.frames is None:
            raise ValueError(f"method {context.method_name!r} needs its frame store (plan "
                             f"{config.get('plan')!r}); none was given")
        store = read_table(context.frames, FrameRow).sort("target_s")
        decoded = store.filter(pl.col("jpeg").is_not_null())
        if decoded.is_empty():
            raise ValueError(f"{context.frames}: the frame store holds no decoded frame")
        self.images = [ImagePart(row["jpeg"], row["pts_s"]) for row in decoded.iter_rows(named=True)]
        self.frames_missing = store.height - decoded.height
        if self.frames_missing:
            log.warning("%s: %d of %d sampled frames could not be decoded; the model sees %d", context.frames,
                        self.frames_missing, store.height, decoded.height)
        capabilities = context.backend.capabilities if context.backend is not None else None
        wanted = str(config.get("visual_input", "auto"))
        if wanted not in VISUAL_INPUTS:
            raise ValueError(f"method {context.method_name!r}: visual_input must be one of {VISUAL_INPUTS}")
        self.max_video_frames = int(config.get("max_video_frames", 512))
        takes_video = capabilities is not None and capabilities.video and context.carrier is not None
        fits = len(self.images) <= self.max_video_frames
        self.as_video = wanted == "video" or (wanted == "auto" and takes_video and fits)
        if self.as_video and not takes_video:
            raise ValueError(f"method {context.method_name!r}: visual_input video needs a backend that takes "
                             f"video and the plan's carrier (model config video: true)")
        if self.as_video and not fits:
            raise ValueError(f"method {context.method_name!r}: {len(self.images)} frames exceed max_video_frames "
                             f"{self.max_video_frames} of the native video interface; use visual_input: images")
        if not self.as_video and capabilities is not None and not capabilities.images:
            raise ValueError(f"method {context.method_name!r}: model {context.model_name!r} takes no images; "
                             f"direct perception needs a vision-language model")
        self.video_part = None
        if self.as_video:
            from senri.decode import carrier_frame_count

            mp4 = context.carrier.read_bytes()
            count = carrier_frame_count(mp4)
            # The paper's carrier check: the carrier holds exactly the sampled frames, one per second.
            if count != len(self.images):
                raise ValueError(f"{context.carrier}: the carrier holds {count} frames, the frame store "
                                 f"{context.frames} has {len(self.images)} decoded frames; rebuild the carrier")
            self.video_part = VideoPart(mp4, 1.0, tuple(float(p.time_s or 0.0) for p in self.images))

    def visual_parts(self, question: Question) -> list[Part]:
        return [self.video_part] if self.video_part is not None else list(self.images)

    def seen_frames(self) -> list[float]:
        return [round(float(image.time_s), 3) for image in self.images if image.time_s is not None]

    def context_text(self, question: Question) -> str:
        duration = format_duration(self.context.video.duration_s)
        if self.video_part is not None:
            return self.prompt_set.render("direct_video", n_frames=len(self.images), duration=duration,
                                          timestamps=", ".join(clock(p.time_s or 0.0) for p in self.images))
        return self.prompt_set.render("direct_images", n_frames=len(self.images), duration=duration)

    def _finish(self, question, requests, responses, tally) -> MethodAnswer:
        answer = super()._finish(question, requests, responses, tally)
        answer.trace = {**(answer.trace or {}), "visual_input": "video" if self.as_video else "images",
                        "frames": len(self.images), **({"frames_missing": self.frames_missing}
                                                       if self.frames_missing else {})}
        return answer
