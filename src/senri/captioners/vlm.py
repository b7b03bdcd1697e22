"""``vlm``: captions from any backend that takes images or video (vLLM, transformers, an OpenAI-compatible API).

A clip is captioned from **every frame its level's rate gives** (the paper's setting, and the released code's:
e.g. an 800 s EgoMem coarse clip at 0.25 fps is 200 frames); ``max_frames`` is an explicit cap (frames spread
uniformly, and the caption records how many it dropped). Frames are resized to ``short_side``. Where the
backend takes video (``video_input: auto``) the clip goes as one MP4 at the clip's own rate, the model's
native video input, as the released code passes it; otherwise as timestamped images. The instruction is
wrapped by the prompt of that input mode (config/prompts/captioner/clip_video.txt or clip_images.txt: the
clip's span, frame count and rate, and how the frames are shown).
All clips given together go to the backend as one batch, so a GPU engine sees many clips at once; a clip
whose frames or request fail is that clip's failure, and the batch's other captions are kept. A caption cut
at its token limit (``finish_reason: length``) is kept and marked so in the memory table; one cut inside a
repetition loop is asked once more with the model config's repetition settings (``memory.repetition_retry``,
a deviation from the paper, on by default).

The captioner's identity (part of every caption's cache key) holds the backend, the frame settings, the
completion limit, the loop retry's settings, the digest of both wrapper prompts and of the frame-selection
code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from senri.answers import split_reasoning
from senri.captioners.base import Caption, Captioner, Clip, VideoMedia, code_digest
from senri.repetition import looping

log = logging.getLogger(__name__)

#: The instruction's wrapper per input mode (video, images); both are in the captioner's identity.
WRAPPERS = ("clip_video", "clip_images")
#: A looping caption's retry penalty where the model config names none (a mild one: Qwen2.5-VL's own
#: generation config uses 1.05).
DEFAULT_REPETITION_PENALTY = 1.05


def clip_targets(clip: Clip, max_frames: int | None) -> tuple[list[float], int]:
    """The clip's frame times at its rate, and how many a ``max_frames`` cap drops (spread uniformly)."""
    from senri.decode import at_fps, uniform

    targets = at_fps(clip.fps, clip.start_s, clip.end_s) or [clip.start_s]
    if max_frames and len(targets) > max_frames:
        return uniform(int(max_frames), clip.start_s, clip.end_s), len(targets) - int(max_frames)
    return targets, 0


def clip_video(frames: Sequence[Any], fps: float) -> bytes:
    """The clip's decoded frames as one H.264 MP4 at ``fps``, through the frame store and carrier writers."""
    from senri.decode import write_carrier, write_frame_store

    with tempfile.TemporaryDirectory(prefix="senri-clip-") as tmp:
        store, mp4 = Path(tmp) / "frames.parquet", Path(tmp) / "clip.mp4"
        write_frame_store(frames, store, "clip", "clip")
        write_carrier(store, mp4, fps=fps)
        return mp4.read_bytes()


class BackendCaptioner(Captioner):
    is_vlm = True

    def __init__(self, config: Mapping[str, Any], media: VideoMedia) -> None:
        from senri.backends import open_backend
        from senri.prompts import prompt_set

        super().__init__(config, media)
        self.model_config = dict(config["model"])
        self.max_frames = int(config["max_frames"]) if config.get("max_frames") else None
        self.short_side = int(config.get("short_side", 448))
        self.max_tokens = int(config.get("max_tokens", 2048))
        self.repetition_retry = bool(config.get("repetition_retry", True))
        self.prompts = config.get("prompts") or prompt_set("captioner")
        self.backend = open_backend(self.model_config, None)
        if self.backend is None or not (self.backend.capabilities.images or self.backend.capabilities.video):
            raise ValueError(f"captioner model {self.model_config.get('name')!r} takes no images or video")
        mode = config.get("video_input", "auto")
        if mode not in ("auto", "video", "images"):
            raise ValueError(f"config.memory.video_input: {mode!r} is not one of auto, video, images")
        if mode == "video" and not self.backend.capabilities.video:
            raise ValueError(f"config.memory.video_input: the captioner model {self.model_config.get('name')!r} "
                             "takes no video input")
        self.as_video = mode == "video" or (mode == "auto" and self.backend.capabilities.video)

    def identity(self) -> dict[str, Any]:
        from senri import decode

        wrapper = hashlib.sha256("\0".join(self.prompts[name].text for name in WRAPPERS).encode()).hexdigest()[:16]
        return {"captioner": "vlm", "backend": self.backend.identity, "max_frames": self.max_frames,
                "short_side": self.short_side, "max_tokens": self.max_tokens, "as_video": self.as_video,
                "loop_retry": self.repetition_settings(),
                "temperature": float(self.model_config.get("temperature", 0.0)), "wrapper": wrapper,
                "frame_code": code_digest([clip_targets, clip_video, BackendCaptioner._frames,
                                           BackendCaptioner._request],
                                          [sys.modules[__name__], decode])}

    def _frames(self, clip: Clip) -> tuple[list, int]:
        """The clip's decoded frames (upright, resized) and how many the frame cap dropped."""
        from senri.decode import read_frames

        targets, dropped = clip_targets(clip, self.max_frames)
        frames = [f for f in read_frames(self.media.video, targets, short_side=self.short_side) if f.image is not None]
        return frames, dropped

    def _request(self, clip: Clip, frames: Sequence[Any]):
        from senri.backends.base import ChatRequest, ImagePart, Message, VideoPart
        from senri.decode import encode_jpeg

        wrapper = WRAPPERS[0] if self.as_video else WRAPPERS[1]
        text = self.prompts.render(wrapper, start=f"{clip.start_s:g}", end=f"{clip.end_s:g}", fps=f"{clip.fps:g}",
                                   n_frames=len(frames), instruction=clip.instruction)
        if self.as_video:
            times = tuple(float(clip.start_s if f.pts_s is None else f.pts_s) for f in frames)
            media: tuple = (VideoPart(clip_video(frames, clip.fps), clip.fps, times),)
        else:
            media = tuple(ImagePart(encode_jpeg(f.image), f.pts_s) for f in frames)
        return ChatRequest(messages=(Message("user", (text, *media)),),
                           temperature=float(self.model_config.get("temperature", 0.0)),
                           max_tokens=self.max_tokens, purpose=f"caption:{clip.level}")

    def caption_many(self, clips: Sequence[Clip]) -> list[Caption]:
        """Every clip's caption; a clip whose frames or request fail is that clip's error, never the batch's.
        A caption cut at the token limit in a repetition loop (:func:`looping`) is asked once more with the
        model config's repetition settings (:meth:`repetition_settings`); the retry's caption is kept, marked
        with its own ``finish_reason``."""
        captions: dict[int, Caption] = {}
        requests: dict[int, Any] = {}
        frames_of: dict[int, tuple[list, int]] = {}
        for i, clip in enumerate(clips):
            try:
                frames, dropped = self._frames(clip)
                if not frames:
                    captions[i] = Caption("", 0, f"no frame of {clip.start_s:g}–{clip.end_s:g} s could be decoded",
                                          dropped, sent=False)  # no request went out
                    continue
                requests[i] = self._request(clip, frames)
                frames_of[i] = frames, dropped
            except Exception as exc:  # noqa: BLE001 — this clip's failure, recorded on its row
                captions[i] = Caption("", 0, f"{type(exc).__name__}: {exc}", sent=False)
        order = list(requests)
        responses = dict(zip(order, self.backend.complete_many([requests[i] for i in order])))
        retry = self.repetition_settings()
        looped = [i for i in order if retry and responses[i].error is None and responses[i].truncated
                  and looping(split_reasoning(responses[i].text or "")[0])]
        if looped:
            again = self.backend.complete_many([dataclasses.replace(requests[i], **retry) for i in looped])
            for i, response in zip(looped, again):
                first = responses[i]
                kept = first if response.error else response  # a failed retry keeps the cut caption
                if response.error:
                    log.warning("%s: the loop retry failed (%s); the cut caption is kept", requests[i].purpose,
                                response.error)
                kept.prompt_tokens = first.prompt_tokens + response.prompt_tokens
                kept.completion_tokens = first.completion_tokens + response.completion_tokens
                kept.latency_s = first.latency_s + response.latency_s
                responses[i] = kept
        for i in order:
            r, (frames, dropped) = responses[i], frames_of[i]
            text = "" if r.error else split_reasoning(r.text or "")[0].strip()
            error = r.error or (None if text else "the captioner returned an empty caption")
            captions[i] = Caption(text, len(frames), error, dropped, r.prompt_tokens, r.completion_tokens,
                                  r.latency_s, finish_reason=r.finish_reason, calls=2 if i in looped else 1)
        return [captions[i] for i in range(len(clips))]

    def repetition_settings(self) -> dict[str, float]:
        """The request fields a looping caption's retry sets: the model config's ``repetition_penalty`` and
        ``frequency_penalty`` where given, else :data:`DEFAULT_REPETITION_PENALTY`; empty with
        ``memory.repetition_retry: false`` (no retry)."""
        if not self.repetition_retry:
            return {}
        settings = {name: float(self.model_config[name]) for name in ("repetition_penalty", "frequency_penalty")
                    if self.model_config.get(name) is not None}
        return settings or {"repetition_penalty": DEFAULT_REPETITION_PENALTY}

    def close(self) -> None:
        self.backend.close()
