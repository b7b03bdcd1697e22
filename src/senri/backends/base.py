"""The one interface every model backend implements, and the request/response records methods use.

Methods build :class:`ChatRequest` objects and hand them to a backend; they never see HTTP, engines or
tokenizers. Every backend returns a :class:`ChatResponse` with the same bookkeeping (text, token usage,
latency, letter log-probabilities where asked for, ``error`` instead of an exception), so a method behaves
the same against a vLLM cluster, a hosted API, a local transformers model or the embedded llama.cpp model.

Requests are plain data with a canonical serialisation (:meth:`ChatRequest.cache_payload`) in which every
image or video is replaced by the sha256 of its bytes: that is what the response cache keys on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping, Sequence

#: Sampling parameters every backend understands; anything else in a model config is backend-specific.
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class ImagePart:
    """One image (JPEG bytes, as the frame store holds them), with an optional timestamp for the prompt."""

    jpeg: bytes
    time_s: float | None = None

    def digest(self) -> str:
        return hashlib.sha256(self.jpeg).hexdigest()

    def label(self) -> str | None:
        """The text shown just before the image ("[t=12.0s]") when it has a timestamp."""
        return None if self.time_s is None else f"[t={self.time_s:.1f}s]"

    def data_url(self) -> str:
        return "data:image/jpeg;base64," + base64.b64encode(self.jpeg).decode("ascii")


#: Where a video's frames sit for the model: at their source times (the clip or video they were sampled
#: from), or at their carrier offsets k / fps (a timeline of its own, e.g. the verifier's citation offsets).
TIMELINES = ("source", "carrier")


@dataclass(frozen=True)
class AudioPart:
    """A sound clip as a WAV file (16-bit PCM; :func:`senri.media.clip_wav` cuts them at 16 kHz from a video), for
    backends whose models hear (Qwen2.5-Omni's thinker, OpenAI's audio models): OpenAI-compatible servers get it
    as an ``input_audio`` part, transformers' omni processors as ``audio``, vLLM as ``multi_modal_data["audio"]``.
    ``label`` is an optional text shown just before it, as an image's timestamp is."""

    wav: bytes
    label: str | None = None

    def digest(self) -> str:
        return hashlib.sha256(self.wav).hexdigest()

    def base64(self) -> str:
        return base64.b64encode(self.wav).decode("ascii")

    def duration_s(self) -> float:
        """The clip's length from its WAV header (0.0 for bytes that are no WAV: the backend will refuse them)."""
        from senri.media import wav_info

        try:
            return wav_info(self.wav).duration_s
        except ValueError:
            return 0.0


@dataclass(frozen=True)
class VideoPart:
    """A short MP4 (a carrier video of sampled frames) for backends that take video input.

    ``fps`` is the carrier's own frame rate (frame k at k / fps), ``times_s`` the source time of each of its
    frames, in order (empty: unknown), and ``timeline`` which of the two the model is to place the frames on
    (:data:`TIMELINES`). Backends whose models read video timing (vLLM's Qwen2.5-VL / Qwen3-VL video metadata,
    transformers' ``fps``) pass them on.

    ``audio`` is the video's own sound track over the same span, for omni models that read a video together with
    its audio (Qwen2.5-Omni's ``use_audio_in_video``, which interleaves the two by time): None for a silent video
    or a model that only sees. It is part of the cache key only when present."""

    mp4: bytes
    fps: float
    times_s: tuple[float, ...] = ()
    timeline: str = "source"
    audio: AudioPart | None = None

    def __post_init__(self) -> None:
        if self.timeline not in TIMELINES:
            raise ValueError(f"VideoPart timeline {self.timeline!r}: one of {', '.join(TIMELINES)}")
        if self.fps <= 0:
            raise ValueError(f"VideoPart fps must be > 0, got {self.fps}")

    def digest(self) -> str:
        return hashlib.sha256(self.mp4).hexdigest()

    def data_url(self) -> str:
        return "data:video/mp4;base64," + base64.b64encode(self.mp4).decode("ascii")


@dataclass(frozen=True)
class FramesPart:
    """Exact decoded frames of one video, in time order, for models whose own processor takes a frame list
    with its metadata (the direct specialists, R5 of shared/spec/direct_specialists.md): never re-encoded
    into a carrier video. ``frames`` are encoded images (``fmt`` ``png``: lossless; ``jpeg``: the exact bytes
    a release's own JPEG step produced), ``rate`` the frame rate the model is told, ``indices`` the source
    frame indices and ``times_s`` their source times (empty: unknown), ``timeline`` as for :class:`VideoPart`.
    Backends that do not take it (every one but ``release_worker``) never receive it: methods send it only to
    a model config of that backend."""

    frames: tuple[bytes, ...]
    rate: float
    indices: tuple[int, ...] = ()
    times_s: tuple[float, ...] = ()
    fmt: str = "png"
    timeline: str = "source"
    #: The decoded source frames' width and height before any resize of senri's (Cambrian-S unpads its grid by
    #: them, C-I4), and the processing options the model's side needs with these frames, as canonical JSON
    #: (VideoChat3's pixel keys and placeholder metadata, the LFP memory's preset); "" for none.
    source_wh: tuple[int, int] | None = None
    options: str = ""

    def __post_init__(self) -> None:
        if self.fmt not in ("png", "jpeg"):
            raise ValueError(f"FramesPart fmt {self.fmt!r}: png or jpeg")
        if self.timeline not in TIMELINES:
            raise ValueError(f"FramesPart timeline {self.timeline!r}: one of {', '.join(TIMELINES)}")
        if self.indices and len(self.indices) != len(self.frames):
            raise ValueError(f"FramesPart: {len(self.frames)} frames but {len(self.indices)} indices")

    def frame_digests(self) -> list[str]:
        return list(self._digests)

    def digest(self) -> str:
        return hashlib.sha256("".join(self._digests).encode()).hexdigest()

    @cached_property
    def _digests(self) -> tuple[str, ...]:
        """Computed once: a video's frames go with each of its questions (thousands of frames for the LFP stream)."""
        return tuple(hashlib.sha256(frame).hexdigest() for frame in self.frames)


Part = str | ImagePart | VideoPart | FramesPart | AudioPart


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: tuple[Part, ...]

    @classmethod
    def text(cls, role: str, text: str) -> "Message":
        return cls(role, (text,))

    def plain_text(self) -> str:
        return "".join(part for part in self.content if isinstance(part, str))

    def images(self) -> list[ImagePart]:
        return [part for part in self.content if isinstance(part, ImagePart)]

    def videos(self) -> list[VideoPart]:
        return [part for part in self.content if isinstance(part, VideoPart)]

    def audios(self) -> list[AudioPart]:
        """The message's sound: its audio parts and its videos' own tracks, in the order they appear."""
        out: list[AudioPart] = []
        for part in self.content:
            if isinstance(part, AudioPart):
                out.append(part)
            elif isinstance(part, VideoPart) and part.audio is not None:
                out.append(part.audio)
        return out


@dataclass(frozen=True)
class ChatRequest:
    """One chat call. ``json_schema`` asks for structured output; ``letter_logprobs`` asks for the
    log-probabilities of the first generated token being each of these strings (answer-letter scoring)."""

    messages: tuple[Message, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    json_schema: Mapping[str, Any] | None = None
    letter_logprobs: tuple[str, ...] = ()
    #: Free-form label for logs and traces (e.g. "blind", "verify:2"); not part of the cache key.
    purpose: str = ""
    #: Function tools in the OpenAI form (``{"type": "function", "function": {name, description, parameters}}``)
    #: and ``tool_choice`` ("required" | "auto" | "none"), for backends whose capabilities say ``tools``.
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str | None = None
    #: Repetition controls (None: the backend's default, none applied): ``repetition_penalty`` multiplies down
    #: tokens already present (vLLM, transformers, llama.cpp's ``repeat_penalty``), ``frequency_penalty`` subtracts
    #: per occurrence (the OpenAI API's). A captioner's retry of a looping caption sets them from its model config.
    repetition_penalty: float | None = None
    frequency_penalty: float | None = None
    #: Stop strings (the OpenAI API's ``stop``): generation ends where the first of them would begin, and the
    #: text returned excludes it. Video-o3 stops every turn on its closing tags (O-D1).
    stop: tuple[str, ...] = ()
    #: Top-k sampling (None: the backend's default); VideoChat3's release samples with top-k 20 (V-D1).
    top_k: int | None = None

    def cache_payload(self) -> dict[str, Any]:
        """Everything that decides the response, with media replaced by content hashes.

        The seed only matters when sampling: greedy requests with different seeds share one cache entry.
        """
        def part(p: Part) -> Any:
            if isinstance(p, str):
                return p
            if isinstance(p, FramesPart):
                return {"frames": p.digest(), "rate": round(float(p.rate), 9), "indices": list(p.indices),
                        "times_s": [round(float(t), 6) for t in p.times_s], "fmt": p.fmt, "timeline": p.timeline,
                        "source_wh": list(p.source_wh) if p.source_wh else None, "options": p.options}
            if isinstance(p, AudioPart):
                return {"audio": p.digest(), **({"label": p.label} if p.label else {})}
            kind = "image" if isinstance(p, ImagePart) else "video"
            extra = {"time_s": p.time_s} if isinstance(p, ImagePart) else {"fps": p.fps}
            if isinstance(p, VideoPart) and p.times_s:  # only when given: a video without them keeps its key
                extra.update(times_s=[round(float(t), 6) for t in p.times_s], timeline=p.timeline)
            if isinstance(p, VideoPart) and p.audio is not None:  # only when present: silent videos keep their key
                extra["audio"] = p.audio.digest()
            return {kind: p.digest(), **extra}

        return {
            "messages": [{"role": m.role, "content": [part(p) for p in m.content]} for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed if self.temperature > 0 else None,
            "json_schema": self.json_schema,
            "letter_logprobs": list(self.letter_logprobs),
            # Only when set, so every tool-less request keeps the cache key it had before tools existed.
            **({"tools": [dict(t) for t in self.tools], "tool_choice": self.tool_choice} if self.tools else {}),
            # Only when set, so every request without them keeps its cache key.
            **{name: value for name in ("repetition_penalty", "frequency_penalty")
               if (value := getattr(self, name)) is not None},
            **({"stop": list(self.stop)} if self.stop else {}),
            **({"top_k": self.top_k} if self.top_k is not None else {}),
        }

    def n_images(self) -> int:
        """Images, videos and frame lists: a request with any is a vision-language call."""
        return sum(len(m.images()) + len(m.videos()) + sum(isinstance(p, FramesPart) for p in m.content)
                   for m in self.messages)


#: ``finish_reason`` values: the model ended its reply, or it was cut at ``max_tokens``.
FINISH_STOP, FINISH_LENGTH = "stop", "length"


@dataclass
class ChatResponse:
    """A backend's answer to one request; ``error`` is set (and ``text`` empty) when the call failed for good.
    ``finish_reason`` is why generation ended, as the engine says it (``stop``; ``length``: cut at
    ``max_tokens``, the text is incomplete); None where the engine did not say (or a cached response from
    before it was recorded)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    letter_logprobs: dict[str, float] | None = None
    error: str | None = None
    cached: bool = False
    attempts: int = 1
    #: The function calls a tool-calling reply made, each ``{"name": str, "arguments": str}`` (the arguments as
    #: the model wrote them, JSON text not yet parsed); None when the request offered no tools.
    tool_calls: list[dict[str, str]] | None = None
    finish_reason: str | None = None
    #: Attempts of this request that ran out of time (``timeout_s``), a later successful one included: the
    #: ``timeouts`` run-health count, booked where the timeout happened (an HTTP client's deadline). In-process
    #: engines have no per-request deadline, so theirs stays 0.
    timed_out_attempts: int = 0
    #: Which of the request's stop strings ended the reply (removed from ``text``, as the OpenAI API removes
    #: it); "" where the backend knows none did (the model's own end or the token limit); None where the
    #: backend does not say. Video-o3 reads it: the release keeps the closing tag its stop criterion fired on,
    #: and a reply that ended by itself with an unclosed ``<grounding>`` is its answer as it stands.
    stop_reason: str | None = None
    #: The server sent ``content: null`` (``text`` is then ""): LongVideo-R1's release raises on such a reply
    #: where it pops and nudges an empty one.
    content_null: bool = False

    @property
    def truncated(self) -> bool:
        return self.finish_reason == FINISH_LENGTH

    def to_json(self) -> str:
        return json.dumps({
            "text": self.text, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "latency_s": self.latency_s, "letter_logprobs": self.letter_logprobs, "attempts": self.attempts,
            **({"tool_calls": self.tool_calls} if self.tool_calls is not None else {}),
            "finish_reason": self.finish_reason,
            **({"timed_out_attempts": self.timed_out_attempts} if self.timed_out_attempts else {}),
            **({"stop_reason": self.stop_reason} if self.stop_reason is not None else {}),
            **({"content_null": True} if self.content_null else {}),
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ChatResponse":
        data = json.loads(text)
        return cls(cached=True, **data)


@dataclass(frozen=True)
class Capabilities:
    """What a backend accepts; methods adapt (images vs carrier video, JSON vs free text, logprob scoring)."""

    images: bool = False
    video: bool = False
    json_schema: bool = False
    logprobs: bool = False
    #: OpenAI-compatible function calling (``ChatRequest.tools`` in, ``ChatResponse.tool_calls`` out).
    tools: bool = False
    #: The backend applies a request's JSON schema only after the model's thinking (vLLM's reasoning parser
    #: with structured output): a model config marked ``reasoning: true`` then thinks first under a schema.
    #: Without it, such a model's structured calls go out unconstrained (see :func:`schema_for`).
    schema_after_reasoning: bool = False
    #: Sound input: :class:`AudioPart` parts and a :class:`VideoPart`'s own ``audio`` (model config ``audio: true``,
    #: an omni model). A request with sound to a backend without it is refused before it is sent.
    audio: bool = False


_WORD = re.compile(r"[^\W\d_]+")
_DIGIT = re.compile(r"\d")
_LOOSE_SPACE = re.compile(r"\s(?![^\W\d_])")


def estimate_text_tokens(text: str) -> int:
    """An upper estimate of ``text``'s tokens for the BPE tokenizers of the models senri runs, without one.

    A length rule (characters / 3) undercounts what memories are made of: numbers, periods and symbols
    (measured on SmolLM2's and Qwen2.5's tokenizers: "[0, 30] [30, 60] …" 840 characters, 796 tokens, and a
    perception caption 2.05 characters per token). Those tokenizers split digits one by one and keep a space
    before a digit or a symbol apart, so this counts a token per 4 letters of each word (rounded up), per
    digit, per UTF-8 byte of every other visible character, and per space that does not start a word.
    Measured ratio estimate / exact on five kinds of text (prose, perception captions, prompts, memory lists,
    numbers): 1.05–1.41, never below 1."""
    letters = sum(-(-len(word) // 4) for word in _WORD.findall(text))
    digits = len(_DIGIT.findall(text))
    other = sum(len(c.encode("utf-8")) for c in text if not c.isalnum() and not c.isspace())
    return letters + digits + other + len(_LOOSE_SPACE.findall(text))


def is_reasoning(config: Mapping[str, Any]) -> bool:
    """Whether a model config marks its model as a reasoning model (``reasoning: true``, e.g. DeepSeek-R1):
    it writes its thinking before the reply."""
    return bool(config.get("reasoning", False))


def reasoning_parser(config: Mapping[str, Any]) -> str | None:
    """The reasoning parser a reasoning model's backend runs (``reasoning_parser``, or vLLM's
    ``engine_args.reasoning_parser``): with one, a JSON schema constrains only what follows the thinking
    (``Capabilities.schema_after_reasoning``). None for a model not marked ``reasoning: true``."""
    parser = config.get("reasoning_parser") or (config.get("engine_args") or {}).get("reasoning_parser")
    return str(parser) if is_reasoning(config) and parser else None


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first of the ``stop`` strings (excluded), and whether one occurred: engines that keep
    the matched stop string (transformers' ``stop_strings``) or a script's canned reply are cut the way the
    OpenAI API cuts them."""
    cut, matched = stop_match(text, stop)
    return cut, matched is not None


def stop_match(text: str, stop: Sequence[str]) -> tuple[str, str | None]:
    """``text`` up to the first of the ``stop`` strings (excluded), and that stop string (None: none occurs)."""
    found = [(i, s) for s in stop if s for i in [text.find(s)] if i >= 0]
    if not found:
        return text, None
    at, matched = min(found, key=lambda hit: hit[0])
    return text[:at], matched


def text_only(request: ChatRequest) -> ChatRequest:
    """``request`` with its images and videos left out: what a tokenizer counts exactly (the media are
    counted by :meth:`Backend.media_tokens`)."""
    messages = tuple(Message(m.role, tuple(p for p in m.content if isinstance(p, str))) for m in request.messages)
    return replace(request, messages=messages)


#: Audio tokens per second of sound where a backend cannot count them (Qwen2.5-Omni's audio encoder: one token per
#: 40 ms, so ≈750 for a 30-s clip, shared/spec/omni_memory.md M-C12).
AUDIO_TOKENS_PER_S = 25


class BackendError(RuntimeError):
    """A call failed in a way retrying will not fix (bad config, model missing); raised at construction."""


class EngineUnavailable(RuntimeError):
    """The model's engine is gone (a served batch's server died or stopped answering): no answer can be had
    now, and none may be recorded as wrong. The answer job stops without writing its predictions; the
    batch restarts the server and the rerun resumes from the response cache."""


#: The exit status of a stage command stopped by :class:`EngineUnavailable` (EX_TEMPFAIL): the served batch
#: runs that answer again on a new server.
ENGINE_UNAVAILABLE = 75


class Backend:
    """Base class. Subclasses implement :meth:`complete`, or :meth:`complete_many` when batching pays.

    ``identity`` names the model precisely enough for the cache key (e.g. the GGUF's sha256, a served model
    name); two backends with equal identity and equal requests must give interchangeable answers.
    """

    kind: ClassVar[str] = "base"

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        """What a model config of this backend says it accepts, without loading the model: what the plan-time
        check (:func:`senri.config.capability_problems`) holds every run to before any job starts."""
        return Capabilities()

    @property
    def capabilities(self) -> Capabilities:
        return self.declared_capabilities(self.config)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.config.get("model")}

    def complete(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def count_tokens(self, request: ChatRequest) -> int:
        """The prompt tokens ``request`` will take (:mod:`senri.backends.budget` sizes requests with it).

        This default estimates, erring high so a request it passes fits (:func:`estimate_text_tokens` per
        message, 8 tokens of chat template per message and 32 per request, plus :meth:`media_tokens`).
        Backends with a tokenizer override it.
        """
        text = sum(estimate_text_tokens(m.plain_text()) for m in request.messages)
        return text + 8 * len(request.messages) + 32 + self.media_tokens(request)

    def media_tokens(self, request: ChatRequest) -> int:
        """The allowance for ``request``'s images and videos: ``image_tokens`` (model config, default 1,280)
        per image, ``video_tokens`` (default 16,384) per video, ``audio_tokens_per_s`` (default
        :data:`AUDIO_TOKENS_PER_S`) per second of sound (audio parts and videos' own tracks). A backend that counts text with its tokenizer
        adds this for the media, whose tokens only the engine's processor knows."""
        images = sum(len(m.images()) for m in request.messages)
        videos = sum(len(m.videos()) for m in request.messages)
        sound_s = sum(a.duration_s() for m in request.messages for a in m.audios())
        return (images * int(self.config.get("image_tokens", 1280))
                + videos * int(self.config.get("video_tokens", 16384))
                + int(round(sound_s * float(self.config.get("audio_tokens_per_s", AUDIO_TOKENS_PER_S)))))

    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[int, ChatResponse], None] | None = None) -> list[ChatResponse]:
        """Answer several independent requests; ``on_done(i, response)`` fires as each one finishes.

        The default runs them one after another; backends that batch or run requests concurrently override
        it, and still call ``on_done`` per response so the cache stores each one the moment it exists.
        """
        responses = []
        for i, request in enumerate(requests):
            responses.append(self.complete(request))
            if on_done is not None:
                on_done(i, responses[-1])
        return responses

    def close(self) -> None:
        """Release the model or connection pool; called once when the job ends."""


def request_schema(backend: Backend | None, schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema a structured request carries on ``backend``, or None for free generation.

    A backend that cannot constrain output gets none. A reasoning model (model config ``reasoning: true``,
    e.g. the paper's DeepSeek-R1) constrained from its first token cannot think before its JSON, so it gets
    the schema only where the backend applies it after the thinking (``schema_after_reasoning``: vLLM's
    reasoning parser with structured output); elsewhere it generates freely and the reply goes through the
    project's JSON reader, the caller's validator and one repair turn, like any unconstrained backend."""
    if backend is None or not backend.capabilities.json_schema:
        return None
    if is_reasoning(backend.config) and not backend.capabilities.schema_after_reasoning:
        return None
    return schema
