"""The OpenAI chat-completions wire format, shared by every backend that speaks it.

The ``openai`` backend sends these bodies over HTTP, the ``llamacpp`` backend hands the same dicts to
llama.cpp's in-process server, and ``vllm``'s ``LLM.chat`` takes the same message list: one translation,
one response parser, so all three account tokens and letter log-probabilities identically.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Iterable, Mapping

from senri.backends.base import AudioPart, ChatRequest, ChatResponse, ImagePart, VideoPart

#: How many alternatives per position to ask for when scoring answer letters (llama.cpp and vLLM allow 20).
TOP_LOGPROBS = 20


#: How a video part goes on the wire: its MP4 as a data URL unless a backend says otherwise (a served vLLM model
#: sends senri carriers, :func:`senri.backends.vllm_video.carrier_data_url`).
VideoURL = Callable[[VideoPart], str]


def audio_content(part: AudioPart) -> dict[str, Any]:
    """An audio part on the wire: OpenAI's ``input_audio`` (base64 WAV), which vLLM's server also takes."""
    return {"type": "input_audio", "input_audio": {"data": part.base64(), "format": "wav"}}


def message_content(parts, video_ok: bool, video_url: VideoURL | None = None,
                    audio_ok: bool = False) -> str | list[dict[str, Any]]:
    """A message's content: a plain string for text-only messages, else typed parts in order. A video with its own
    sound track is its ``video_url`` followed by that track as ``input_audio`` (what vLLM's omni models read with
    ``use_audio_in_video``, :func:`uses_audio_in_video`)."""
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            content.append({"type": "text", "text": part})
        elif isinstance(part, ImagePart):
            if part.label():
                content.append({"type": "text", "text": part.label()})
            content.append({"type": "image_url", "image_url": {"url": part.data_url()}})
        elif isinstance(part, VideoPart):
            if not video_ok:
                raise ValueError("this backend does not take video input; send frames as images")
            url = video_url(part) if video_url is not None else part.data_url()
            content.append({"type": "video_url", "video_url": {"url": url}})
            if part.audio is not None:
                if not audio_ok:
                    raise ValueError("this backend does not take audio input (model config audio: true, an omni "
                                     "model); send the video without its sound track")
                content.append(audio_content(part.audio))
        elif isinstance(part, AudioPart):
            if not audio_ok:
                raise ValueError("this backend does not take audio input (model config audio: true, an omni model)")
            if part.label:
                content.append({"type": "text", "text": part.label})
            content.append(audio_content(part))
    return content


def uses_audio_in_video(request: ChatRequest) -> bool:
    """Whether a request sends a video together with its own sound (Qwen2.5-Omni's ``use_audio_in_video``)."""
    return any(v.audio is not None for m in request.messages for v in m.videos())


def chat_messages(request: ChatRequest, video_ok: bool = False,
                  video_url: VideoURL | None = None, audio_ok: bool = False) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": message_content(m.content, video_ok, video_url, audio_ok)}
            for m in request.messages]


#: OpenAI's reasoning models by name (o1, o3, o3-mini, o4-mini, …; gpt-5 and its dated/sized variants, not
#: gpt-5-chat): they take ``max_completion_tokens`` and refuse ``max_tokens`` and non-default sampling.
_REASONING_MODEL = re.compile(r"^(?:[\w.-]+/)?(?:o\d+(?:-[\w.-]+)?|gpt-5(?!-chat)(?:[\w.-]*)?)$", re.IGNORECASE)


def openai_reasoning(config: Mapping[str, Any]) -> bool:
    """Whether an ``openai`` model config's model is one of OpenAI's reasoning (o-series) models: the model
    config's ``openai_reasoning`` (true / false), or when it is unset or null, the model name (o1, o3,
    o4-mini, gpt-5, ...)."""
    flag = config.get("openai_reasoning")
    if flag is not None:
        return bool(flag)
    return bool(_REASONING_MODEL.match(str(config.get("model") or "")))


def chat_body(request: ChatRequest, model: str | None, video_ok: bool = False,
              extra: Mapping[str, Any] | None = None, reasoning_api: bool = False,
              video_url: VideoURL | None = None, audio_ok: bool = False) -> dict[str, Any]:
    """The JSON body of ``POST /v1/chat/completions`` for ``request``. ``reasoning_api``: the body an OpenAI
    reasoning (o-series) model takes — ``max_completion_tokens`` for ``max_tokens``, no ``temperature`` or
    ``top_p`` (only their default is accepted) and no penalties or log-probabilities. A video sent with its own
    sound adds vLLM's ``mm_processor_kwargs: {use_audio_in_video: true}`` (an omni model's server)."""
    body: dict[str, Any] = {
        "messages": chat_messages(request, video_ok, video_url, audio_ok),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "seed": request.seed,
    }
    if reasoning_api:
        body = {"messages": body["messages"], "max_completion_tokens": request.max_tokens, "seed": request.seed}
    if model:
        body["model"] = model
    if request.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": dict(request.json_schema), "strict": True},
        }
    if request.tools:
        body["tools"] = [dict(t) for t in request.tools]
        body["tool_choice"] = request.tool_choice or "auto"
    if request.letter_logprobs and not reasoning_api:
        body["logprobs"] = True
        body["top_logprobs"] = TOP_LOGPROBS
    if not reasoning_api:
        body.update(repetition_fields(request))
    if request.stop:
        body["stop"] = list(request.stop)
    if uses_audio_in_video(request):
        body["mm_processor_kwargs"] = {"use_audio_in_video": True}
    body.update(extra or {})
    return body


def repetition_fields(request: ChatRequest) -> dict[str, float]:
    """The request's repetition controls under the names OpenAI-format servers take: ``frequency_penalty`` (the
    API's own), ``repetition_penalty`` (vLLM's server and llama.cpp's take it as an extra field)."""
    fields = {"frequency_penalty": request.frequency_penalty, "repetition_penalty": request.repetition_penalty}
    return {k: float(v) for k, v in fields.items() if v is not None}


def chat_template_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """Chat-template switches a model config asks for: ``thinking: false`` becomes ``enable_thinking=False``
    (Qwen3-style reasoning models then answer without a think block); ``thinking`` unset or null leaves the
    template's default. vLLM and transformers take these as ``chat_template_kwargs``; servers that speak this
    format take them in the request body under the same name."""
    thinking = config.get("thinking")
    return {} if thinking is None else {"enable_thinking": bool(thinking)}


def thinking_body(config: Mapping[str, Any]) -> dict[str, Any]:
    """The request-body fields that carry :func:`chat_template_kwargs` (empty when there is none)."""
    kwargs = chat_template_kwargs(config)
    return {"chat_template_kwargs": kwargs} if kwargs else {}


def letter_scores(candidates: Iterable[tuple[str, float]], letters: tuple[str, ...]) -> dict[str, float]:
    """Log-probability of each letter among first-token ``(token, logprob)`` candidates.

    Tokenizers spell a letter several ways ("B", " B"): each letter takes the most probable token that
    reads as exactly that letter once spaces are stripped. A letter outside the candidates gets -1e9 (its
    probability is below every listed one; JSON has no -inf).
    """
    scores = {letter: -math.inf for letter in letters}
    for token, logprob in candidates:
        token = token.strip()
        if token in scores:
            scores[token] = max(scores[token], float(logprob))
    return {k: (v if math.isfinite(v) else -1e9) for k, v in scores.items()}


def first_token_letter_logprobs(choice: Mapping[str, Any], letters: tuple[str, ...]) -> dict[str, float]:
    """:func:`letter_scores` over a chat choice's first ``top_logprobs`` entry."""
    content = ((choice.get("logprobs") or {}).get("content")) or []
    top = content[0].get("top_logprobs") or [] if content else []
    return letter_scores(((str(c.get("token", "")), float(c["logprob"])) for c in top), letters)


def parse_chat_response(body: Mapping[str, Any], request: ChatRequest, latency_s: float,
                        attempts: int = 1) -> ChatResponse:
    """Turn a chat-completions response body into a :class:`ChatResponse`.

    Never raises on what a server sent: a body of the wrong shape (``choices: "nope"``, a non-numeric token
    count, a non-text ``content``) is this call's ``error``, so one bad response never aborts a batch.
    """
    def failed(reason: str) -> ChatResponse:
        return ChatResponse(text="", latency_s=latency_s, attempts=attempts,
                            error=f"malformed response body ({reason}): {str(body)[:300]}")

    try:
        choices = body.get("choices") or []
        if not choices:
            return ChatResponse(text="", latency_s=latency_s, attempts=attempts,
                                error=f"response has no choices: {str(body)[:300]}")
        if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
            return failed("choices is not a list of objects")
        choice = choices[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        if not isinstance(text, str):
            return failed("message content is not text")
        # Reasoning models behind vLLM / llama.cpp servers return their thinking in a field of its own; it is
        # handed on in the one form every parser strips (senri.answers.split_reasoning) and traces keep.
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning.strip():
            text = f"<think>{reasoning}</think>{text}"
        usage = body.get("usage") or {}
        calls = message.get("tool_calls")
        tool_calls = None if not request.tools else [
            {"name": str(call["function"]["name"]), "arguments": _arguments_text(call["function"].get("arguments"))}
            for call in (calls or [])]
        return ChatResponse(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency_s,
            letter_logprobs=(first_token_letter_logprobs(choice, request.letter_logprobs)
                             if request.letter_logprobs else None),
            attempts=attempts,
            tool_calls=tool_calls,
            finish_reason=str(choice["finish_reason"]) if choice.get("finish_reason") else None,
            # vLLM's server names the stop string that ended the reply (null: its own end or the limit)
            stop_reason=(choice["stop_reason"] if isinstance(choice.get("stop_reason"), str)
                         else "" if "stop_reason" in choice else None),
            content_null=message.get("content") is None,
        )
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        return failed(f"{type(exc).__name__}: {exc}")


def _arguments_text(arguments: Any) -> str:
    """A tool call's arguments as JSON text: servers send a string, a few send the parsed object."""
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
