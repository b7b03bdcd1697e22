"""Text embeddings over the OpenAI-compatible embeddings API (``POST {base_url}/embeddings``).

M3-Agent embeds every memory text and every query variant with OpenAI's text-embedding-3-large (3,072-d; spec
M-V5, M-C14, M-R4); a text embedder is a role of its memory system, named by a model config like any other
(``config/model/text_embedding_3_large.yaml``). The model config is an ordinary ``backend: openai`` one —
``base_url``, ``model``, ``api_key_env``, ``timeout_s``, ``max_retries``, ``backoff_base_s``, ``backoff_cap_s``,
the keys and the retry rule of the chat backend (429/5xx, timeouts and dropped connections retried with
full-jitter backoff; a server's ``Retry-After`` obeyed up to the cap; :mod:`senri.backends.openai`) — plus:

* ``dimensions``: sent as the API's ``dimensions`` (text-embedding-3 models shorten their vectors server-side);
  null: the model's own width. Every returned vector must have it (a server that ignores the field is an error,
  not a silent change of space);
* ``batch_size``: texts per request (the API takes at most 2,048 inputs a call).

The key is read from the environment variable ``api_key_env`` names, never from the config, and is scrubbed
(:mod:`senri.secrets`) from every error. Any server with the endpoint serves: OpenAI, vLLM with an embedding
model, llama.cpp's server started with ``--embeddings`` (the tests: the packaged all-MiniLM-L6-v2 as GGUF).

Vectors are kept per text in the job's response cache (the SQLite file the chat calls use), keyed by the
client's identity (model, dimensions) and the text, so a restarted build re-embeds nothing it finished. Each
call is counted (:class:`EmbeddingTally`). A failure that survives the retries raises :class:`EmbeddingError`
naming the model and the cause: without its vectors a memory cannot be built or searched, and a run without an
endpoint must say so rather than fall back to another embedder silently.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx
import numpy as np

from senri.backends.base import BackendError
from senri.backends.openai import bearer_headers, endpoint_settings, post_with_retries
from senri.secrets import scrub

#: The API's limit on inputs per request.
MAX_BATCH = 2048


class EmbeddingError(BackendError):
    """An embedding call that failed after its retries, or a reply that is not the embeddings the call asked for."""


@dataclass
class EmbeddingTally:
    """What one client did: requests sent (and attempts that timed out), texts embedded by the server, texts read
    from the response cache, the server's token count and the seconds the requests took."""

    calls: int = 0
    texts: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    timed_out_attempts: int = 0
    latency_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "texts": self.texts, "cached": self.cached, "prompt_tokens": self.prompt_tokens,
                "timed_out_attempts": self.timed_out_attempts, "latency_s": round(self.latency_s, 6)}


def parse_embeddings(payload: Any, n: int, dimensions: int | None) -> tuple[list[list[float]], int]:
    """An embeddings reply → ``n`` vectors in input order (by each item's ``index``) and its prompt tokens;
    :class:`EmbeddingError` naming the field otherwise (never a silent short or reordered list)."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("data"), list):
        raise EmbeddingError(f"embeddings reply: field 'data' missing or not a list: {str(payload)[:200]!r}")
    vectors: dict[int, list[float]] = {}
    for k, item in enumerate(payload["data"]):
        if not isinstance(item, Mapping):
            raise EmbeddingError(f"embeddings reply: data[{k}] is not an object")
        index = item.get("index", k)
        vector = item.get("embedding")
        if not isinstance(index, int) or not 0 <= index < n or index in vectors:
            raise EmbeddingError(f"embeddings reply: data[{k}].index {index!r} is not a new index below {n}")
        if not isinstance(vector, list) or not vector:
            raise EmbeddingError(f"embeddings reply: data[{k}].embedding is not a list of numbers "
                                 f"(encoding_format float was asked)")
        try:
            values = [float(v) for v in vector]
        except (TypeError, ValueError):
            raise EmbeddingError(f"embeddings reply: data[{k}].embedding holds a non-number") from None
        if not all(math.isfinite(v) for v in values):
            raise EmbeddingError(f"embeddings reply: data[{k}].embedding holds a non-finite number")
        vectors[index] = values
    if len(vectors) != n:
        raise EmbeddingError(f"embeddings reply: {len(vectors)} vectors for {n} inputs")
    widths = {len(v) for v in vectors.values()}
    if len(widths) != 1 or (dimensions is not None and widths != {dimensions}):
        raise EmbeddingError(f"embeddings reply: vector width(s) {sorted(widths)}, expected "
                             f"{dimensions if dimensions is not None else 'one width for all'} (field 'dimensions')")
    usage = payload.get("usage") if isinstance(payload.get("usage"), Mapping) else {}
    tokens = usage.get("prompt_tokens", 0)
    return [vectors[i] for i in range(n)], int(tokens) if isinstance(tokens, (int, float)) else 0


class EmbeddingsClient:
    """A client of one embedding model config (``backend: openai``) for the embeddings endpoint."""

    def __init__(self, config: Mapping[str, Any], response_cache: str | Path | None = None) -> None:
        if config.get("backend") != "openai":
            raise BackendError(f"embedding model config: backend must be openai (an OpenAI-compatible /embeddings "
                               f"server), got {config.get('backend')!r}")
        endpoint_settings(self, config, "the text embedder (an OpenAI-compatible /embeddings server)")
        dimensions = config.get("dimensions")
        self.dimensions = int(dimensions) if dimensions is not None else None
        self.batch_size = int(config.get("batch_size", 256))
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise BackendError(f"embedding model config batch_size: {self.batch_size} is not in 1..{MAX_BATCH}")
        self.tally = EmbeddingTally()
        self._client = httpx.Client(timeout=self.timeout_s)
        self._cache = None
        if response_cache is not None:
            from senri.backends.cache import ResponseCache

            self._cache = ResponseCache(response_cache)

    @property
    def identity(self) -> dict[str, Any]:
        """What decides a vector besides its text (the base URL is left out, as the chat backend leaves it)."""
        return {"kind": "openai_embeddings", "model": self.model, "dimensions": self.dimensions}

    @property
    def name(self) -> str:
        return f"{self.model}" + (f"@{self.dimensions}" if self.dimensions else "")

    def close(self) -> None:
        self._client.close()
        if self._cache is not None:
            self._cache.close()

    def _key(self, text: str) -> str:
        canonical = json.dumps({"embedder": self.identity, "input": text}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 vector per text (as the server returned it), cached texts read back, the rest sent in
        batches of ``batch_size``; :class:`EmbeddingError` when a batch cannot be had."""
        texts = [str(t) for t in texts]
        found: dict[str, list[float]] = {}
        if self._cache is not None:
            for text in dict.fromkeys(texts):
                raw = self._cache.get_raw(self._key(text))
                if raw is not None:
                    found[text] = json.loads(raw)
            self.tally.cached += sum(1 for t in texts if t in found)
        todo = [t for t in dict.fromkeys(texts) if t not in found]
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            for text, vector in zip(batch, self._request(batch)):
                found[text] = vector
                if self._cache is not None:
                    self._cache.put_raw(self._key(text), json.dumps(vector), "embedding")
        if not texts:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        return np.asarray([found[t] for t in texts], dtype=np.float32)

    def _request(self, batch: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        headers = bearer_headers(self)
        started = time.perf_counter()
        done = post_with_retries(self, lambda: self._client.post(f"{self.base_url}/embeddings", json=body,
                                                                 headers=headers))
        self.tally.calls += done.attempts
        self.tally.timed_out_attempts += done.timed_out
        self.tally.latency_s += time.perf_counter() - started
        if done.response is None:
            raise EmbeddingError(f"text embedder {self.model} at {self.base_url}: {done.error} "
                                 f"({done.attempts} attempt(s))")
        try:
            payload = done.response.json()
        except ValueError:
            raise EmbeddingError(f"text embedder {self.model}: HTTP 200 with a body that is not JSON: "
                                 f"{scrub(done.response.text)[:200]!r}") from None
        try:
            vectors, tokens = parse_embeddings(payload, len(batch), self.dimensions)
        except EmbeddingError as exc:
            raise EmbeddingError(f"text embedder {self.model}: {exc}") from None
        self.tally.texts += len(batch)
        self.tally.prompt_tokens += tokens
        return vectors
