"""``specialist``: Table 2's direct-perception specialists on their own release defaults (R2 of
shared/spec/direct_specialists.md) — Cambrian-S-7B, Cambrian-S-7B-LFP, InternVideo3-8B and VideoChat3-4B.

One method for the four; the method config's ``release`` picks the release's rules (:mod:`senri.specialists`):

- per video, once (S2: none of the four looks at the question before the video): the release's frame indices
  from senri's exact decoder count and average rate (C-I2, L-I1, I-I2, V-I2), decoded from the source at native
  size by index (S3: never the frame store nor a carrier), then the release's pixel steps where senri owns them
  (C: grey square pad → 384²; L: squash → 384²; I: per-frame resize at factor 32; V: JPEG q75 round trip, the
  two-stage resize), sent as lossless PNG in one :class:`~senri.backends.base.FramesPart` with the rate, the
  source indices and times, the source size and the processing options the model's side needs (L's memory
  preset, V's pixel keys);
- per question: the release's text (senri's restatement in ``config/prompts/<family>/``), one request with the
  release's generation settings, the release's answer parser. The reply's letter must be one of the question's
  letters: anything else (no letter, "E" on four options) is an unparsed answer, counted wrong.

The model runs in its own pinned environment (``backend: release_worker``, :mod:`senri.backends.worker`): the
method refuses any other backend, because only the worker takes frames with their metadata. The trace keeps the
indices (first, last, count), sizes, token estimates, the parse rule and the letter the rule read.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from senri.backends.base import ChatRequest, FramesPart, Message
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.records import Question, letters_in_words, option_letters
from senri.specialists import cambrian, internvideo3, lfp, videochat3

log = logging.getLogger(__name__)

RELEASES = ("cambrian_s", "cambrian_s_lfp", "internvideo3", "videochat3")
#: The prompt family of each release (``config/prompts/<family>/``).
FAMILIES = {"cambrian_s": "cambrian_s", "cambrian_s_lfp": "cambrian_s", "internvideo3": "internvideo3",
            "videochat3": "videochat3"}


def png(image: np.ndarray) -> bytes:
    """Lossless bytes of an RGB frame (what the worker decodes is exactly what senri computed)."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG", compress_level=1)
    return out.getvalue()


@dataclass
class VideoFrames:
    """A video's frames as the release's model gets them, built once per video."""

    part: FramesPart
    planned: int
    decoded: int
    trace: dict[str, Any]


class SpecialistDirect(Method):
    approach = "direct_perception"
    uses_model = True
    uses_pixels = True

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str, capabilities: Any,
                            roles: Any = None) -> list[str]:
        if capabilities is not None and not capabilities.images:
            return [f"method {method!r} shows the model decoded frames; model {model!r} takes no images"]
        return []

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        self.release = str(config.get("release", ""))
        if self.release not in RELEASES:
            raise ValueError(f"method {context.method_name!r}: release must be one of {', '.join(RELEASES)}, got "
                             f"{self.release!r}")
        backend = str(context.model_config.get("backend"))
        if backend != "release_worker":
            raise ValueError(f"method {context.method_name!r} runs its model in the release's own environment: model "
                             f"{context.model_name!r} must be a release_worker model config, not {backend!r}")
        if context.pixels is None:
            raise ValueError(f"method {context.method_name!r} decodes the video itself and got none")
        self.refuse_missing_capabilities()
        self.config = config
        self.text = self.prompts()
        info = context.video
        self.fps, self.n_frames = float(info.avg_fps), int(info.n_frames)
        self.duration_s = self.n_frames / self.fps if self.fps > 0 else 0.0
        self._frames: VideoFrames | None = None

    # --------------------------------------------------------------------------------------------- frames
    def indices(self) -> tuple[list[int], float]:
        """The release's source frames and the rate its model is told (C-I2, L-I1, I-I2, V-I2)."""
        c = self.config
        if self.release == "cambrian_s" or (self.release == "cambrian_s_lfp" and c.get("mode") == "standard"):
            return cambrian.frame_indices(self.n_frames, self.fps, int(c.get("max_frames", cambrian.MAX_FRAMES)),
                                          float(c.get("video_fps", cambrian.VIDEO_FPS))), float(c.get("video_fps", 1))
        if self.release == "cambrian_s_lfp":
            rate = float(c.get("stream_fps", 1.0))
            return cambrian.stream_indices(self.n_frames, self.fps, rate), rate
        if self.release == "internvideo3":
            return internvideo3.sample_frames(self.n_frames, self.fps, float(c.get("fps", internvideo3.FPS)),
                                              internvideo3.MIN_FRAMES,
                                              int(c.get("max_frames", internvideo3.MAX_FRAMES))), self.fps
        preset = videochat3.PRESETS[str(c.get("preset", "lvbench"))]
        limit = int(c.get("frames_limit") or preset.frames_limit)
        # V-I2: LVBench's rate divides by the container's duration (ffprobe), Video-MME's by N / fps (decord)
        container = float(self.context.video.duration_s or 0.0)
        duration = container if preset.text == "lvbench" and container > 0 else self.duration_s
        return videochat3.sample_indices(self.n_frames, self.fps, limit, float(c.get("fps", videochat3.TARGET_FPS)),
                                         duration)

    def decode(self, indices: Sequence[int]) -> Iterator[tuple[int, np.ndarray]]:
        """The distinct source frames of ``indices`` at native size, in order, by index on senri's exact decoder
        (each read at the middle of its frame interval); a frame that does not decode is left out."""
        from senri.decode import read_frames

        wanted = sorted(set(indices))
        for index, frame in zip(wanted, read_frames(self.context.pixels, [(i + 0.5) / self.fps for i in wanted],
                                                    accuracy="exact")):
            if frame.image is not None:
                yield index, frame.image

    def frames(self) -> VideoFrames:
        if self._frames is None:
            self._frames = self._build_frames()
        return self._frames

    def pixel_rule(self, height: int, width: int, n_frames: int, rate: float
                   ) -> tuple[Callable[[np.ndarray], np.ndarray], dict[str, Any], dict[str, Any]]:
        """The release's pixel steps for a video of ``n_frames`` frames of ``height`` × ``width`` (C-I3, L-I2, I-I3,
        V-I2/V-I3): the per-frame transform, the processing options sent with the frames, and trace fields."""
        from senri.methods.seeker import bicubic, jpeg_round_trip

        c = self.config
        if self.release in ("cambrian_s", "cambrian_s_lfp"):
            squash = self.release == "cambrian_s_lfp" and c.get("mode", "stream") == "stream"
            trace = {"pixels": "squash_384" if squash else "grey_pad_384",
                     "tokens_per_frame": cambrian.unpad_grid(width, height).tokens}
            options: dict[str, Any] = {}
            if squash:
                chosen = c.get("preset", "auto")
                # D2: a split's preset by name or auto; a mapping is a preset of one's own (bench/worker_envs.py
                # shrinks W and B so a short clip exercises eviction, pooling and consolidation on the model)
                preset = (lfp.Preset(**chosen) if isinstance(chosen, Mapping)
                          else lfp.preset_for(self.duration_s, chosen))
                options = {"lfp": {"window": preset.window, "method": preset.method, "topk": preset.topk,
                                   "threshold": preset.threshold, "budget": preset.budget, "ratio": preset.ratio}}
                trace["lfp_preset"] = options["lfp"]
            return (lambda image: cambrian.model_pixels(image, squash=squash)), options, trace
        if self.release == "internvideo3":
            pixels = int(c.get("frame_pixels", internvideo3.FRAME_PIXELS))
            factor = int(c.get("factor", internvideo3.FACTOR))
            size = internvideo3.frame_size(n_frames, height, width, str(c.get("frame_pixel_budget", "per_frame")),
                                           factor, pixels, pixels)
            trace = {"size_hw": list(size), "tokens_per_pair": internvideo3.tokens_per_pair(*size, factor),
                     "pairs": -(-n_frames // 2)}
            return (lambda image: bicubic(image, *size)), {}, trace
        preset = videochat3.PRESETS[str(c.get("preset", "lvbench"))]
        total = int(c.get("total_pixels") or preset.total_pixels)
        quality = int(c.get("jpeg_quality", 75))
        # the stage-1 size of the JPEG'd frame (its size is the source's); all frames of a video share it
        stage1, final = videochat3.frame_sizes([(height, width)] * max(n_frames, 1), total)
        stage1 = stage1[0]
        options = {"sample_fps": rate, "min_pixels": videochat3.MIN_PIXELS, "max_pixels": videochat3.MAX_PIXELS,
                   "total_pixels": total, "placeholder_metadata": True}
        trace = {"stage1_hw": list(stage1), "size_hw": list(final),
                 "visual_tokens": videochat3.visual_tokens(n_frames, *final)}
        return (lambda image: bicubic(bicubic(jpeg_round_trip(image, quality), *stage1), *final)), options, trace

    def _build_frames(self) -> VideoFrames:
        """Each decoded frame goes through the release's pixel steps and into PNG at once, so a video's frames are
        never all held at native size (2,048 frames of 1080p would be 12 GB)."""
        indices, rate = self.indices()
        trace: dict[str, Any] = {"release": self.release, "n_indices": len(indices),
                                 "first_indices": indices[:4], "last_indices": indices[-4:], "rate": rate}
        encoded: dict[int, bytes] = {}
        rule, options, source = None, {}, (0, 0)
        for index, image in self.decode(indices):
            if rule is None:
                source = image.shape[:2]
                rule, options, fields = self.pixel_rule(*source, len(indices), rate)
                trace.update(fields)
            encoded[index] = png(rule(image))
        kept = [i for i in indices if i in encoded]
        part = FramesPart(frames=tuple(encoded[i] for i in kept), rate=rate, indices=tuple(kept),
                          times_s=tuple(i / self.fps for i in kept), source_wh=(int(source[1]), int(source[0])),
                          options=json.dumps(options, sort_keys=True) if options else "")
        log.info("%s: %d of %d frames decoded for %s", self.context.video.video_id, len(kept), len(indices),
                 self.release)
        return VideoFrames(part, len(indices), len(kept), trace)

    # --------------------------------------------------------------------------------------------- answer
    def request(self, question: Question, frames: FramesPart) -> ChatRequest:
        """The release's message and generation settings for one question (C-P1/C-D1, L-P1/L-D1, I-P1/I-D1,
        V-P1/V-D1)."""
        c, options = self.config, list(question.options)
        seed = self.context.seed
        if self.release in ("cambrian_s", "cambrian_s_lfp"):
            stream = self.release == "cambrian_s_lfp" and c.get("mode", "stream") == "stream"
            user = (cambrian.lfp_text if stream else cambrian.videomme_text)(self.text, question.question, options)
            prompt = cambrian.chatml(self.text.render("system"), user)
            return ChatRequest(messages=(Message("user", (frames, prompt)),), max_tokens=int(c.get("max_new_tokens", 16)),
                               temperature=0.0, seed=seed, repetition_penalty=1.1 if stream else None,
                               purpose=f"{self.release}:answer")
        if self.release == "internvideo3":
            text = self.text.render("mcq", question=question.question, options="\n".join(cambrian.lettered(options)))
            return ChatRequest(messages=(Message("user", (frames, text)),),
                               max_tokens=int(c.get("max_new_tokens", internvideo3.MAX_NEW_TOKENS)), temperature=0.0,
                               seed=seed, purpose="internvideo3:answer")
        letters = letters_in_words(option_letters(len(options)))  # "A, B, C or D", as the release names four
        if str(c.get("preset", "lvbench")) == "videomme":
            parts: tuple = ("", frames, self.text.render("videomme_frames", letters=letters),
                            self.text.render("videomme_question", question=question.question,
                                             options="\n".join(cambrian.lettered(options))))
        else:
            stem, choices = videochat3.split_lvbench(videochat3.lvbench_question(question.question, options))
            parts = ("", frames, self.text.render("lvbench", stem=stem, choices=choices, letters=letters))
        greedy = bool(c.get("greedy", False))
        return ChatRequest(messages=(Message("user", parts),), max_tokens=int(c.get("max_new_tokens", 32768)),
                           temperature=0.0 if greedy else float(c.get("temperature", 0.01)),
                           top_p=1.0 if greedy else float(c.get("top_p", 0.8)),
                           top_k=None if greedy else int(c.get("top_k", 20)),
                           repetition_penalty=float(c.get("repetition_penalty", 1.0)), seed=seed,
                           purpose="videochat3:answer")

    def read_letter(self, reply: str, question: Question) -> tuple[str | None, str, str]:
        """(the question's letter or None, what the release's rule read, the rule's name)."""
        if self.release == "cambrian_s_lfp" and self.config.get("mode", "stream") == "stream":
            word = cambrian.first_word(reply)
            return cambrian.first_word_letter(reply, question.letters), word, "first_word (L-A1)"
        if self.release in ("cambrian_s", "cambrian_s_lfp"):
            read, rule = cambrian.videomme_letter(reply), "first_capital (C-A1)"
        elif self.release == "internvideo3":
            read, rule = internvideo3.parse_answer(reply), "start_letter_then_regex (I-A1)"
        elif str(self.config.get("preset", "lvbench")) == "videomme":
            read, rule = videochat3.videomme_letter(reply), "first_capital (V-A1, Video-MME)"
        else:
            read, rule = videochat3.lvbench_letter(reply), "lvbench (V-A1)"
        return (read if read in question.letters else None), read, rule

    def answer(self, question: Question) -> MethodAnswer:
        tally = CallTally()
        video = self.frames()
        tally.did("frames_seen", video.decoded)
        if video.decoded < video.planned:
            tally.count("black_frames", video.planned - video.decoded)
        trace: dict[str, Any] = dict(video.trace)
        backend = self.context.backend
        if backend is not None:
            trace["model_identity"] = {k: v for k, v in backend.identity.items() if k != "adapter_options"}
        if not video.decoded:
            tally.errors.append(f"{self.release}: no frame of the video decoded")
            return MethodAnswer(None, None, False, tally, trace)
        request = self.request(question, video.part)
        (response,) = self.chat_many([request])
        tally.add(request, response)
        if response.truncated:
            tally.count("truncated_replies")
        reply = response.text or ""
        letter, read, rule = self.read_letter(reply, question)
        trace.update(parse_rule=rule, release_read=read, reply=reply[:2000])
        return MethodAnswer(letter, reply, letter is not None, tally, trace)
