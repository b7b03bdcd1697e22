"""WorldMM's original workflow over its own store (W-L1…W-L4): a controller that searches one memory type per
round, then a separate QA call over everything retrieved.

* **Controller** (W10; W-L1…L3): at most ``max_rounds`` (5) calls, each seeing the question with its choices
  ("Query: …\\nChoices: (A) … (B) …") and the round history (decision, memory type, search query, what was
  retrieved; a visual search shows "[N images from M clips]", never the images: a time-range search always
  "from 1 clips", as the release keys its frames by the range). It replies
  ``{"decision": "search", "selected_memory": {"memory_type", "search_query"}}`` or ``{"decision": "answer"}``,
  read as the released parser reads it (:func:`parse_decision`): a reply that is not JSON counts as
  ``answer``; any other decision spends its round silently (no error, no history entry); a failed call, a
  search without a memory, an unknown memory type or a reply the released parser would raise on is an error
  and spends its round; the loop stops on an answer, at ``max_rounds`` calls, or at ``max_errors`` errors.
* **Search**: the store's retrieval of that type (:class:`senri.memory.worldmm.store.WorldMMStore`), ``memory_top_k``
  items per type (episodic 3, semantic 10, visual 3), leaving out what the question already holds.
* **QA** (W11; W-L4): one call with the question, "Context:", every retrieved text in order and the frames of
  the visual retrievals (:meth:`WorldMMWorkflow._frames`: 1 fps over each clip, both ends included, at most
  ``max_images`` per retrieval; at most ``image_max_side`` pixels a side, JPEG quality ``jpeg_quality``),
  unlabelled, then the final instruction. Its reply, read by the project's answer parser, is the answer. A
  frame that fails to decode is left out of the call and counted ``black_frames``.
* **Completion limits**: ``max_tokens`` per role (controller, answer: 4096, as SENRI-Agent's roles; the
  release sends none), bounded by the model config's ``max_tokens_cap``; the store's W8/W9 calls get its
  ``max_tokens.retriever``, bounded here by the cap of the model that serves them.

Requests over the model's limits are trimmed before sending, each trim recorded in the trace and counted
``context_trims``: a controller request leaves out the retrieved content of its oldest rounds first (their
decision, memory type and query stay), the QA request the oldest retrieval first, frames before texts; a
text-only model gets no frames (recorded). The store's W8 and W9 requests are sized to the retriever's model
the same way (``SearchContext.overflow``, which every memory method hands its store).
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any, ClassVar, Mapping

from senri.answers import parse_answer, split_reasoning
from senri.backends.base import ChatRequest, ImagePart, Message, Part
from senri.backends.budget import overflow
from senri.memory.store import MemoryItem
from senri.memory.worldmm.common import FILTER_SKIP_NOTE, is_time_range
from senri.memory.worldmm.index import ZeroWeightEntity
from senri.methods.agent import Episode, MemorySearch, _hit
from senri.methods.base import MethodAnswer, RunContext
from senri.methods.structured import call_record
from senri.records import Question, letters_in_words

#: What a controller request shows for a round whose retrieved content was left out to fit the model's context.
LEFT_OUT = "[left out to fit the model's context]"


#: Items per search, per memory type (the released code's episodic / semantic / visual top k).
DEFAULT_TOP_K = {"episodic": 3, "semantic": 10, "visual": 3}


#: The released parser's reading of a W10 reply: the span from its first ``{`` to its last ``}``.
_DECISION_SPAN = re.compile(r"\{.*\}", re.DOTALL)


def parse_decision(text: str | None, memory_types: tuple[str, ...]) -> dict[str, Any]:
    """A W10 reply read as the released parser reads it (``_parse_reasoning_response``): the span from the
    reply's first ``{`` to its last ``}`` (the whole reply where it has none) as JSON, so text around the
    object (``Reply: {…}``, a heading, a closing sentence) and nested objects are read.

    * ``{"decision": "answer", "parsed": …}``: the span is not JSON (the release's parse failure is an
      answer), or its decision is ``answer`` (any case) or missing (``parsed``: whether it said so);
    * ``{"decision": "search", "memory_type", "search_query"}``: a search of a known memory type (both words
      lower-cased, nothing stripped, as the release);
    * ``{"decision": "none", "value"}``: any other decision ("retrieve", "Search " …): the release neither
      answers nor searches, so the round is spent with no error and no history entry;
    * ``{"decision": …, "error": …}``: what the loop counts as an error — a search without ``selected_memory``,
      an unknown memory type, and a reply the released parser raises on (JSON that is not an object, a
      decision, ``selected_memory`` or memory type that is not a string / object, ``null`` included), which
      the release's loop catches as a failed round."""
    body = split_reasoning(text)[0]
    match = _DECISION_SPAN.search(body)
    try:
        data = json.loads(match.group() if match else body)
    except (ValueError, RecursionError):
        return {"decision": "answer", "parsed": False}
    if not isinstance(data, dict):
        return {"decision": "error", "error": f"reply is JSON {type(data).__name__}, not an object"}
    decision = data.get("decision", "answer")
    if not isinstance(decision, str):
        return {"decision": "error", "error": f"decision {decision!r} is not a string"}
    decision = decision.lower()
    if decision == "answer":
        return {"decision": "answer", "parsed": "decision" in data}
    if decision != "search":
        return {"decision": "none", "value": decision}
    if "selected_memory" not in data:
        return {"decision": "search", "error": "search decision without selected_memory"}
    selected = data["selected_memory"]
    if not isinstance(selected, Mapping):
        return {"decision": "search", "error": f"selected_memory {selected!r} is not an object"}
    memory_type = selected.get("memory_type", "")
    if not isinstance(memory_type, str):
        return {"decision": "search", "error": f"memory_type {memory_type!r} is not a string"}
    memory_type = memory_type.lower()
    query = selected.get("search_query", "")
    query = "" if query is None else str(query)
    if memory_type not in memory_types:
        return {"decision": "search", "error": f"unknown memory type {memory_type!r}"}
    return {"decision": "search", "memory_type": memory_type, "search_query": query}


def clip_frame_times(start_s: float, end_s: float, fps: float) -> list[float]:
    """The release's frame times over one clip or overlap (``_extract_frames``): every 1/fps from its start up
    to and including its end, so a 10-s clip gives 11 frames at 1 fps; an empty span (a clip that only touches
    a range) gives none."""
    if end_s <= start_s or fps <= 0:
        return []
    steps = int(math.floor((end_s - start_s) * fps + 1e-6))
    return [round(start_s + n / fps, 6) for n in range(steps + 1)]


def query_block(question: Question) -> str:
    """``Query: …`` and ``Choices: (A) … (B) …`` (one line), the released workflow's statement of a question."""
    choices = " ".join(f"({letter}) {text}" for letter, text in zip(question.letters, question.options))
    return f"Query: {question.question.strip()}\nChoices: {choices}"


class WorldMMWorkflow(MemorySearch):
    """WorldMM's control loop (see the module docstring); its memory system is pinned to ``worldmm``."""

    default_prompts: ClassVar[str] = "worldmm"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        if not self.store.memory_types:
            raise ValueError(f"method {context.method_name!r}: WorldMM's workflow needs a store with memory types "
                             f"(episodic/semantic/visual), not {self.store.system!r}")
        self.max_errors = int(config.get("max_errors", 5))
        self.type_top_k = {**DEFAULT_TOP_K, **dict(config.get("memory_top_k") or {})}
        self.visual_fps = float(config.get("visual_fps", 1.0))
        self.max_images = int(config.get("max_images", 64))
        self.image_max_side = int(config.get("image_max_side", 512))
        self.jpeg_quality = int(config.get("jpeg_quality", 85))

    # ------------------------------------------------------------------------------------------ requests
    def _controller_request(self, ep: Episode, history: list[dict[str, Any]]) -> ChatRequest:
        rounds = "\n\n".join(
            f"### Round {r['round']}\nDecision: search\nMemory: {r['memory_type']}\nSearch Query: {r['query']}\n"
            f"Retrieved:\n{r['content']}" for r in history) or "[]"
        messages = (Message.text("system", self.prompt_set.render("controller_system")),
                    Message.text("user", self.prompt_set.render("controller", query=query_block(ep.question),
                                                                history=rounds)))
        sampling = {**self.sampling(), "max_tokens": self.role_max_tokens("controller")}
        return ChatRequest(messages=messages, purpose="control", **sampling)

    def _fitted_controller_request(self, ep: Episode, history: list[dict[str, Any]], round_no: int) -> ChatRequest:
        """The controller request within the model's limits: the retrieved content of the oldest rounds is
        replaced by :data:`LEFT_OUT`, one round at a time, until it fits (the QA call still gets all of it);
        the trim recorded in the trace (``control_trims``) and counted ``context_trims``. Sent as it is when
        even no content at all does not fit (the call's failure is then the round's error)."""
        shown = [dict(entry) for entry in history]
        request = self._controller_request(ep, shown)
        backend = self.context.backend
        left_out = 0
        while backend is not None and overflow(backend, request) is not None:
            victim = next((entry for entry in shown if entry["content"] != LEFT_OUT), None)
            if victim is None:
                break
            victim["content"] = LEFT_OUT
            left_out += 1
            request = self._controller_request(ep, shown)
        if left_out:
            ep.tally.count("context_trims")
            ep.trace.setdefault("control_trims", []).append(
                {"round": round_no, "rounds_left_out": left_out, "rule": "oldest round's retrieved content first"})
        return request

    def _qa_request(self, ep: Episode, context: list[list[Part]]) -> ChatRequest:
        parts: list[Part] = [f"{query_block(ep.question)}\n\nContext:\n"]
        for block in context:
            parts += block
        parts.append("\n" + self.prompt_set.render("qa_final", letters=letters_in_words(ep.question.letters)))
        merged: list[Part] = []
        for part in parts:  # neighbouring texts as one string, so the request reads as the model sees it
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] = f"{merged[-1]}\n{part}" if not merged[-1].endswith("\n") else merged[-1] + part
            else:
                merged.append(part)
        messages = (Message.text("system", self.prompt_set.render("qa_system")), Message("user", tuple(merged)))
        sampling = {**self.sampling(), "max_tokens": self.role_max_tokens("answer")}
        return ChatRequest(messages=messages, purpose="answer", **sampling)

    def _fitted_qa_request(self, ep: Episode, context: list[list[Part]]) -> ChatRequest:
        """The QA request within the model's limits: frames of the oldest retrievals go first, then the oldest
        texts, one part at a time; every trim recorded and counted."""
        blocks = [list(block) for block in context]
        request = self._qa_request(ep, blocks)
        dropped = {"images": 0, "texts": 0}
        backend = self.context.backend
        while backend is not None and overflow(backend, request) is not None:
            victim = next(((b, i) for b in blocks for i, p in enumerate(b) if isinstance(p, ImagePart)), None)
            kind = "images"
            if victim is None:
                victim = next(((b, i) for b in blocks for i, p in enumerate(b) if isinstance(p, str)), None)
                kind = "texts"
            if victim is None:
                break
            victim[0].pop(victim[1])
            dropped[kind] += 1
            request = self._qa_request(ep, blocks)
        if dropped["images"] or dropped["texts"]:
            ep.tally.count("context_trims")
            ep.trace["qa_trim"] = {"left_out": dropped, "rule": "oldest retrieval first, frames before texts"}
        return request

    # ------------------------------------------------------------------------------------------- search
    def _frames(self, ep: Episode, clips: list[MemoryItem], time_range: bool) -> tuple[list[ImagePart], int]:
        """The frames of one visual retrieval as the release extracts them, and how many clips gave one:
        1 fps over each clip, both ends included (:func:`clip_frame_times`, times past the video's end read at
        its end); over ``max_images`` in all, a time-range retrieval keeps ``max_images`` spread evenly over
        all its frames, a text retrieval a share of each clip's (at least one per clip, spread evenly inside
        it), as the release samples the two paths. Each frame at most ``image_max_side`` pixels a side, JPEG
        at ``jpeg_quality``. A frame that fails to decode is left out and counted ``black_frames``."""
        import numpy as np

        from senri.decode import encode_jpeg, read_frames

        per_clip = [clip_frame_times(clip.start_s, clip.end_s, self.visual_fps) for clip in clips]
        total = sum(len(times) for times in per_clip)
        if total > self.max_images and time_range:
            flat = [(n, t) for n, times in enumerate(per_clip) for t in times]
            keep = [flat[int(i)] for i in np.linspace(0, total - 1, self.max_images).astype(int)]
            per_clip = [[t for m, t in keep if m == n] for n in range(len(clips))]
        elif total > self.max_images:
            ratio = self.max_images / total
            per_clip = [[times[int(i)] for i in np.linspace(0, len(times) - 1, max(1, int(len(times) * ratio)))
                         .astype(int)] if times else [] for times in per_clip]
        video = self.context.video
        duration = float(getattr(video, "duration_s", 0) or 0)
        wanted = [(n, min(t, duration) if duration > 0 else t) for n, times in enumerate(per_clip) for t in times]
        if not wanted:
            return [], 0
        short, long = sorted((int(video.width or 0), int(video.height or 0)))
        short_side = max(1, int(self.image_max_side * short / long)) if long > self.image_max_side else None
        frames = list(read_frames(self.context.media.video, [t for _, t in wanted], short_side=short_side))
        images, shown = [], set()
        failed = 0
        for (n, _), frame in zip(wanted, frames):
            if frame.image is None:
                failed += 1
                continue
            images.append(ImagePart(encode_jpeg(frame.image, quality=self.jpeg_quality)))
            shown.add(n)
        if failed:
            ep.tally.count("black_frames", failed)
            ep.trace["frames_not_decoded"] = ep.trace.get("frames_not_decoded", 0) + failed
        return images, len(shown)

    def _retrieve(self, ep: Episode, memory_type: str, query: str) -> tuple[str, list[Part], dict[str, Any]]:
        """One search of one memory type: (what the controller's history shows, the QA context parts, the
        trace record)."""
        context = self._search_context(ep)
        k = int(self.type_top_k.get(memory_type, self.top_k))
        items = self.store.search(query, k, exclude=set(ep.retrieved), memory_type=memory_type, context=context)
        ep.tally.did("searches")
        ep.tally.did("memories_returned", sum(item.item_id not in ep.retrieved for item in items))
        for item in items:
            ep.retrieved.setdefault(item.item_id, item)
        record: dict[str, Any] = {"memory_type": memory_type, "query": query, "retriever": self.store.retriever,
                                  "hits": [_hit(i) for i in items], "new": len(items)}
        if context.notes:
            record["notes"] = list(context.notes)
        skipped = sum(FILTER_SKIP_NOTE in note for note in context.notes)
        if skipped:
            record["fact_filter_skipped"] = skipped
            ep.trace["fact_filter_skipped"] = ep.trace.get("fact_filter_skipped", 0) + skipped
        if memory_type == "visual":
            time_range = is_time_range(query)
            images, clips_shown = self._frames(ep, items, time_range)
            record["images"] = len(images)
            if time_range:  # the release keys a range's frames by the range: one "clip", even with no frame
                content = f"[{len(images)} images from 1 clips]"
            else:
                content = f"[{len(images)} images from {clips_shown} clips]" if images else "[No results]"
            return content, list(images), record
        text = self.store.render(items)
        return (text or "[No results]"), ([text] if text else []), record

    # --------------------------------------------------------------------------------------------- loop
    def answer(self, question: Question) -> MethodAnswer:
        started = time.monotonic()
        ep = Episode(question)
        ep.tally.book_store(self.store.question_counts())
        history: list[dict[str, Any]] = []
        context: list[list[Part]] = []
        round_no = errors = 0
        while round_no < self.max_rounds and errors < self.max_errors:
            round_no += 1
            request = self._fitted_controller_request(ep, history, round_no)
            response = self.chat_many([request])[0]
            ep.tally.add(request, response)
            ep.tally.did("rounds")
            ep.trace["calls"].append({**call_record(request, response), "call": "control"})
            step: dict[str, Any] = {"round": round_no}
            ep.trace["rounds"].append(step)
            if response.error:
                errors += 1
                step.update(action="error", error=f"model call failed: {response.error}")
                continue
            decision = parse_decision(response.text, self.store.memory_types)
            if decision["decision"] == "answer":
                step.update(action="answer", parsed=decision["parsed"])
                break
            if decision["decision"] == "none":  # neither answer nor search: the release spends the round
                step.update(action="no_decision", decision=decision["value"])
                continue
            if "error" in decision:
                errors += 1
                step.update(action="error", error=decision["error"])
                continue
            key = " ".join(decision["search_query"].lower().split())
            if key in ep.queries:
                ep.tally.count("repeated_queries")
            ep.queries.add(key)
            try:
                shown, parts, record = self._retrieve(ep, decision["memory_type"], decision["search_query"])
            except ZeroWeightEntity as exc:  # the release's search raises: its evaluation answers "Error"
                step.update(action="search_raised", error=str(exc))
                ep.tally.errors.append(f"worldmm: {exc} (the release loses the question)")
                ep.trace.update(n_rounds=round_no, errors=errors, actions=[r["action"] for r in ep.trace["rounds"]],
                                retriever=self.store.retriever, wall_s=round(time.monotonic() - started, 3),
                                lost=str(exc))
                return MethodAnswer(None, "", False, ep.tally, ep.trace)
            step.update(action="search", **record)
            history.append({"round": round_no, "memory_type": decision["memory_type"],
                            "query": decision["search_query"], "content": shown})
            if parts:
                context.append(parts)
        if not self._capabilities.images:
            left_out = sum(isinstance(p, ImagePart) for block in context for p in block)
            context = [[p for p in block if not isinstance(p, ImagePart)] for block in context]
            if left_out:
                ep.trace["images_left_out"] = f"{left_out} frame(s): the model takes no images"
        request = self._fitted_qa_request(ep, context)
        response = self.chat_many([request])[0]
        ep.tally.add(request, response)
        ep.tally.did("qa_calls")
        ep.tally.did("answered_without_retrieval", int(not ep.retrieved))
        ep.trace["calls"].append({**call_record(request, response), "call": "answer", "images": request.n_images()})
        parsed = parse_answer(response.text, question.options) if not response.error else None
        letter = parsed.letter if parsed is not None and parsed.ok else None
        ep.trace.update(n_rounds=round_no, errors=errors, actions=[r["action"] for r in ep.trace["rounds"]],
                        retriever=self.store.retriever, wall_s=round(time.monotonic() - started, 3),
                        retrieved=[i.item_id for i in ep.retrieved.values()],
                        tokens=ep.tally.prompt_tokens + ep.tally.completion_tokens)
        return MethodAnswer(letter, response.text, letter is not None, ep.tally, ep.trace)

