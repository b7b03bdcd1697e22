"""A model config answered by the served batch's server instead of an engine in this process.

A served answer batch (:mod:`senri.serving`) starts a model's server once and runs every answer of the batch
against it. Each of those answers runs the model config it would run in process — only the transport
differs — so a served call must be the same call: :class:`ServedBackend` takes its cache identity, its
capabilities, its request body and its token counting from the model config's own backend module (the
functions the in-process engine uses), and only the wire is the ``openai`` backend's. A replay from a
response cache therefore gives byte-identical predictions in either mode.

Which model configs go to a server is process state set by the answer job (:func:`serving_through`):
:func:`senri.backends.open_backend` asks :func:`endpoint_for` for every model config it opens, so the run's
model, a memory method's re-captioner and a method's tool model that are the same model config all reach the
one server. A server that stops answering raises :class:`~senri.backends.base.EngineUnavailable` (model
config ``transport_failure: raise``): its calls are never recorded as wrong answers.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import httpx

from senri.backends.base import BackendError, Capabilities, ChatRequest, EngineUnavailable, text_only
from senri.backends.openai import OpenAIBackend, bearer_headers
from senri.backends.openai_format import chat_body, chat_messages, chat_template_kwargs

log = logging.getLogger(__name__)

#: The environment variable that carries a batch's per-job API key to its server and its answer jobs.
SERVER_KEY_ENV = "SENRI_SERVER_KEY"

#: Engines a batch can serve, each by the module holding its ``model_identity``, ``model_capabilities`` and
#: ``server_command`` (the in-process backend's own module).
SERVABLE = {"llamacpp": "senri.backends.llamacpp", "vllm": "senri.backends.vllm"}


def engine_module(model_config: Mapping[str, Any]):
    kind = model_config.get("backend")
    if kind not in SERVABLE:
        raise BackendError(f"model config backend: {kind!r} cannot be served by a batch (servable: "
                           f"{', '.join(SERVABLE)}); leave the model out of serving.models")
    return importlib.import_module(SERVABLE[kind])


def same_model(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two model configs name the same model when they are equal apart from the name they are selected by."""
    def canonical(config: Mapping[str, Any]) -> str:
        return json.dumps({k: v for k, v in config.items() if k != "name"}, sort_keys=True, default=str)
    return canonical(a) == canonical(b)


@dataclass(frozen=True)
class Endpoint:
    """A running server of one model config: its address (``http://127.0.0.1:PORT``), the config, and the
    environment variable holding the key it wants."""

    url: str
    model_config: Mapping[str, Any] = field(hash=False)
    key_env: str = SERVER_KEY_ENV


_ENDPOINTS: list[Endpoint] = []

#: A served call's deadline per attempt: answers of a batch queue at one server, so a long wait is a busy
#: server, not a dead one (a dead one refuses the connection at once).
SERVED_TIMEOUT_S = 3600.0
#: Attempts after the first before a transport failure raises (backoff 0.5 s doubling, at most 5 s).
SERVED_RETRIES = 3


@contextlib.contextmanager
def serving_through(endpoint: Endpoint | None) -> Iterator[None]:
    """Inside the block, every backend opened for ``endpoint``'s model config talks to its server."""
    if endpoint is None:
        yield
        return
    engine_module(endpoint.model_config)  # refuse what cannot be served before anything runs
    _ENDPOINTS.append(endpoint)
    try:
        yield
    finally:
        _ENDPOINTS.remove(endpoint)


def endpoint_for(model_config: Mapping[str, Any]) -> Endpoint | None:
    return next((e for e in reversed(_ENDPOINTS) if same_model(e.model_config, model_config)), None)


class ServedBackend(OpenAIBackend):
    """The model config's own backend, over HTTP: same identity, capabilities, bodies and token counts."""

    def __init__(self, model_config: Mapping[str, Any], endpoint: Endpoint) -> None:
        self.engine = engine_module(model_config)
        name = str(model_config.get("name") or endpoint.model_config.get("name") or "served")
        connection = {
            "base_url": endpoint.url.rstrip("/") + "/v1",
            "model": name,
            "api_key_env": endpoint.key_env,
            "timeout_s": SERVED_TIMEOUT_S,
            "max_retries": SERVED_RETRIES,
            "backoff_base_s": 0.5,
            "backoff_cap_s": 5.0,
            "concurrency": int(model_config.get("concurrency", 8)),
            "transport_failure": "raise",
        }
        super().__init__(connection)
        self.kind = str(model_config["backend"])  # type: ignore[misc]
        self.config = dict(model_config)  # what methods size requests by (n_ctx, max_images, image_tokens …)
        self._identity = self.engine.model_identity(self.config)
        self.health_url = endpoint.url.rstrip("/") + "/health"  # a 5xx from a server still up: the request's own
        self.template_kwargs = chat_template_kwargs(self.config)

    @property
    def capabilities(self) -> Capabilities:
        return self.engine.model_capabilities(self.config)

    @property
    def identity(self) -> dict[str, Any]:
        return self._identity

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        if self.kind == "llamacpp":
            return self.engine.request_body(self.config, request)
        from senri.backends.vllm_video import carrier_data_url

        extra = {"chat_template_kwargs": self.template_kwargs} if self.template_kwargs else {}
        # a carrier goes with its rate and source times, for the server's senri loader (backends/vllm_video.py)
        return chat_body(request, self.model, video_ok=self.capabilities.video, extra=extra,
                         video_url=carrier_data_url, audio_ok=self.capabilities.audio)

    def count_tokens(self, request: ChatRequest) -> int:
        """llama.cpp in process counts by the estimate, so its served twin does too; vLLM in process counts
        with the engine's tokenizer and chat template, so its served twin asks the server's ``/tokenize``."""
        if self.kind != "vllm":
            return super().count_tokens(request)
        body = {"model": self.model, "messages": chat_messages(text_only(request)), "add_generation_prompt": True,
                **({"chat_template_kwargs": self.template_kwargs} if self.template_kwargs else {})}
        try:
            response = httpx.post(self.base_url.removesuffix("/v1") + "/tokenize", json=body,
                                  headers=bearer_headers(self), timeout=60)
            response.raise_for_status()
            return int(response.json()["count"]) + self.media_tokens(request)
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"{self.base_url}: /tokenize: {type(exc).__name__}: {exc}") from exc
        except (httpx.HTTPStatusError, KeyError, ValueError) as exc:
            log.warning("the server could not count a prompt (%s); using the estimate", exc)
            return super().count_tokens(request)
