"""Sizing a request against the model's limits *before* it is sent.

A request past a model's context window or image limit is rejected by the engine, and the call's work is
lost (a VideoLucy answer over a coarse memory of long VLM captions, an updater pool of 268 images). Methods
ask :func:`overflow` first and, when a request does not fit, leave out what their documented trimming rule
says (recording the trim on the call); they never let the engine find out.

The limits come from the model config: ``n_ctx`` (llama.cpp), ``max_model_len`` (vLLM) or ``context_tokens``
(any backend, e.g. a hosted API), and ``max_images`` (images and videos per request). A model config that
states none has no limit here. Prompt tokens are counted by the backend's own tokenizer where it has one
(:meth:`senri.backends.base.Backend.count_tokens`) and estimated otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: Keys that state a model's context window, in the order they are looked up.
CONTEXT_KEYS = ("context_tokens", "max_model_len", "n_ctx")


@dataclass(frozen=True)
class RequestLimits:
    """A model's per-request limits; None means the config states none."""

    context_tokens: int | None = None
    max_images: int | None = None


def request_limits(model_config: Mapping[str, Any]) -> RequestLimits:
    context = next((int(model_config[key]) for key in CONTEXT_KEYS if model_config.get(key)), None)
    images = model_config.get("max_images")
    return RequestLimits(context, int(images) if images else None)


def within_cap(limit: int, model_config: Mapping[str, Any] | None) -> int:
    """A completion limit bounded by the model config's ``max_tokens_cap`` (a small model with a short context
    cannot use thousands of tokens and would only ramble until the limit); ``limit`` where the config states no
    cap or there is no config."""
    cap = model_config.get("max_tokens_cap") if isinstance(model_config, Mapping) else None
    return min(int(limit), int(cap)) if cap else int(limit)


def overflow(backend: Any, request: Any) -> str | None:
    """Why ``request`` would exceed ``backend``'s limits (prompt tokens plus its ``max_tokens`` against the
    context window; images and videos against ``max_images``), or None when it fits."""
    limits = request_limits(backend.config)
    images = request.n_images()
    if limits.max_images is not None and images > limits.max_images:
        return f"{images} images/videos > max_images {limits.max_images}"
    if limits.context_tokens is not None:
        needed = backend.count_tokens(request) + int(request.max_tokens)
        if needed > limits.context_tokens:
            return f"{needed} tokens (prompt + max_tokens {request.max_tokens}) > context {limits.context_tokens}"
    return None
