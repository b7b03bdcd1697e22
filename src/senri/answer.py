"""The answer stage: one (method, model, video) job turns that video's questions into prediction rows.

A question whose method call raises is recorded (``error`` set, ``pred`` null, counted wrong) and the run
goes on: one bad question never costs the other answers of a long run. The one exception is the engine
itself going away (:class:`~senri.backends.base.EngineUnavailable`, a served batch's server that died): that
is no answer at all, so it stops the job before any prediction is written, and the rerun resumes from the
response cache.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import polars as pl
from tqdm import tqdm

from senri.backends import open_backend
from senri.backends.base import EngineUnavailable
from senri.backends.cache import CachedBackend
from senri.backends.served import Endpoint, serving_through
from senri.methods import METHODS
from senri.methods.base import Method, MethodAnswer, RunContext
from senri.records import (BEHAVIOUR_COUNTS, HEALTH_COUNTS, STORE_COUNTS, Prediction, Question, VideoInfo,
                           counted_letters, from_frame, to_frame)

log = logging.getLogger(__name__)


def check_method_declaration(name: str, method_cls: type[Method], method_config: Mapping[str, Any]) -> None:
    """The config's ``uses_model`` / ``uses_memory`` must agree with the class, or runs land under the wrong
    model folder or miss the inputs the workflow gives only to memory methods."""
    for flag in ("uses_model", "uses_memory", "uses_pixels"):
        declared = getattr(method_cls, flag)
        if bool(method_config.get(flag, declared)) != declared:
            raise ValueError(f"method {name!r}: config says {flag}={method_config.get(flag)}, "
                             f"but {method_cls.__name__}.{flag} is {declared}")


def _prediction(question: Question, context: RunContext, result: MethodAnswer | None, error: str | None) -> Prediction:
    return prediction_row(question, context.method_name, context.model_name, memory_label(context), result, error)


def prediction_row(question: Question, method: str, model: str, memory: str, result: MethodAnswer | None,
                   error: str | None) -> Prediction:
    """A question's prediction row from what the method returned (``result``; None when it failed with
    ``error``) under the run's names."""
    # The contract: a prediction is one of the question's own letters (A–F where it has six); any other letter
    # ("E" on a four-option question, "C" on a two-option one) is no prediction, counted wrong.
    pred = result.pred if result is not None and result.pred in question.letters else None
    tally = result.tally if result is not None else None
    error = error or (result.error if result is not None else None)
    return Prediction(
        video_id=question.video_id,
        qid=question.qid,
        task_type=question.task_type,
        method=method,
        model=model,
        pred=pred,
        answer=question.answer,
        correct=pred == question.answer,
        parse_ok=bool(result is not None and result.parse_ok and pred is not None),
        raw_output=None if result is None else result.raw_output,
        n_llm_calls=tally.n_llm_calls if tally else 0,
        n_vlm_calls=tally.n_vlm_calls if tally else 0,
        prompt_tokens=tally.prompt_tokens if tally else 0,
        completion_tokens=tally.completion_tokens if tally else 0,
        # Model time as recorded when each call was made (kept in the response cache), so a run restarted
        # from its cache writes byte-identical rows; the job's wall time is in its benchmark file.
        latency_s=round(tally.latency_s, 6) if tally else 0.0,
        error=error,
        trace=None if result is None else result.trace_json(),
        memory=memory,
        n_caption_calls=tally.caption_calls if tally else 0,
        n_captions_reused=tally.captions_reused if tally else 0,
        caption_prompt_tokens=tally.caption_prompt_tokens if tally else 0,
        caption_completion_tokens=tally.caption_completion_tokens if tally else 0,
        caption_s=round(tally.caption_s, 6) if tally else 0.0,
        **{name: tally.health.get(name, 0) if tally else 0 for name in HEALTH_COUNTS},
        **{name: tally.behaviour.get(name, 0) if tally else 0 for name in BEHAVIOUR_COUNTS},
        **{column: tally.store.get(name, 0) if tally else 0 for name, column in STORE_COUNTS.items()},
    )


def memory_label(context: RunContext) -> str:
    """The ``memory`` column: the memory system and its captioner (``captions/perception``,
    ``worldmm/qwen25vl7b_vllm``: :func:`senri.memory.store.memory_label`), or ``none`` for a method that reads
    no memory — so a run over perception text never passes for one over a VLM's captions, nor a run over
    senri's captions for one over WorldMM's memory."""
    from senri.memory.store import memory_label as label

    if context.memory_config is None:
        return "none"
    return label(context.memory_system, str(context.memory_config["memory"]["captioner"]))


def stage_memory_label(stage_config: Mapping[str, Any]) -> str:
    """The ``memory`` column a run of this stage slice writes, without opening anything (:func:`memory_label`
    of the context the job would build)."""
    from senri.memory.store import memory_label as label, selected_memory_system

    method_cls = METHODS.load(stage_config["method"]["implementation"])
    if not method_cls.uses_memory or not stage_config.get("memory"):
        return "none"
    system, _ = selected_memory_system(stage_config.get("memory_system"))
    return label(system, str(stage_config["memory"]["memory"]["captioner"]))


def failed_job_rows(questions: pl.DataFrame, video_id: str, stage_config: Mapping[str, Any],
                    error: str) -> pl.DataFrame:
    """One error row per question of ``video_id``: what an answer job that failed as a whole (not one question)
    leaves, so it counts wrong and shows in the tables instead of taking other answers down with it."""
    rows = from_frame(questions.filter(pl.col("video_id") == video_id), Question)
    names = (str(stage_config["method"]["name"]), str(stage_config["model"]["name"]), stage_memory_label(stage_config))
    return to_frame([prediction_row(q, *names, None, error) for q in rows], Prediction)


def memory_context(memory: MemoryInputs, video: VideoInfo, stage_config: Mapping[str, Any]) -> dict[str, Any]:
    """The memory part of a memory method's :class:`RunContext`: the caption table and what a captioner
    reads, and the persistent memory the method searches — the stage slice's ``memory_system`` (its name and
    config; absent: ``captions``) and the store folder built or imported for it."""
    from senri.captioners.base import VideoMedia
    from senri.memory.store import CAPTIONS, selected_memory_system

    media = VideoMedia(video.video_id, memory.video, video.fingerprint, video.duration_s, memory.track, memory.ocr,
                       memory.detections)
    name, system = selected_memory_system(stage_config.get("memory_system"))
    if name != CAPTIONS and memory.store is None:
        raise ValueError(f"memory system {name!r}: the answer job needs its store folder (--memory-store)")
    return {"memory": memory.memory, "media": media, "memory_config": stage_config["memory"],
            "caption_cache": memory.caption_cache, "memory_system": name, "memory_system_config": system,
            "memory_store": memory.store}


def _answer_chunk(method: Method, questions: list[Question]) -> list[tuple[MethodAnswer | None, str | None]]:
    """Answer a chunk together (one batch for the backend). If that raises, answer one by one, so the
    exception is recorded against the question that caused it; the calls that had finished are in the
    response cache and are not issued again."""
    if len(questions) > 1:
        try:
            return [(result, None) for result in method.answer_many(questions)]
        except EngineUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 — isolated below, question by question
            log.warning("a batch of %d questions failed (%s); answering them one by one", len(questions), exc)
    return [_answer_one(method, question) for question in questions]


def _answer_one(method: Method, question: Question) -> tuple[MethodAnswer | None, str | None]:
    try:
        return method.answer(question), None
    except EngineUnavailable:
        raise  # no answer was had: the job stops, writing nothing, and is resumed from its cache
    except Exception as exc:  # noqa: BLE001 — recorded per question, counted wrong, shown in the tables
        error = f"{type(exc).__name__}: {exc}"
        log.error("question %s failed: %s\n%s", question.qid, error, traceback.format_exc())
        return None, error


@dataclass(frozen=True)
class MemoryInputs:
    """A memory method's inputs: the memory table, the media a captioner reads, the shared caption cache."""

    memory: Path
    video: Path
    track: Path | None
    ocr: Path | None
    detections: Path | None
    caption_cache: Path
    #: The store folder of a memory system other than ``captions`` (``results/memory_system/<system>/...``).
    store: Path | None = None


def answer_video(questions: pl.DataFrame, video: VideoInfo, stage_config: Mapping[str, Any],
                 frames: str | Path | None = None, carrier: str | Path | None = None,
                 cache: str | Path | None = None, memory: MemoryInputs | None = None,
                 pixels: str | Path | None = None, server: str | None = None,
                 caption_cache: str | Path | None = None) -> pl.DataFrame:
    """Answer every question of ``video`` with the configured method and model; return prediction rows.

    ``caption_cache`` is the shared caption folder of a method that captions on its own (``caches_captions``).
    ``cache`` is the job's durable response cache: every finished model call is stored there at once, so
    a killed job restarted with the same cache repeats no finished call. ``server`` is the address of a
    served batch's server of this model (``http://127.0.0.1:PORT``): every backend opened for the model's
    config (the run's, a re-captioner's, a tool's) then talks to it, with the same cache identity.
    """
    endpoint = Endpoint(server, dict(stage_config["model"])) if server else None
    with serving_through(endpoint):
        return _answer_video(questions, video, stage_config, frames, carrier, cache, memory, pixels, caption_cache)


def _answer_video(questions: pl.DataFrame, video: VideoInfo, stage_config: Mapping[str, Any],
                  frames: str | Path | None, carrier: str | Path | None, cache: str | Path | None,
                  memory: MemoryInputs | None, pixels: str | Path | None,
                  caption_cache: str | Path | None = None) -> pl.DataFrame:
    method_config = dict(stage_config["method"])
    model_config = dict(stage_config["model"])
    method_name, model_name = method_config.pop("name"), model_config.pop("name")
    method_cls = METHODS.load(method_config["implementation"])
    check_method_declaration(method_name, method_cls, method_config)
    if method_cls.uses_memory and memory is None:
        raise ValueError(f"method {method_name!r} needs the video's memory inputs (--memory, --video, ...)")
    if method_cls.uses_pixels and pixels is None:
        raise ValueError(f"method {method_name!r} decodes the video itself: give it the video (--video)")
    backend = open_backend(model_config, cache) if method_cls.uses_model else None
    method: Method | None = None
    try:
        context = RunContext(
            video=video,
            method_name=method_name,
            method_config=method_config,
            model_name=model_name,
            model_config=model_config,
            seed=int(stage_config["seed"]),
            backend=backend,
            frames=Path(frames) if frames else None,
            carrier=Path(carrier) if carrier else None,
            pixels=Path(pixels) if pixels else None,
            response_cache=Path(cache) if cache else None,
            **(memory_context(memory, video, stage_config) if method_cls.uses_memory and memory else
               {"caption_cache": Path(caption_cache) if caption_cache and method_cls.caches_captions else None}),
        )
        method = method_cls(context)
        rows = from_frame(questions.filter(pl.col("video_id") == video.video_id), Question)
        batch = max(1, int(model_config.get("batch_questions", 8)))
        predictions = []
        with tqdm(total=len(rows), desc=f"{method_name}/{model_name}/{video.video_id}", unit="q",
                  disable=None) as progress:
            for start in range(0, len(rows), batch):
                chunk = rows[start:start + batch]
                predictions += [_prediction(q, context, result, error) for q, (result, error)
                                in zip(chunk, _answer_chunk(method, chunk))]
                progress.update(len(chunk))
    finally:
        if method is not None:
            summary = method.summary()
            if summary:
                log.info("%s", summary)
            method.close()
        if backend is not None:
            backend.close()
    failed = sum(p.error is not None for p in predictions)
    letters = {letter: sum(p.pred == letter for p in predictions)
               for letter in counted_letters(p.pred for p in predictions)}
    log.info("%s/%s/%s: %d questions, %d correct, %d failed, %d parse failures; predicted letters %s",
             method_name, model_name, video.video_id, len(predictions), sum(p.correct for p in predictions),
             failed, sum(not p.parse_ok and p.error is None for p in predictions), letters)
    if isinstance(backend, CachedBackend):
        log.info("response cache: %d hit(s), %d miss(es), hit rate %.1f%%", backend.hits, backend.misses,
                 100 * backend.hit_rate())
    return to_frame(predictions, Prediction)
