"""``vllm`` backend: an in-process vLLM engine for batched GPU runs.

Import-guarded: vLLM is only installed where a GPU exists (``pip install -e '.[gpu]'``); elsewhere choosing
this backend fails at job start with a message saying so. :meth:`complete_many` hands the whole batch to
``LLM.chat`` so the engine schedules all requests together (continuous batching); messages use the same
OpenAI-format translation as the ``openai`` backend, which ``LLM.chat`` accepts as-is. With ``video: true``
a carrier goes in as one ``video_url`` (the model's native video interface), all its frames kept
(``video_frames``, default 512); ``thinking: false`` is passed as the template's ``enable_thinking=False``.
A reasoning model (``reasoning: true``, ``reasoning_parser: deepseek_r1``) gets vLLM's reasoning parser, so a
JSON schema constrains only what follows its thinking. Prompt tokens are counted with the engine's tokenizer.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping, Sequence

from senri.backends.base import (Backend, BackendError, Capabilities, ChatRequest, ChatResponse,
                                 reasoning_parser, text_only)
from senri.backends.openai_format import TOP_LOGPROBS, chat_messages, chat_template_kwargs, letter_scores

log = logging.getLogger(__name__)


def reasoning_engine_args(config: Mapping[str, Any]) -> dict[str, Any]:
    """Engine arguments for a reasoning model (model config ``reasoning: true`` with ``reasoning_parser``,
    e.g. ``deepseek_r1``): vLLM's reasoning parser finds where the thinking ends, and a request's structured
    output then constrains only the final answer (the thinking runs free). A reasoning model without a
    parser gets none: its structured calls go out unconstrained (:func:`senri.methods.structured.request_schema`)."""
    parser = reasoning_parser(config)
    return {"reasoning_parser": parser} if parser else {}


class VLLMBackend(Backend):
    kind = "vllm"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        try:
            import vllm
        except ImportError as exc:
            raise BackendError("the vllm backend needs vLLM and a GPU: pip install -e '.[gpu]' on a GPU node "
                               f"({exc})") from exc
        if not config.get("model"):
            raise BackendError("model config model: the vllm backend needs a model folder or name")
        self.vllm = vllm
        started = time.perf_counter()
        engine_args = dict(config.get("engine_args") or {})
        if config.get("video"):
            # vLLM's video loader keeps 32 frames of a video by default; a carrier must pass whole (the paper's
            # native video interface takes up to 512 sampled frames).
            media = dict(engine_args.pop("media_io_kwargs", None) or {})
            media["video"] = {"num_frames": int(config.get("video_frames", 512)), **(media.get("video") or {})}
            engine_args["media_io_kwargs"] = media
        engine_args.update(reasoning_engine_args(config))
        self.llm = vllm.LLM(
            model=str(config["model"]),
            tensor_parallel_size=int(config.get("gpus", 1)),
            max_model_len=int(config.get("max_model_len", 32768)),
            gpu_memory_utilization=float(config.get("gpu_memory_utilization", 0.9)),
            limit_mm_per_prompt={"image": int(config.get("max_images", 512)), "video": 1},
            seed=int(config.get("engine_seed", 0)),
            **engine_args,
        )
        self.template_kwargs = chat_template_kwargs(config)
        log.info("vLLM loaded %s in %.1f s", config["model"], time.perf_counter() - started)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(images=True, video=bool(self.config.get("video", False)), json_schema=True,
                            logprobs=True, schema_after_reasoning=bool(reasoning_engine_args(self.config)))

    def count_tokens(self, request: ChatRequest) -> int:
        """The prompt's tokens by the engine's own tokenizer and chat template (the text exactly; images and
        videos by the model config's allowance, :meth:`Backend.media_tokens`)."""
        conversation = chat_messages(text_only(request))
        try:
            ids = self.llm.get_tokenizer().apply_chat_template(conversation, tokenize=True,
                                                               add_generation_prompt=True, **self.template_kwargs)
        except Exception as exc:  # noqa: BLE001 — a tokenizer without a usable template: the estimate, which errs high
            log.warning("vLLM tokenizer could not count a prompt (%s); using the estimate", exc)
            return super().count_tokens(request)
        return len(ids) + self.media_tokens(request)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": str(self.config["model"]), "revision": self.config.get("revision"),
                "max_model_len": int(self.config.get("max_model_len", 32768)), **chat_template_kwargs(self.config),
                **({"video_frames": int(self.config.get("video_frames", 512))} if self.config.get("video") else {})}

    def _sampling(self, request: ChatRequest):
        kwargs: dict[str, Any] = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                                  "top_p": request.top_p, "seed": request.seed}
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
        started = time.perf_counter()
        conversations = [chat_messages(r, video_ok=self.capabilities.video) for r in requests]
        try:
            outputs = self.llm.chat(conversations, [self._sampling(r) for r in requests], use_tqdm=False,
                                    chat_template_kwargs=self.template_kwargs or None)
        except Exception as exc:  # noqa: BLE001 — a failed batch is recorded per request
            error = f"vLLM: {type(exc).__name__}: {exc}"
            responses = [ChatResponse(text="", error=error) for _ in requests]
        else:
            latency = (time.perf_counter() - started) / max(1, len(requests))
            responses = [self._response(r, o, latency) for r, o in zip(requests, outputs)]
        for i, response in enumerate(responses):
            if on_done is not None:
                on_done(i, response)
        return responses

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
                            letter_logprobs=letter_logprobs)
