"""``openai`` backend: any OpenAI-compatible chat server (vLLM's server, llama.cpp's server, hosted APIs).

Requests run concurrently (``concurrency`` at a time) on one async connection pool. Each attempt has a
total deadline of ``timeout_s`` covering connect, waiting and reading (a server trickling a byte at a time
cannot hold a call past it), and is retried with exponential backoff and full jitter on the failures that
retrying fixes — 429, 5xx, timeouts, refused or dropped connections — up to ``max_retries`` times. A
server's ``Retry-After`` is obeyed up to ``backoff_cap_s`` (a non-finite or larger value waits the cap). A
request that still fails, or whose 200 body is malformed, comes back with ``error`` set and the run goes
on. Only a failure that is the request's own — a status retrying does not fix (400, 404, 422 …) or a
malformed reply — is remembered and not sent again by this backend (a batch fallback that re-asks gets the
recorded failure); a transport failure (timeouts, refused or dropped connections, 5xx after every retry)
says nothing about the request, so the next ask sends it again. With ``transport_failure: raise`` (the
served batch's clients, :mod:`senri.backends.served`) such a failure raises
:class:`~senri.backends.base.EngineUnavailable` instead: a dead server is the engine's failure, never a
wrong answer — except a 5xx that every attempt got from a server whose ``health_url`` still answers 200, which
is the request's own failure (recorded: one request the server cannot serve must not stop its batch). The API key is read from the environment variable named by ``api_key_env``; it and
any ``Authorization``/``api-key`` text a server echoes are scrubbed (:mod:`senri.secrets`) from every
error, response text and log line.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import httpx

from senri.backends.base import (Backend, BackendError, Capabilities, ChatRequest, ChatResponse, EngineUnavailable,
                                 reasoning_parser)
from senri.backends.openai_format import chat_body, openai_reasoning, parse_chat_response, thinking_body
from senri.secrets import register as register_secret
from senri.secrets import scrub

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
RETRY_EXCEPTIONS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def backoff_delay(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base·2^attempt)] (attempt counts from 0)."""
    return rng.uniform(0.0, min(cap_s, base_s * (2 ** attempt)))


def retry_after_s(response: httpx.Response, cap_s: float) -> float | None:
    """The server's ``Retry-After`` in seconds, at most ``cap_s``; a non-finite value means the cap.

    (An HTTP-date or unreadable value is ignored: the backoff schedule applies.)"""
    value = response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None:
        return None
    if not math.isfinite(seconds):
        return cap_s
    return min(max(0.0, seconds), cap_s)


def status_failure(response: httpx.Response, attempt: int, base_s: float, cap_s: float,
                   rng: random.Random) -> tuple[str, float | None]:
    """A non-200 reply's error text and the delay before the next attempt (the server's ``Retry-After`` up to
    ``cap_s``, else the backoff), or None as the delay when the status is one retrying will not fix. The body
    is scrubbed before it is cut: a key split at the cut would escape the scrubber."""
    error = f"HTTP {response.status_code}: {scrub(response.text)[:300]}"
    if response.status_code not in RETRY_STATUS:
        return error, None
    delay = retry_after_s(response, cap_s)
    return error, backoff_delay(attempt, base_s, cap_s, rng) if delay is None else delay


def endpoint_settings(client: Any, config: Mapping[str, Any], what: str) -> None:
    """Set an OpenAI-compatible client's connection settings from its model config, one set of keys for the
    chat backend and the transcription client: ``base_url``, ``model``, ``timeout_s``, ``max_retries``,
    ``backoff_base_s``, ``backoff_cap_s`` and the key read from ``api_key_env`` (registered for scrubbing)."""
    if not config.get("base_url"):
        raise BackendError(f"model config: {what} needs base_url (e.g. http://host:8000/v1)")
    if not config.get("model"):
        raise BackendError(f"model config: {what} needs model (the served model's name)")
    client.base_url = str(config["base_url"]).rstrip("/")
    client.model = str(config["model"])
    client.timeout_s = float(config.get("timeout_s", 300))
    client.max_retries = int(config.get("max_retries", 5))
    client.backoff_base_s = float(config.get("backoff_base_s", 1.0))
    client.backoff_cap_s = float(config.get("backoff_cap_s", 60.0))
    key_env = config.get("api_key_env")
    client._api_key = os.environ.get(key_env) if key_env else None
    if key_env and not client._api_key:
        raise BackendError(f"model config: api_key_env names {key_env!r}, which is not set in the environment")
    register_secret(client._api_key)
    client._rng = random.Random(0)


def bearer_headers(client: Any) -> dict[str, str]:
    """The ``Authorization`` header of a client set up by :func:`endpoint_settings` (none without a key)."""
    return {"Authorization": f"Bearer {client._api_key}"} if client._api_key else {}


@dataclass
class Retried:
    """What :func:`post_with_retries` ended with: the 200 response (None when every attempt failed or a status
    retrying does not fix came back), the last failure's text, the attempts made and how many of them timed out."""

    response: httpx.Response | None
    error: str
    attempts: int
    timed_out: int


def post_with_retries(client: Any, post: Callable[[], httpx.Response]) -> Retried:
    """``post()`` (one synchronous request) retried as the chat backend retries, with ``client``'s settings
    (:func:`endpoint_settings`): timeouts, refused or dropped connections and 429/5xx again after full-jitter
    backoff (a ``Retry-After`` obeyed up to the cap), up to ``max_retries`` times; any other status stops at once.
    The clients of the other endpoints (transcription, embeddings) read the 200 body themselves."""
    last_error, timed_out, attempt = "no attempt made", 0, 0
    for attempt in range(client.max_retries + 1):
        delay: float | None
        try:
            response = post()
        except RETRY_EXCEPTIONS as exc:
            timed_out += isinstance(exc, httpx.TimeoutException)
            last_error = f"{type(exc).__name__}: {exc}"
            delay = backoff_delay(attempt, client.backoff_base_s, client.backoff_cap_s, client._rng)
        else:
            if response.status_code == 200:
                return Retried(response, "", attempt + 1, timed_out)
            last_error, delay = status_failure(response, attempt, client.backoff_base_s, client.backoff_cap_s,
                                               client._rng)
            if delay is None:
                break
        if attempt < client.max_retries:
            time.sleep(delay)
    return Retried(None, scrub(last_error), attempt + 1, timed_out)


class OpenAIBackend(Backend):
    kind = "openai"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        endpoint_settings(self, config, "the openai backend")
        self.concurrency = int(config.get("concurrency", 8))
        # The model config's thinking switch travels as chat_template_kwargs; an explicit extra_body wins.
        self.extra_body = {**thinking_body(config), **dict(config.get("extra_body") or {})}
        # Requests that failed for a reason of their own in this process, by cache key: never sent twice.
        self._failed: dict[str, ChatResponse] = {}
        mode = str(config.get("transport_failure", "record"))
        if mode not in ("record", "raise"):
            raise BackendError(f"model config transport_failure: {mode!r} is not one of record, raise")
        self.raise_on_transport = mode == "raise"
        #: Where the server says it is up (a served batch's server: ``/health``); None: not known. With
        #: ``transport_failure: raise``, a 5xx that every retry got again from a server that is still up is the
        #: request's own failure (recorded), not a dead server.
        self.health_url: str | None = None

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return Capabilities(
            images=bool(config.get("images", True)),
            video=bool(config.get("video", False)),
            audio=bool(config.get("audio", False)),
            json_schema=bool(config.get("json_schema", True)),
            # OpenAI's reasoning (o-series) models return no log-probabilities.
            logprobs=bool(config.get("logprobs", not openai_reasoning(config))),
            tools=bool(config.get("tools", True)),
            # A server started with a reasoning parser (vllm serve --reasoning-parser) applies the schema after
            # the thinking; the model config says so with reasoning: true and reasoning_parser.
            schema_after_reasoning=reasoning_parser(config) is not None,
        )

    @property
    def identity(self) -> dict[str, Any]:
        # The base URL is left out on purpose: the same model behind another host gives the same answers.
        return {"kind": self.kind, "model": self.model, "extra_body": self.extra_body}


    async def _attempt(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        """One POST, its body read in full, under one deadline for connect, wait and read together."""
        return await asyncio.wait_for(
            client.post(f"{self.base_url}/chat/completions", json=body, headers=bearer_headers(self)), self.timeout_s)

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        return chat_body(request, self.model, video_ok=self.capabilities.video, extra=self.extra_body,
                         reasoning_api=openai_reasoning(self.config), audio_ok=self.capabilities.audio)

    async def _one(self, client: httpx.AsyncClient, semaphore: asyncio.Semaphore,
                   request: ChatRequest) -> tuple[ChatResponse, bool]:
        """The response, and whether its failure (if any) is the request's own (worth remembering)."""
        body = self.request_body(request)
        started = time.perf_counter()
        last_error = "no attempt made"
        timed_out = 0
        last_status: int | None = None
        for attempt in range(self.max_retries + 1):
            delay: float | None = None
            async with semaphore:
                try:
                    response = await self._attempt(client, body)
                except asyncio.TimeoutError:
                    timed_out += 1
                    last_error = f"timed out: no complete response within timeout_s={self.timeout_s:g} s"
                    delay = backoff_delay(attempt, self.backoff_base_s, self.backoff_cap_s, self._rng)
                except RETRY_EXCEPTIONS as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                    delay = backoff_delay(attempt, self.backoff_base_s, self.backoff_cap_s, self._rng)
                else:
                    if response.status_code == 200:
                        try:
                            payload = response.json()
                        except ValueError:
                            last_error = f"HTTP 200 with a body that is not JSON: {scrub(response.text)[:200]!r}"
                            delay = backoff_delay(attempt, self.backoff_base_s, self.backoff_cap_s, self._rng)
                        else:
                            # A malformed body is this call's error (parse_chat_response never raises on it).
                            parsed = parse_chat_response(payload, request, time.perf_counter() - started,
                                                         attempts=attempt + 1)
                            parsed.timed_out_attempts = timed_out
                            return self._scrubbed(parsed), True
                    else:
                        last_status = response.status_code
                        last_error, delay = status_failure(response, attempt, self.backoff_base_s,
                                                           self.backoff_cap_s, self._rng)
                        if delay is None:
                            return self._failure(last_error, started, attempt, timed_out), True
            if attempt < self.max_retries and delay is not None:
                log.warning("%s: attempt %d failed (%s); retrying in %.2f s", request.purpose or "request",
                            attempt + 1, scrub(last_error), delay)
                await asyncio.sleep(delay)
        if self.raise_on_transport:
            if last_status is not None and await self._server_up(client):
                # The server answered every attempt with an error status and still says it is up: the failure
                # is this request's own (one bad request must not stop a batch as if its server had died).
                return self._failure(f"{last_error} (every attempt; the server is up)", started, attempt,
                                     timed_out), True
            raise EngineUnavailable(f"{self.base_url}: {request.purpose or 'request'} failed after "
                                    f"{self.max_retries + 1} attempt(s): {scrub(last_error)}")
        return self._failure(last_error, started, attempt, timed_out), False

    async def _server_up(self, client: httpx.AsyncClient) -> bool:
        """Whether :attr:`health_url` answers 200 now (False where there is none or it does not)."""
        if not self.health_url:
            return False
        try:
            response = await client.get(self.health_url, headers=bearer_headers(self), timeout=10.0)
        except (httpx.HTTPError, OSError):
            return False
        return response.status_code == 200

    def _failure(self, error: str, started: float, attempt: int, timed_out: int = 0) -> ChatResponse:
        return self._scrubbed(ChatResponse(text="", latency_s=time.perf_counter() - started, error=error,
                                           attempts=attempt + 1, timed_out_attempts=timed_out))

    @staticmethod
    def _scrubbed(response: ChatResponse) -> ChatResponse:
        """The response with the key and any echoed auth header removed from its text and error."""
        response.text = scrub(response.text) or ""
        response.error = scrub(response.error)
        return response

    async def _many(self, requests: Sequence[ChatRequest],
                    on_done: Callable[[int, ChatResponse, bool], None]) -> list[ChatResponse]:
        semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits) as client:
            async def indexed(i: int, request: ChatRequest) -> ChatResponse:
                try:
                    response, own = await self._one(client, semaphore, request)
                except EngineUnavailable:
                    raise  # the server's failure, not this request's: the job stops, the batch restarts it
                except Exception as exc:  # noqa: BLE001 - one request's surprise is its own error, never the batch's
                    log.exception("%s: unexpected failure", request.purpose or "request")
                    response, own = self._scrubbed(ChatResponse(text="", error=f"{type(exc).__name__}: {exc}")), True
                on_done(i, response, own)
                return response

            return list(await asyncio.gather(*(indexed(i, r) for i, r in enumerate(requests))))

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.complete_many([request])[0]

    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[int, ChatResponse], None] | None = None) -> list[ChatResponse]:
        from senri.backends.cache import request_key

        keys = [request_key(self.identity, r) for r in requests]
        results: list[ChatResponse | None] = [self._failed.get(k) for k in keys]
        for i, known in enumerate(results):
            if known is not None:
                log.info("%s: failed before (%s); not sent again", requests[i].purpose or "request", known.error)
                if on_done is not None:
                    on_done(i, known)
        todo = [i for i, r in enumerate(results) if r is None]

        def done(j: int, response: ChatResponse, own: bool) -> None:
            i = todo[j]
            if response.error is not None and own:
                self._failed[keys[i]] = response
            results[i] = response
            if on_done is not None:
                on_done(i, response)

        if todo:
            asyncio.run(self._many([requests[i] for i in todo], done))
        return [r for r in results if r is not None]
