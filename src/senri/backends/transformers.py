"""``transformers`` backend: a local Hugging Face vision-language model (e.g. the Qwen2.5-VL family).

The model is loaded from a local folder (``path``), through ``AutoProcessor`` and
``AutoModelForImageTextToText``, so any image-text-to-text model transformers knows works the same way.
Nothing is downloaded at run time: ``HF_HUB_OFFLINE=1`` is set before transformers is imported.
Frames go in as images, in order, each after its timestamp ("[t=12.0s]") when the method gives one. With
``video: true`` and a processor that has a video processor (Qwen2-VL / Qwen2.5-VL; it needs torchvision), a
carrier video goes through the processor's native video input: its frames decoded, every one kept
(``do_sample_frames=False``), at the carrier's rate. ``thinking: false`` is passed to the chat template as
``enable_thinking=False``.

Plain ``generate`` cannot constrain output to a JSON schema, so this backend says so in its capabilities and
methods fall back to free text and the strict answer parser; answer-letter scoring reads the first
generated position's log-probabilities directly from the logits.
"""

from __future__ import annotations

import io
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from senri.backends.base import (FINISH_STOP, AudioPart, Backend, BackendError, Capabilities, ChatRequest, ChatResponse,
                                 ImagePart, VideoPart, stop_match, text_only)
from senri.backends.openai_format import chat_template_kwargs, uses_audio_in_video

log = logging.getLogger(__name__)


def carrier_frames(part: VideoPart) -> list[Any]:
    """Every frame of a carrier video as an RGB PIL image, in order (the processor receives all of them)."""
    import av

    with av.open(io.BytesIO(part.mp4)) as container:
        return [frame.to_image().convert("RGB") for frame in container.decode(video=0)]


def media_kwargs(request: ChatRequest, videos: list[VideoPart]) -> dict[str, Any]:
    """The processor's video and audio arguments for a request: every carrier frame kept at the carrier's rate;
    the sound (:func:`hf_audios`) at 16 kHz; ``use_audio_in_video`` when a video brings its own track (an omni
    processor then interleaves the two by time, TMRoPE; shared/spec/omni_memory.md M-C12, U-5)."""
    kwargs: dict[str, Any] = {}
    if videos:
        kwargs = {"videos": [carrier_frames(v) for v in videos], "fps": [v.fps for v in videos],
                  "do_sample_frames": False}
    audios = hf_audios(request)
    if audios:
        kwargs["audio"] = [samples for samples, _ in audios]
        kwargs["sampling_rate"] = audios[0][1]
    if uses_audio_in_video(request):
        kwargs["use_audio_in_video"] = True
    return kwargs


def finish_reason(new_tokens: list[int], max_tokens: int, eos_token_id: Any, generation_config: Any = None) -> str:
    """``length`` when generation used all ``max_tokens`` without ending on an end-of-sequence token (the
    tokenizer's or the generation config's, which may list several), else ``stop``."""
    ends = set()
    for ids in (eos_token_id, getattr(generation_config, "eos_token_id", None)):
        ends.update(ids if isinstance(ids, (list, tuple)) else ([] if ids is None else [ids]))
    if len(new_tokens) >= max_tokens and not (new_tokens and new_tokens[-1] in ends):
        return "length"
    return "stop"


def hf_messages(request: ChatRequest, video_ok: bool = False, audio_ok: bool = False
                ) -> tuple[list[dict[str, Any]], list[Any], list[VideoPart]]:
    """Chat messages in transformers' typed-content form, plus the PIL images and the video parts in the order
    they appear. An audio part is an ``audio`` placeholder (its samples: :func:`hf_audios`); a video's own sound
    track adds none — the omni processor interleaves it with the video's frames (``use_audio_in_video``)."""
    from PIL import Image

    messages, images, videos = [], [], []
    for message in request.messages:
        content: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, str):
                content.append({"type": "text", "text": part})
            elif isinstance(part, (AudioPart, VideoPart)) and not audio_ok and (
                    isinstance(part, AudioPart) or part.audio is not None):
                raise ValueError("this model takes no audio input (model config audio: true, an omni model)")
            elif isinstance(part, AudioPart):
                if part.label:
                    content.append({"type": "text", "text": part.label})
                content.append({"type": "audio"})
            elif isinstance(part, ImagePart):
                if part.label():
                    content.append({"type": "text", "text": part.label()})
                images.append(Image.open(io.BytesIO(part.jpeg)).convert("RGB"))
                content.append({"type": "image"})
            elif video_ok:
                videos.append(part)
                content.append({"type": "video"})
            else:
                raise ValueError("this transformers model takes frames as images, not video (model config video: "
                                 "true needs a processor with a video processor)")
        messages.append({"role": message.role, "content": content})
    return messages, images, videos


def hf_audios(request: ChatRequest) -> list[tuple[Any, int]]:
    """The request's sound as ``(float32 mono samples, sample rate)`` pairs in the order the processor pairs them
    with placeholders: audio parts and videos' own tracks as they appear (qwen-omni-utils' ``process_mm_info``
    order under ``use_audio_in_video``)."""
    from senri.media import wav_samples

    return [wav_samples(audio.wav) for message in request.messages for audio in message.audios()]


def model_class(transformers: Any, config: Mapping[str, Any]) -> Any:
    """The transformers class a model config loads: ``model_class`` (a name in ``transformers``, e.g.
    ``Qwen2_5OmniThinkerForConditionalGeneration`` for M3-Agent's memorizer, which no Auto class maps) or
    ``AutoModelForImageTextToText``."""
    name = str(config.get("model_class") or "AutoModelForImageTextToText")
    cls = getattr(transformers, name, None)
    if cls is None:
        raise BackendError(f"model config model_class: transformers {transformers.__version__} has no {name!r}")
    return cls


class TransformersBackend(Backend):
    kind = "transformers"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if not config.get("path"):
            raise BackendError("model config path: the transformers backend needs a local model folder")
        import torch
        import transformers
        from transformers import AutoProcessor

        self.torch = torch
        device = str(config.get("device", "auto"))
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        dtype_name = str(config.get("dtype", "auto"))
        dtype = "auto" if dtype_name == "auto" else getattr(torch, dtype_name)
        path = str(Path(config["path"]).expanduser())
        started = time.perf_counter()
        try:
            self.processor = AutoProcessor.from_pretrained(path)
            self.model = model_class(transformers, config).from_pretrained(path, dtype=dtype)
        except OSError as exc:
            raise BackendError(f"model config path: cannot load a model from {path!r}: {exc}") from exc
        self.model.to(self.device).eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        log.info("transformers loaded %s on %s in %.1f s", config["path"], self.device, time.perf_counter() - started)

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return Capabilities(images=True, video=bool(config.get("video")), audio=bool(config.get("audio")),
                            json_schema=False, logprobs=True)

    @property
    def capabilities(self) -> Capabilities:
        """The declared ones, less video where the loaded processor has no video processor."""
        declared = self.declared_capabilities(self.config)
        video = declared.video and getattr(self.processor, "video_processor", None) is not None
        return replace(declared, video=video)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": str(self.config["path"]), "revision": self.config.get("revision"),
                "dtype": str(self.config.get("dtype", "auto")), **chat_template_kwargs(self.config),
                **({"model_class": str(self.config["model_class"])} if self.config.get("model_class") else {}),
                **({"video": True} if self.capabilities.video else {})}

    def count_tokens(self, request: ChatRequest) -> int:
        """The prompt's tokens by the model's own chat template and tokenizer (the text exactly; images and
        videos by the model config's allowance, :meth:`Backend.media_tokens`: their real count is the
        processor's and needs the pixels)."""
        messages, _, _ = hf_messages(text_only(request))
        prompt = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                                    **chat_template_kwargs(self.config))
        return len(self.tokenizer.encode(prompt, add_special_tokens=False)) + self.media_tokens(request)

    def _letter_token_ids(self, letters: tuple[str, ...]) -> dict[str, list[int]]:
        """Token ids that spell each letter alone (with or without a leading space)."""
        ids: dict[str, list[int]] = {}
        for letter in letters:
            candidates = set()
            for spelling in (letter, " " + letter):
                encoded = self.tokenizer.encode(spelling, add_special_tokens=False)
                if len(encoded) == 1:
                    candidates.add(encoded[0])
            ids[letter] = sorted(candidates)
        return ids

    def complete(self, request: ChatRequest) -> ChatResponse:
        torch = self.torch
        started = time.perf_counter()
        messages, images, videos = hf_messages(request, self.capabilities.video, self.capabilities.audio)
        prompt = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                                    **chat_template_kwargs(self.config))
        inputs = self.processor(text=[prompt], images=images or None, return_tensors="pt",
                                **media_kwargs(request, videos)).to(self.device)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        sample = request.temperature > 0
        if sample:
            torch.manual_seed(request.seed)
        with torch.inference_mode():
            output = self.model.generate(
                **inputs,
                max_new_tokens=request.max_tokens,
                do_sample=sample,
                temperature=request.temperature if sample else None,
                top_p=request.top_p if sample else None,
                output_scores=bool(request.letter_logprobs),
                # generate has no frequency penalty; a request's repetition_penalty is its own control.
                **({"repetition_penalty": float(request.repetition_penalty)}
                   if request.repetition_penalty is not None else {}),
                **({"stop_strings": list(request.stop), "tokenizer": self.tokenizer} if request.stop else {}),
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new_tokens = output.sequences[0, prompt_tokens:]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        stopped = False
        matched = None
        if request.stop:  # generate keeps the matched stop string; the OpenAI API's stop excludes it
            text, matched = stop_match(text, request.stop)
            stopped = matched is not None
        letter_logprobs = None
        if request.letter_logprobs:
            logprobs = torch.log_softmax(output.scores[0][0].float(), dim=-1)
            letter_logprobs = {
                letter: (max(float(logprobs[i]) for i in token_ids) if token_ids else -1e9)
                for letter, token_ids in self._letter_token_ids(request.letter_logprobs).items()
            }
        return ChatResponse(text=text, prompt_tokens=prompt_tokens, completion_tokens=int(new_tokens.shape[0]),
                            latency_s=time.perf_counter() - started, letter_logprobs=letter_logprobs,
                            finish_reason=FINISH_STOP if stopped else finish_reason(
                                new_tokens.tolist(), request.max_tokens, self.tokenizer.eos_token_id,
                                self.model.generation_config), stop_reason=matched or "")

    def close(self) -> None:
        del self.model
