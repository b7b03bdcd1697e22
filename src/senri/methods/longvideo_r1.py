"""LongVideo-R1's evaluation loop (issue 38; ``shared/spec/evidence_seekers.md`` §3, R-*): a text-only controller
walks a three-level segment tree of the video, reading node captions (``get_caption``) and asking a video QA model
about a low-level segment (``video_qa``) until it answers.

The tree (R-I1/I2) is laid over the source's frame indices: width w = clamp(round((D/16)^(1/3)), 4, 8) with
D = N / average fps; the high, medium and low levels are numpy's ``array_split`` of range(N) into w, w² and w³
parts (global splits), node (h, m) being medium part (h−1)·w + (m−1) and (h, m, l) low part
(h−1)·w² + (m−1)·w + (l−1). A node's caption reads 128 / 64 / 32 frames at linspace(first, last, k) (integer) of
its part, labelled with round(index / fps, 1) s, shown at a longest side of 256 / 362 / 512 px (R-C2); its span
is its first to its last sampled frame's time. ``video_qa`` splits range(N) in w, that part in w and that in w
again (nested splits, which can differ by a frame from the global low split, R-T1) and sends 16 frames of it at
a longest side of 1024 px.

Captions (R-C1..C3) are the release's offline full-tree captions made on demand: a node is captioned the first
time a question reads it, by the ``tool_models.caption`` model with the release's data/ parameters (the prompt
chosen by frame count: up to 32 frames the low-level prompt with 200 words, else the high-level one with 400;
2048 tokens; the reply kept raw, wrapped in ``<caption>`` tags when it has none) and kept in the shared caption
cache (:class:`senri.memory.hierarchy.CaptionCache`), keyed by video, node, frames, size, prompt and model, so
every controller, question and rerun over the same video reads the same caption. Only the nodes a question reads
are captioned; a caption does not depend on which other nodes were captioned, so the captions read are the ones
a full precomputation would give.

The loop (R-L1..L5, EV:18-172): [system R1(w), user R2] — the question, the duration line and the w high-level
captions, one text joined by newlines as vLLM joins a text-only content list for a template that reads strings —
then one completion a round, appended and never rebuilt. The first ``<think>``, ``<tool>`` and ``<answer>`` blocks
decide: an answer with a think block is the answer; an answer without one is popped and the R4 nudge added; a
tool call with a think block is parsed as ``name(args)`` with ``ast.literal_eval`` — an unreadable or unknown call
is popped with no feedback, ``get_caption`` with 2 or 3 ids in [1, w] answers with the node's caption,
``video_qa((h, m, l), "query")`` with the QA model's ``<answer>``; anything else is popped and nudged. Every
completion spends a round, popped ones too; before the 30th the R5 notice is added. What the release raises on —
ids out of range, a wrong number of ids, a QA reply without ``<answer>``, a request over the context — ends the
question without an answer, and (R-A1) a question without an answer is scored as the release scores it: as "A"
(``missing_answer: A``, counted ``defaulted_answers``; ``missing_answer: none`` leaves it unanswered). An answer
counts only when it is exactly an option letter (the release's exact string match against the gold letter).

A question lost to a model call that failed for good (a dead server: the release's client raises and
``process_one_entry`` catches it like any other error) is scored the same way by default (``failed_call:
release_letter_a``, run_all's "A"), but its row keeps the failed call in ``error``, so it counts among the run's
errors in the run-health tables and never passes for an answer; ``failed_call: error_row`` (senri's rule for
every other method) leaves it unanswered, counted wrong.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from senri.answers import format_options
from senri.backends.base import Backend, ChatRequest, ImagePart, Message
from senri.methods.base import CallTally, MethodAnswer, RoleModels, RunContext
from senri.methods.seeker import CropSeeker
from senri.methods.structured import call_record
from senri.records import Question

LEVELS = ("high", "medium", "low")
_BLOCK = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.DOTALL) for tag in ("think", "reasoning", "answer", "tool",
                                                                             "caption")}
#: The release's call pattern (EU:53-69) has no DOTALL: a call written over several lines does not match, and
#: in a block of two lines only the first is read. ``call_parser: dotall`` (senri) reads across lines.
_CALL = {"release": re.compile(r"(\w+)\((.*)\)"), "dotall": re.compile(r"(\w+)\((.*)\)", re.DOTALL)}
TOOL_ROLES = ("caption", "video_qa")
#: ``null_reply``: ``lose_question`` (the release: a reply whose content is null raises in its reader and the
#: sample ends without an answer) or ``nudge`` (senri: read as an empty reply, popped and nudged).
NULL_REPLIES = ("lose_question", "nudge")
#: ``failed_call``: ``release_letter_a`` (the release: a question lost to a failed model call is scored as any
#: lost sample, by ``missing_answer``, its row still marked with the error) or ``error_row`` (senri: unanswered).
FAILED_CALLS = ("release_letter_a", "error_row")


#: The options whose non-default value departs from the release (option -> the release's value): the report marks
#: a run that set one (the registry ``senri.methods.DEVIATIONS`` reads this mapping).
DEVIATIONS = {"call_parser": "release", "null_reply": "lose_question", "missing_answer": "A",
              "failed_call": "release_letter_a"}


def scored_as_missing(missing_answer: str | None, failed_call: str, call_failed: bool) -> bool:
    """Whether a question that ended without an answer is scored "A" (R-A1, run_all): under ``missing_answer:
    A``, always where no model call failed; where one failed for good, only under ``failed_call:
    release_letter_a`` (the release cannot tell the two apart). The row of a failed call keeps its error either
    way (:attr:`MethodAnswer.error`): it counts among the run's errors, and ``error_row`` also scores it wrong."""
    return missing_answer == "A" and (not call_failed or failed_call == "release_letter_a")


class SampleKilled(Exception):
    """What the release raises inside a question (an assert, a bad unpacking, a failed request): the question
    ends there without an answer (EV:211-215)."""


def tree_width(n_frames: int, fps: float, segment_s: float = 16.0, min_width: int = 4, max_width: int = 8) -> int:
    """R-I1: clamp(round((D / segment_s)^(1/3)), min, max), D = N / average fps (Python's round: half to even).
    A rate of 0, or a negative duration, raises ValueError where the release's division (or the complex cube
    root that Python's round refuses) raises."""
    if fps == 0 or n_frames / fps < 0:
        raise ValueError(f"{n_frames} frames at an average rate of {fps!r}: LongVideo-R1's tree width needs a "
                         f"positive duration")
    duration = n_frames / fps
    return max(min_width, min(max_width, round((duration / segment_s) ** (1 / 3))))


def level_parts(n_frames: int, width: int, level: str) -> list[np.ndarray]:
    """R-I2: the global split of range(N) into w, w² or w³ parts (numpy's array_split)."""
    return np.array_split(np.arange(n_frames), width ** (LEVELS.index(level) + 1))


def level_part(n_frames: int, width: int, level: str, index: int) -> np.ndarray:
    """Part ``index`` of :func:`level_parts` without splitting the whole range (numpy's array_split: the first
    N mod k parts hold one frame more)."""
    size, extra = divmod(n_frames, width ** (LEVELS.index(level) + 1))
    start = index * size + min(index, extra)
    return np.arange(start, start + size + (index < extra))


def node_index(ids: Sequence[int], width: int) -> int:
    """The part index of node ids (h[, m[, l]]) in its level's global split."""
    index = 0
    for i in ids:
        index = index * width + (int(i) - 1)
    return index


def nested_low_part(n_frames: int, width: int, ids: Sequence[int]) -> np.ndarray:
    """R-T1: video_qa's part of low node (h, m, l): range(N) split in w, that part in w, that part in w."""
    start, count = 0, n_frames
    for i in ids:  # numpy's array_split: the first count % w parts hold one frame more
        size, extra = divmod(count, width)
        k = int(i) - 1
        start, count = start + k * size + min(k, extra), size + (1 if k < extra else 0)
    return np.arange(start, start + count)


def sample_ids(part: np.ndarray, k: int) -> list[int]:
    """k frame indices at linspace(first, last, k) cast to integers (numpy's dtype=int: toward zero)."""
    return [int(i) for i in np.linspace(part[0], part[-1], k, dtype=int)]


def frame_time(index: int, fps: float) -> float:
    """A frame's label: round(index / fps, 1) (R-I2, DU:40-46)."""
    return round(index / fps, 1)


def longest_side(height: int, width: int, limit: int, rounding=round) -> tuple[int, int]:
    """A frame's size once its longer side is at most ``limit`` (both sides scaled by the same factor,
    ``rounding`` each: the captions round, video_qa truncates; smaller frames are left as they are)."""
    if width <= limit and height <= limit:
        return height, width
    scale = min(limit / height, limit / width)
    return int(rounding(height * scale)), int(rounding(width * scale))


def caption_side(level: str, max_side: int = 512, min_side: int = 140) -> int:
    """R-C2: round(max_side / √s) for s = 4 / 2 / 1 (high / medium / low), at least ``min_side``."""
    return scaled_side((4, 2, 1)[LEVELS.index(level)], max_side, min_side)


def scaled_side(scale: float, max_side: int = 512, min_side: int = 140) -> int:
    """DU:48-66: a caption frame's longest side for scale factor ``scale``: round(max_side / √scale), at least
    ``min_side``."""
    return max(min_side, round(max_side / math.sqrt(scale)))


def stored_caption(reply: str) -> str:
    """R-C3: the caption kept for a node: the raw reply when it holds a ``<caption>…</caption>`` block (case-
    sensitive), else the reply wrapped as ``<caption> reply </caption>`` (an unclosed tag counts as none)."""
    return reply if _BLOCK["caption"].search(reply) else f"<caption> {reply} </caption>"


def blocks(text: str) -> dict[str, str]:
    """The first ``<think>``, ``<reasoning>``, ``<answer>`` and ``<tool>`` blocks of a reply, stripped (EU:42-51)."""
    found = {}
    for tag in ("think", "reasoning", "answer", "tool"):
        match = _BLOCK[tag].search(text or "")
        if match:
            found[tag] = match.group(1).strip()
    return found


def answer_letter(final: str | None, question: Question) -> str | None:
    """The prediction an ``<answer>`` block gives: its stripped text when that is one of the question's letters
    exactly (the release's A–D for four options; E on a five-option question), else none."""
    return final if final in question.letters else None


def parse_call(text: str, parser: str = "release") -> tuple[str | None, Any, bool]:
    """``name(args)`` read as the release reads it (EU:53-69): the name and ``ast.literal_eval`` of everything
    between the first ``(`` and the last ``)`` of the first line (``parser="dotall"``: of the whole block);
    (name, args, legal)."""
    match = _CALL[parser].match(text.strip())
    if not match:
        return None, None, False
    name, body = match.group(1), match.group(2).strip()
    try:
        return name, (ast.literal_eval(body) if body else ()), True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return name, body, False


def caption_ids(args: Any, width: int) -> tuple[int, ...]:
    """get_caption's ids (R-L3): 2 or 3 of them, each in [1, w]; anything else kills the sample."""
    try:
        count = len(args)
        ids = tuple(int(i) for i in args)
    except (TypeError, ValueError) as exc:
        raise SampleKilled(f"get_caption: ids {args!r} are not a sequence of integers ({exc})") from None
    if count not in (2, 3):
        raise SampleKilled(f"get_caption: segment ids must be 2 or 3, got {count}")
    if not all(1 <= i <= width for i in ids):
        raise SampleKilled(f"get_caption: ids {ids} must lie in [1, {width}]")
    return ids


def video_qa_args(args: Any, width: int) -> tuple[tuple[int, int, int], str]:
    """video_qa's (h, m, l) and query (R-L4); anything else kills the sample."""
    try:
        segment, query = args
        h, m, l = (int(i) for i in segment)
    except (TypeError, ValueError) as exc:
        raise SampleKilled(f"video_qa: arguments {args!r} are not ((h, m, l), query) ({exc})") from None
    if not all(1 <= i <= width for i in (h, m, l)):
        raise SampleKilled(f"video_qa: ids {(h, m, l)} must lie in [1, {width}]")
    if not all(isinstance(i, int) for i in segment):  # EU:178-183 index the splits with the ids as written
        raise SampleKilled(f"video_qa: ids {segment!r} must be integers (the release indexes with them)")
    if not isinstance(query, str):
        raise SampleKilled(f"video_qa: the query must be a text, got {query!r}")
    return (h, m, l), query


@dataclass(frozen=True)
class Node:
    level: str
    ids: tuple[int, ...]
    frame_ids: tuple[int, ...]
    times: tuple[float, ...]

    @property
    def label(self) -> str:
        return f"{self.level}{self.ids}"


def tree_node(n_frames: int, fps: float, width: int, ids: Sequence[int], caption_frames: Mapping[str, int]) -> Node:
    """The node of ids (h[, m[, l]]) in the caption tree (R-I2): its part of its level's global split, the
    ``caption_frames[level]`` frames sampled from it and their time labels. A video with fewer frames than
    w³ has empty low parts: sampling one raises IndexError, as the release's caption job does."""
    level = LEVELS[len(ids) - 1]
    part = level_part(n_frames, width, level, node_index(ids, width))
    frames = sample_ids(part, caption_frames[level])
    return Node(level, tuple(int(i) for i in ids), tuple(frames), tuple(frame_time(i, fps) for i in frames))


def caption_template(n_frames: int, low_prompt_frames: int = 32) -> str:
    """R-C3: the caption prompt goes by the frames shown, not the level: up to ``low_prompt_frames`` the
    low-level template, else the high-level one."""
    return "low" if n_frames <= low_prompt_frames else "high"


class LongVideoR1(CropSeeker):
    """One instance per (model, video) job: the tree, the caption and QA models, the caption cache."""

    caches_captions = True

    @classmethod
    def capability_problems(cls, method: str, spec: Any, model: str, capabilities: Any,
                            roles: Any = None) -> list[str]:
        problems = []
        for role in TOOL_ROLES:
            name, caps = (roles or {}).get(role, (model, capabilities))
            if caps is not None and not caps.images:
                problems.append(f"method {method!r}: its {role} tool shows frames to model {name!r}, which takes no "
                                f"images (name an image model in method.{method}.tool_models.{role})")
        return problems

    def check_capabilities(self) -> None:
        """The controller reads text only; the tool roles are checked once their models are open."""

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        self.width = tree_width(self.n_frames, self.fps, float(config.get("segment_s", 16)),
                                int(config.get("min_width", 4)), int(config.get("max_width", 8)))
        self.max_rounds = int(config.get("max_rounds", 30))
        self.caption_frames = dict(zip(LEVELS, (int(k) for k in config.get("caption_frames", [128, 64, 32]))))
        self.caption_max_side = int(config.get("caption_max_side", 512))
        self.caption_min_side = int(config.get("caption_min_side", 140))
        self.low_prompt_frames = int(config.get("low_prompt_max_frames", 32))
        self.caption_words = {"high": int(config.get("high_caption_words", 400)),
                              "low": int(config.get("low_caption_words", 200))}
        self.qa_frames = int(config.get("video_qa_frames", 16))
        self.qa_max_side = int(config.get("video_qa_max_side", 1024))
        self.jpeg_quality = int(config.get("jpeg_quality", 75))
        self.call_parser = str(config.get("call_parser", "release"))
        self.null_reply = str(config.get("null_reply", "lose_question"))
        self.failed_call = str(config.get("failed_call", "release_letter_a"))
        for key, value, allowed in (("call_parser", self.call_parser, tuple(_CALL)),
                                    ("null_reply", self.null_reply, NULL_REPLIES),
                                    ("failed_call", self.failed_call, FAILED_CALLS)):
            if value not in allowed:
                raise ValueError(f"method {context.method_name!r}: {key} must be one of {', '.join(allowed)}, "
                                 f"got {value!r}")
        self.missing_answer = config.get("missing_answer", "A")
        if self.missing_answer not in ("A", None, "none"):
            raise ValueError(f"method {context.method_name!r}: missing_answer must be A or none, "
                             f"got {self.missing_answer!r}")
        self.text = self.prompts()
        self._role_models = RoleModels(context)
        self.tool_models: dict[str, tuple[str, Backend | None]] = {}
        try:
            for role in TOOL_ROLES:
                spec = (config.get("tool_model_configs") or {}).get(role)
                self.tool_models[role] = self._role_models.get(
                    spec, f"config.method.{context.method_name}.tool_models.{role}")
            self.refuse_missing_capabilities({role: (name, backend.capabilities if backend else None)
                                              for role, (name, backend) in self.tool_models.items()})
        except Exception:
            self._role_models.close()
            raise
        self.cache = None
        if context.caption_cache is not None:
            from senri.memory.hierarchy import CaptionCache

            self.cache = CaptionCache(context.caption_cache)
        self.captions: dict[tuple[str, tuple[int, ...]], str] = {}
        self.computed = self.reused = 0

    # ------------------------------------------------------------------------------------------------ tree
    def node(self, ids: Sequence[int]) -> Node:
        return tree_node(self.n_frames, self.fps, self.width, ids, self.caption_frames)

    def duration_label(self) -> float:
        """R-I3: the last high node's last sampled frame time."""
        return self.node((self.width,)).times[-1]

    # -------------------------------------------------------------------------------------------- captions
    def _caption_request(self, node: Node) -> ChatRequest:
        """R-C2/C3: the system prompt by frame count, then per frame its time label and the frame."""
        from senri.decode import encode_jpeg

        side = caption_side(node.level, self.caption_max_side, self.caption_min_side)
        images = self.decode(node.frame_ids, lambda h, w: longest_side(h, w, side))
        kind = caption_template(len(node.frame_ids), self.low_prompt_frames)
        system = self.text.render(f"caption_{kind}", num_frame=len(images), num_words=self.caption_words[kind])
        parts: list[Any] = []
        for t, image in zip(node.times, images):
            parts += [self.text.render("caption_frame", time=t), ImagePart(encode_jpeg(image, self.jpeg_quality))]
        return ChatRequest(messages=(Message.text("system", system), Message("user", tuple(parts))),
                           purpose=f"longvideo_r1:caption:{node.label}",
                           **{**self._tool_sampling("caption"), "max_tokens": self.role_max_tokens("caption")})

    def _cache_key(self, node: Node) -> str:
        name, backend = self.tool_models["caption"]
        return self.cache.key_for({
            "video": self.context.video.fingerprint, "node": list(node.ids), "frames": list(node.frame_ids),
            "side": caption_side(node.level, self.caption_max_side, self.caption_min_side),
            "low_prompt_frames": self.low_prompt_frames, "words": self.caption_words, "jpeg": self.jpeg_quality,
            "prompts": self.context.method_config.get("prompt_identity"), "max_tokens": self.role_max_tokens("caption"),
            "model": backend.identity if backend is not None else name, "sampling": self._tool_sampling("caption")})

    def caption(self, node: Node, tally: CallTally, calls: list[dict[str, Any]]) -> str:
        """A node's caption: from this job, the shared cache, or the caption model (R-C3: the raw reply, wrapped
        in ``<caption>`` tags when it holds none). A failed call raises SampleKilled (the release's caption
        script stops there) and is not cached."""
        key = (node.level, node.ids)
        if key in self.captions:  # made or read earlier in this job: no call for this question either
            tally.add_captions(0, 1, 0, 0, 0.0, True)
            return self.captions[key]
        cache_key = self._cache_key(node) if self.cache is not None else None
        record = self.cache.get(cache_key) if cache_key else None
        if record is not None and isinstance(record.get("caption"), str):
            self.reused += 1
            tally.add_captions(0, 1, 0, 0, 0.0, True)
            self.captions[key] = record["caption"]
            return record["caption"]
        request = self._caption_request(node)
        (response,) = self.tool_models["caption"][1].complete_many([request])
        tally.add_captions(1, 0, response.prompt_tokens, response.completion_tokens, response.latency_s, True)
        if response.error:
            tally.count("failed_captions")
            tally.errors.append(f"caption of {node.label}: {response.error}")
        calls.append({**call_record(request, response), "role": "caption", "node": node.label})
        if response.error:
            raise SampleKilled(f"caption of {node.label}: {response.error}")
        if response.truncated:
            tally.count("truncated_captions")
        text = response.text or ""
        caption = stored_caption(text)
        self.computed += 1
        self.captions[key] = caption
        if cache_key:
            self.cache.put(cache_key, {"caption": caption, "level": node.level, "ids": list(node.ids),
                                       "frame_ids": list(node.frame_ids), "frame_time": list(node.times),
                                       "model": self.tool_models["caption"][0]})
        return caption

    def _tool_sampling(self, role: str) -> dict[str, Any]:
        name, backend = self.tool_models[role]
        model = backend.config if backend is not None and hasattr(backend, "config") else self.context.model_config
        return {"temperature": float(model.get("temperature", 0.0)), "top_p": float(model.get("top_p", 1.0)),
                "seed": self.context.seed}

    # ---------------------------------------------------------------------------------------------- tools
    def video_qa(self, ids: tuple[int, int, int], query: str, tally: CallTally, calls: list[dict[str, Any]]
                 ) -> tuple[str, int]:
        """R-T1/T2: 16 frames of the nested low part at a longest side of 1024 px (truncated), each after its
        "Video frame at t seconds:" line, under the query; the reply's ``<answer>`` (none kills the sample)."""
        from senri.decode import encode_jpeg

        part = nested_low_part(self.n_frames, self.width, ids)
        frames = sample_ids(part, self.qa_frames)
        images = self.decode(frames, lambda h, w: longest_side(h, w, self.qa_max_side, rounding=int))
        if len(images) < len(frames):
            tally.count("black_frames", len(frames) - len(images))
        parts: list[Any] = [query]
        for i, image in zip(frames, images):
            parts += [self.text.render("video_qa_frame", time=frame_time(i, self.fps)),
                      ImagePart(encode_jpeg(image, self.jpeg_quality))]
        request = ChatRequest(messages=(Message.text("system", self.text.render("video_qa_system")),
                                        Message("user", tuple(parts))),
                              purpose=f"longvideo_r1:video_qa:{ids}",
                              **{**self._tool_sampling("video_qa"), "max_tokens": self.role_max_tokens("video_qa")})
        (response,) = self.tool_models["video_qa"][1].complete_many([request])
        tally.add(request, response)
        calls.append({**call_record(request, response), "role": "video_qa", "node": f"low{ids}"})
        if response.error:
            raise SampleKilled(f"video_qa {ids}: {response.error}")
        answer = blocks(response.text or "").get("answer")
        if answer is None:
            raise SampleKilled(f"video_qa {ids}: the reply holds no <answer> (the release asserts one)")
        return answer, len(images)

    # ----------------------------------------------------------------------------------------------- loop
    def first_turn(self, question: Question, tally: CallTally, calls: list[dict[str, Any]]) -> str:
        """R-L1/R2: the question (its text, the options, a trailing newline as EV:190-191 writes it), the duration
        line and the w high-level captions, joined by newlines."""
        asked = self.text.render("question", question=question.question, options=format_options(question.options))
        lines = [asked if asked.endswith("\n") else asked + "\n",  # the release's own string ends with it
                 self.text.render("duration", duration=self.duration_label())]
        for h in range(1, self.width + 1):
            node = self.node((h,))
            lines.append(self.text.render("high_caption", index=h, start=node.times[0], end=node.times[-1])
                         + self.caption(node, tally, calls))
        return "\n".join(lines)

    def answer(self, question: Question) -> MethodAnswer:
        tally, calls, steps = CallTally(), [], []
        final: str | None = None
        outcome = "max_rounds"
        try:
            messages = [Message.text("system", self.text.render("system", width=self.width)),
                        Message.text("user", self.first_turn(question, tally, calls))]
            rounds = 0
            max_tokens = self.role_max_tokens("controller")
            while True:
                if rounds >= self.max_rounds:
                    break
                if rounds == self.max_rounds - 1:
                    messages.append(Message.text("user", self.text.render("last_round")))
                sent = self.send(messages, max_tokens, f"longvideo_r1:round{rounds + 1}", tally, calls)
                if sent is None:  # the history outgrew the model: the release's request fails (HTTP 400)
                    raise SampleKilled("the history no longer fits the controller's context")
                if tally.errors:  # the call failed for good (the release's client raises): no answer
                    raise SampleKilled(f"the controller's call failed: {tally.errors[-1]}")
                reply = sent[0]
                if sent[2].content_null and self.null_reply == "lose_question":  # EV: re.search(None) raises
                    raise SampleKilled("the controller's reply has null content (the release's reader raises)")
                messages.append(Message.text("assistant", reply))
                rounds += 1
                tally.did("rounds")
                found = blocks(reply)
                step: dict[str, Any] = {"round": rounds}
                steps.append(step)
                if "answer" in found and "think" in found:
                    final, outcome = found["answer"], "answer"
                    step["kind"] = "answer"
                    break
                if "tool" in found and "think" in found and "answer" not in found:
                    name, args, legal = parse_call(found["tool"], self.call_parser)
                    step.update(kind="tool", call=found["tool"][:500])
                    if not legal or name not in ("get_caption", "video_qa"):
                        messages.pop()  # popped with no feedback (EV:100-105, 160-163)
                        tally.count("unparsed_tool_calls" if not legal else "rejected_tool_calls")
                        step["popped"] = "unreadable call" if not legal else f"unknown tool {name!r}"
                        continue
                    tally.did("tool_calls")
                    if name == "get_caption":
                        ids = caption_ids(args, self.width)
                        node = self.node(ids)
                        caption = self.caption(node, tally, calls)
                        tally.did("searches")
                        tally.did("memories_returned")
                        role = "medium_caption" if len(ids) == 2 else "low_caption"
                        observation = self.text.render(role, ids=",".join(map(str, ids)), start=node.times[0],
                                                       end=node.times[-1]) + caption
                        step["node"] = node.label
                    else:
                        qa_ids, query = video_qa_args(args, self.width)
                        answer, seen = self.video_qa(qa_ids, query, tally, calls)
                        tally.did("qa_calls")
                        tally.did("frames_seen", seen)
                        observation = self.text.render("information", answer=answer)
                        step.update(node=f"low{qa_ids}", query=query[:500])
                    messages.append(Message.text("user", observation))
                    continue
                # an answer without a think block, or no usable block: popped and nudged (EV:87-96, 164-172)
                messages.pop()
                messages.append(Message.text("user", self.text.render("nudge")))
                step.update(kind="nudged", popped="answer without <think>" if "answer" in found else "no block")
                tally.count("spent_steps")
        except SampleKilled as exc:
            outcome = "killed"
            steps.append({"killed": str(exc)})
        if final is None and outcome == "max_rounds":
            tally.count("forced_answers")  # the last-round notice was given and no answer came
        pred = answer_letter(final, question)
        defaulted = final is None and scored_as_missing(self.missing_answer, self.failed_call, bool(tally.errors))
        if defaulted:
            pred = "A"
            tally.count("defaulted_answers")
        trace = {"width": self.width, "steps": steps, "calls": calls, "outcome": outcome, "final": final,
                 "defaulted_to": "A" if defaulted else None,
                 "failed_call": self.failed_call if tally.errors else None,  # the rule that scored a failed call
                 "tool_models": {role: name for role, (name, _) in self.tool_models.items()}}
        return MethodAnswer(pred, final, pred is not None and not defaulted, tally, trace)

    def summary(self) -> str | None:
        return (f"LongVideo-R1 width {self.width}: {self.computed} node caption(s) computed, {self.reused} read from "
                f"the shared caption cache")

    def close(self) -> None:
        self._role_models.close()
