"""Model backends, found by name through :data:`BACKENDS` (the model config's ``backend`` key).

Adding a backend is one module implementing :class:`senri.backends.base.Backend` plus one
``BACKENDS.register`` line here and its keys in the config schema. ``server`` runs a model server inside
the job that needs it; ``served`` sends a model config's calls to the server of a served answer batch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from senri.registry import Registry

log = logging.getLogger(__name__)

BACKENDS = Registry("backend")
BACKENDS.register("openai", "senri.backends.openai:OpenAIBackend")
BACKENDS.register("llamacpp", "senri.backends.llamacpp:LlamaCppBackend")
BACKENDS.register("transformers", "senri.backends.transformers:TransformersBackend")
BACKENDS.register("vllm", "senri.backends.vllm:VLLMBackend")
BACKENDS.register("scripted", "senri.backends.scripted:ScriptedBackend")
BACKENDS.register("release_worker", "senri.backends.worker:ReleaseWorkerBackend")

#: The model slot of model-free methods: no backend at all.
NO_BACKEND = "none"


def declared_capabilities(model_config: Mapping[str, Any]):
    """What a model config accepts by its backend's rule (:meth:`Backend.declared_capabilities`), without
    loading the model; None for the model-free slot."""
    kind = model_config.get("backend", NO_BACKEND)
    if kind == NO_BACKEND:
        return None
    return BACKENDS.load(kind).declared_capabilities(model_config)


def open_backend(model_config: Mapping[str, Any], cache_path: str | Path | None):
    """The configured backend, wrapped in the durable response cache when ``cache_path`` is given."""
    from senri.backends.cache import CachedBackend, ResponseCache

    from senri.backends.served import ServedBackend, endpoint_for

    kind = model_config.get("backend", NO_BACKEND)
    if kind == NO_BACKEND:
        return None
    endpoint = endpoint_for(model_config)  # a served batch's answer: the batch's server runs this model
    backend = ServedBackend(model_config, endpoint) if endpoint else BACKENDS.load(kind)(model_config)
    if cache_path is None:
        return backend
    cache = ResponseCache(cache_path)
    log.info("response cache %s holds %d response(s)", cache_path, len(cache))
    return CachedBackend(backend, cache)
