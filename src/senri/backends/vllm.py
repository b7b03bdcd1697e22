"""``vllm`` backend: an in-process vLLM engine for batched GPU runs.

Import-guarded: vLLM is only installed where a GPU exists (``pip install -e '.[gpu]'``); elsewhere choosing
this backend fails at job start with a message saying so. :meth:`complete_many` hands the whole batch to
``LLM.chat`` so the engine schedules all requests together (continuous batching); messages use the same
OpenAI-format translation as the ``openai`` backend, which ``LLM.chat`` accepts as-is. With ``video: true``
a carrier goes in as one ``video_url`` (the model's native video interface), all its frames kept
(``video_frames``, default 512); ``thinking: false`` is passed as the template's ``enable_thinking=False``.
A reasoning model (``reasoning: true``, ``reasoning_parser: deepseek_r1``) gets vLLM's reasoning parser, so a
JSON schema constrains only what follows its thinking. Prompt tokens are counted with the engine's tokenizer.

**Video timing.** ``LLM.chat`` loads a ``video_url`` with engine-wide loader settings only, and the metadata it
derives (the MP4's rate, frames numbered 0…n−1) says nothing of where the frames came from; Qwen2.5-VL takes its
temporal position step from the metadata's rate, Qwen3-VL writes each frame's ``frames_indices / fps`` into the
prompt as its timestamp. So a request holding a video goes through ``LLM.generate`` instead: the prompt rendered
by the model's chat template, the carrier decoded here, and per video the metadata :func:`video_metadata` builds
from the part — the carrier's true rate and its frames placed at their source times (or carrier offsets, where
the part says so) — with ``do_sample_frames`` off, so every frame is kept. Requests without video still go
through ``LLM.chat``. Served (:mod:`senri.backends.served`), the same carrier travels with its times to a
``vllm serve`` that decodes it with senri's loader (:mod:`senri.backends.vllm_video`, :func:`server_env`), so
the server's processor gets the frames and metadata this engine's does.

**One failure is one request's.** If the engine rejects a batch (one over-long prompt, one bad video), each
request of it is run again alone: the others keep their answers and only the failing ones carry ``error``.
``finish_reason`` (``stop`` / ``length``) is read from every completion.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from senri.backends.base import (Backend, BackendError, Capabilities, ChatRequest, ChatResponse, reasoning_parser,
                                 text_only)
from senri.backends.openai_format import TOP_LOGPROBS, chat_messages, chat_template_kwargs, letter_scores
from senri.backends import vllm_video
from senri.backends.vllm_video import carrier_video, video_metadata  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)


def reasoning_engine_args(config: Mapping[str, Any]) -> dict[str, Any]:
    """Engine arguments for a reasoning model (model config ``reasoning: true`` with ``reasoning_parser``,
    e.g. ``deepseek_r1``): vLLM's reasoning parser finds where the thinking ends, and a request's structured
    output then constrains only the final answer (the thinking runs free). A reasoning model without a
    parser gets none: its structured calls go out unconstrained (:func:`senri.methods.structured.request_schema`)."""
    parser = reasoning_parser(config)
    return {"reasoning_parser": parser} if parser else {}


def engine_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's arguments for a model config: what ``vllm.LLM`` gets in process, and (as flags,
    :func:`server_command`) what the served batch's ``vllm serve`` gets, so both run the same engine.

    ``generation_config: vllm``: ``vllm serve`` would otherwise fill every sampling field a request leaves out
    from the model's generation_config.json (Qwen2.5-VL's ``repetition_penalty`` 1.05, ``top_k`` 1), which the
    in-process engine, given explicit sampling parameters, never applies — two answers under one cache key.
    ``engine_args.generation_config`` overrides it for both."""
    engine_args = dict(config.get("engine_args") or {})
    if config.get("video"):
        # vLLM's video loader keeps 32 frames of a video by default; a carrier must pass whole (the paper's
        # native video interface takes up to 512 sampled frames).
        media = dict(engine_args.pop("media_io_kwargs", None) or {})
        media["video"] = {"num_frames": int(config.get("video_frames", 512)), **(media.get("video") or {})}
        engine_args["media_io_kwargs"] = media
    engine_args.update(reasoning_engine_args(config))
    return {"model": str(config["model"]),
            "tensor_parallel_size": int(config.get("gpus", 1)),
            "max_model_len": int(config.get("max_model_len", 32768)),
            "gpu_memory_utilization": float(config.get("gpu_memory_utilization", 0.9)),
            "limit_mm_per_prompt": {"image": int(config.get("max_images", 512)), "video": 1,
                                    # an omni model (audio: true) hears audio parts and videos' own tracks
                                    **({"audio": int(config.get("max_audios", 8))} if config.get("audio") else {})},
            "seed": int(config.get("engine_seed", 0)),
            "generation_config": "vllm",
            **engine_args}


def require_local_weights(config: Mapping[str, Any]) -> None:
    """Nothing is downloaded by a job: ``model`` must be a local folder, or a Hugging Face id whose files are
    already in this node's cache (at ``revision`` when set); otherwise a BackendError names the model id and
    where to put it, before any engine or server starts (vLLM would otherwise fetch it from the hub)."""
    model = str(config.get("model") or "")
    if not model:
        raise BackendError("model config model: the vllm backend needs a model folder or name")
    if Path(model).is_dir():
        return
    if Path(model).is_absolute() or model.startswith((".", "~")) or model.count("/") > 1:
        raise BackendError(f"model config model: {model!r} is not a folder (nothing is downloaded by jobs)")
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(model, "config.json", revision=config.get("revision"),
                                   cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    if not isinstance(found, str):
        raise BackendError(f"model {model!r} is neither a local folder nor in this node's Hugging Face cache; "
                           f"nothing is downloaded by jobs: download it beforehand (huggingface-cli download "
                           f"{model}) or point the model config's model at a folder holding its weights")


def server_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The environment of a ``vllm serve`` of ``config``: offline (the weights must be here already,
    :func:`require_local_weights`), and senri's video loader for a model that takes video."""
    require_local_weights(config)
    return {"HF_HUB_OFFLINE": "1", **vllm_video.server_env(config)}


def chat_template(config: Mapping[str, Any]) -> str | None:
    """The chat template a model config pins (``chat_template``: a Jinja file, relative to the repository or
    absolute; null: the checkpoint's own), read; a missing file is an error naming it. A release whose model was
    trained on another template than the one its checkpoint ships (LongVideo-R1, R-S2/R-S3 of the evidence
    seekers' spec) is served with it, in process and served alike."""
    file = chat_template_path(config)
    if file is None:
        return None
    if not file.is_file():
        raise BackendError(f"model config chat_template: {config['chat_template']} is not a file")
    return file.read_text()


def chat_template_path(config: Mapping[str, Any]) -> Path | None:
    from senri.paths import REPO_ROOT

    path = config.get("chat_template")
    return None if not path else (Path(path) if Path(path).is_absolute() else REPO_ROOT / path)


def server_command(config: Mapping[str, Any], api_key_env: str) -> list[str]:
    """``vllm serve`` with :func:`engine_kwargs` as its flags (a dict as JSON, ``True`` as a bare flag,
    ``False`` as its ``--no-`` form, which vLLM's boolean engine arguments take: ``enable_prefix_caching: false``
    must reach the server, not vanish), on
    ``{host}:{port}``, the model served under its config name. The key travels in ``VLLM_API_KEY`` (the
    batch sets it from ``api_key_env``), never on a command line that ``ps`` shows."""
    kwargs = engine_kwargs(config)
    command = ["vllm", "serve", kwargs.pop("model"), "--host", "{host}", "--port", "{port}",
               "--served-model-name", str(config.get("name") or config["model"])]
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value is False:
            command.append("--no-" + flag[2:])
        elif value is not None:
            command += [flag, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    if chat_template(config) is not None:  # read once here, so a missing file stops the batch before any start
        command += ["--chat-template", str(chat_template_path(config))]
    return command


def model_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The cache identity of a vLLM model config, in process or served (:mod:`senri.backends.served`)."""
    return {"kind": "vllm", "model": str(config["model"]), "revision": config.get("revision"),
            "max_model_len": int(config.get("max_model_len", 32768)), **chat_template_kwargs(config),
            **({"chat_template": hashlib.sha256(template.encode()).hexdigest()[:16]}
               if (template := chat_template(config)) is not None else {}),
            **({"video_frames": int(config.get("video_frames", 512))} if config.get("video") else {})}


def model_capabilities(config: Mapping[str, Any]) -> Capabilities:
    return Capabilities(images=bool(config.get("images", True)), video=bool(config.get("video", False)),
                        audio=bool(config.get("audio", False)), json_schema=True,
                        logprobs=True, schema_after_reasoning=bool(reasoning_engine_args(config)))


class VLLMBackend(Backend):
    kind = "vllm"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        try:
            import vllm
        except ImportError as exc:
            raise BackendError("the vllm backend needs vLLM and a GPU: pip install -e '.[gpu]' on a GPU node "
                               f"({exc})") from exc
        require_local_weights(config)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.vllm = vllm
        started = time.perf_counter()
        self.llm = vllm.LLM(**engine_kwargs(config))
        self.template_kwargs = chat_template_kwargs(config)
        self.chat_template = chat_template(config)
        log.info("vLLM loaded %s in %.1f s", config["model"], time.perf_counter() - started)

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return model_capabilities(config)

    def count_tokens(self, request: ChatRequest) -> int:
        """The prompt's tokens by the engine's own tokenizer and chat template (the text exactly; images and
        videos by the model config's allowance, :meth:`Backend.media_tokens`)."""
        conversation = chat_messages(text_only(request))
        try:
            ids = self.llm.get_tokenizer().apply_chat_template(conversation, tokenize=True,
                                                               add_generation_prompt=True,
                                                               chat_template=self.chat_template,
                                                               **self.template_kwargs)
        except Exception as exc:  # noqa: BLE001 — a tokenizer without a usable template: the estimate, which errs high
            log.warning("vLLM tokenizer could not count a prompt (%s); using the estimate", exc)
            return super().count_tokens(request)
        return len(ids) + self.media_tokens(request)

    @property
    def identity(self) -> dict[str, Any]:
        return model_identity(self.config)

    def _sampling(self, request: ChatRequest):
        kwargs: dict[str, Any] = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                                  "top_p": request.top_p, "seed": request.seed}
        for name in ("repetition_penalty", "frequency_penalty"):
            if getattr(request, name) is not None:
                kwargs[name] = float(getattr(request, name))
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.letter_logprobs:
            kwargs["logprobs"] = TOP_LOGPROBS
        if request.json_schema is not None:
            try:  # vLLM ≥ 0.11
                from vllm.sampling_params import StructuredOutputsParams
                kwargs["structured_outputs"] = StructuredOutputsParams(json=dict(request.json_schema))
            except ImportError:
                from vllm.sampling_params import GuidedDecodingParams
                kwargs["guided_decoding"] = GuidedDecodingParams(json=dict(request.json_schema))
        return self.vllm.SamplingParams(**kwargs)

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.complete_many([request])[0]

    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[int, ChatResponse], None] | None = None) -> list[ChatResponse]:
        responses: list[ChatResponse | None] = [None] * len(requests)
        with_video = [i for i, r in enumerate(requests) if any(m.videos() for m in r.messages)]
        plain = [i for i in range(len(requests)) if i not in set(with_video)]
        for indices, run in ((plain, self._run_chat), (with_video, self._run_generate)):
            if not indices:
                continue
            batch = self._batch([requests[i] for i in indices], run)
            for i, response in zip(indices, batch):
                responses[i] = response
        done = [r for r in responses if r is not None]
        for i, response in enumerate(done):
            if on_done is not None:
                on_done(i, response)
        return done

    def _batch(self, requests: list[ChatRequest], run) -> list[ChatResponse]:
        """``run`` over the batch; if the engine raises, each request alone, so one bad request fails alone."""
        started = time.perf_counter()
        try:
            outputs = run(requests)
        except Exception as exc:  # noqa: BLE001 — retried one by one below
            if len(requests) == 1:
                return [ChatResponse(text="", error=f"vLLM: {type(exc).__name__}: {exc}",
                                     latency_s=time.perf_counter() - started)]
            log.warning("vLLM rejected a batch of %d (%s: %s); running its requests one by one", len(requests),
                        type(exc).__name__, exc)
            return [self._batch([r], run)[0] for r in requests]
        latency = (time.perf_counter() - started) / max(1, len(requests))
        return [self._response(r, o, latency) for r, o in zip(requests, outputs)]

    def _run_chat(self, requests: list[ChatRequest]):
        conversations = [chat_messages(r, video_ok=self.capabilities.video, audio_ok=self.capabilities.audio)
                         for r in requests]
        return self.llm.chat(conversations, [self._sampling(r) for r in requests], use_tqdm=False,
                             chat_template=self.chat_template, chat_template_kwargs=self.template_kwargs or None)

    def _run_generate(self, requests: list[ChatRequest]):
        if not self.capabilities.video:
            raise ValueError("this vLLM model config takes no video input (model config video: true)")
        prompts = [generate_prompt(r, self.llm.get_tokenizer(), self.template_kwargs, self.chat_template,
                                   audio_ok=self.capabilities.audio) for r in requests]
        return self.llm.generate(prompts, [self._sampling(r) for r in requests], use_tqdm=False)

    @staticmethod
    def _response(request: ChatRequest, output, latency_s: float) -> ChatResponse:
        completion = output.outputs[0]
        letter_logprobs = None
        if request.letter_logprobs:
            first = (completion.logprobs or [{}])[0].values()
            letter_logprobs = letter_scores(((str(c.decoded_token or ""), c.logprob) for c in first),
                                            request.letter_logprobs)
        return ChatResponse(text=completion.text, prompt_tokens=len(output.prompt_token_ids or []),
                            completion_tokens=len(completion.token_ids), latency_s=latency_s,
                            letter_logprobs=letter_logprobs,
                            finish_reason=str(completion.finish_reason) if completion.finish_reason else None,
                            stop_reason=stop if isinstance(stop := getattr(completion, "stop_reason", None), str) else "")


def generate_prompt(request: ChatRequest, tokenizer: Any, template_kwargs: Mapping[str, Any],
                    template: str | None = None, audio_ok: bool = False) -> dict[str, Any]:
    """The ``LLM.generate`` input for a request holding video: the chat template's text over the typed-content
    messages transformers' processors take (``image`` / ``video`` / ``audio`` placeholders where the parts were, a
    timestamped image after its label) and the decoded media, each video as
    :func:`~senri.backends.vllm_video.carrier_video` decodes it. Sound (audio parts and videos' own tracks, in
    order) goes in as ``(samples, 16000)`` pairs; a video with its own track sets the omni processor's
    ``use_audio_in_video`` (vLLM's Qwen2.5-Omni thinker, shared/spec/omni_memory.md U-6)."""
    from senri.backends.openai_format import uses_audio_in_video
    from senri.backends.transformers import hf_audios, hf_messages

    messages, images, parts = hf_messages(request, video_ok=True, audio_ok=audio_ok)
    videos = [carrier_video(part) for part in parts]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, chat_template=template,
                                         **template_kwargs)
    data: dict[str, Any] = {"video": videos}
    if images:
        data["image"] = images
    audios = hf_audios(request)
    if audios:
        data["audio"] = audios
    prompt: dict[str, Any] = {"prompt": text, "multi_modal_data": data}
    if uses_audio_in_video(request):
        prompt["mm_processor_kwargs"] = {"use_audio_in_video": True}
    return prompt
