"""``vlm``: captions from any backend that takes images (vLLM, transformers, an OpenAI-compatible API).

A clip's frames are decoded at the clip's frame rate (capped at ``max_frames``, spread uniformly), resized to
``short_side``, and sent as timestamped images with the instruction. All clips given together go to the
backend as one batch, so a GPU engine sees many clips at once.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from senri.captioners.base import Caption, Captioner, Clip, VideoMedia


class BackendCaptioner(Captioner):
    is_vlm = True

    def __init__(self, config: Mapping[str, Any], media: VideoMedia) -> None:
        from senri.backends import open_backend

        super().__init__(config, media)
        self.model_config = dict(config["model"])
        self.max_frames = int(config.get("max_frames", 32))
        self.short_side = int(config.get("short_side", 448))
        self.backend = open_backend(self.model_config, None)
        if self.backend is None or not self.backend.capabilities.images:
            raise ValueError(f"captioner model {self.model_config.get('name')!r} takes no images")

    def identity(self) -> dict[str, Any]:
        return {"captioner": "vlm", "backend": self.backend.identity, "max_frames": self.max_frames,
                "short_side": self.short_side, "max_tokens": int(self.model_config.get("max_tokens", 512)),
                "temperature": float(self.model_config.get("temperature", 0.0))}

    def _frames(self, clip: Clip) -> list:
        from senri.backends.base import ImagePart
        from senri.decode import at_fps, encode_jpeg, read_frames, uniform

        targets = at_fps(clip.fps, clip.start_s, clip.end_s) or [clip.start_s]
        if len(targets) > self.max_frames:
            targets = uniform(self.max_frames, clip.start_s, clip.end_s)
        return [ImagePart(encode_jpeg(f.image), f.pts_s)
                for f in read_frames(self.media.video, targets, short_side=self.short_side) if f.image is not None]

    def caption_many(self, clips: Sequence[Clip]) -> list[Caption]:
        from senri.backends.base import ChatRequest, Message

        frames = [self._frames(clip) for clip in clips]
        requests = [
            ChatRequest(
                messages=(Message("user", (*images, f"These are frames of my first-person video from "
                                                    f"{clip.start_s:.0f}s to {clip.end_s:.0f}s, each after its "
                                                    f"timestamp. {clip.instruction}")),),
                temperature=float(self.model_config.get("temperature", 0.0)),
                max_tokens=int(self.model_config.get("max_tokens", 512)),
                purpose=f"caption:{clip.level}",
            )
            for clip, images in zip(clips, frames)
        ]
        responses = self.backend.complete_many(requests)
        return [Caption(r.text if not r.error else "", len(images), r.error) for r, images in zip(responses, frames)]

    def close(self) -> None:
        self.backend.close()
