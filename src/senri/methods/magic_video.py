"""MAGIC-Video's original workflow over its store (G-L1..L3): search rounds, then one QA call with images.

The controller (G14) searches the ``magic_video`` store with one complete-sentence query per round — each
search is one PPR pass with quotas plus the round's chain facts, or the time bypass (G-R*) — and answers after
at most ``max_rounds``. What it reads each round is the release's round history (G-L2, ``controller_view:
history``): per search round its query and what it retrieved, as the release writes it — ``[Retrieved episode]``
captions, ``[N visual frames of above episode]`` for a clip's frames, chain facts mixed in by time,
``[Retrieved semantic]`` triples last, ``[No new results]`` for a round that found nothing new, kept in later
rounds (:meth:`MagicVideoWorkflow.round_history`); ``controller_view: combined`` shows every retrieved item
rendered together instead (the store's render). The answer is MAGIC-Video's own QA call (G15): the retrieved
memory in time order, each clip's frames right after its caption, unlabelled, at the video's own resolution
(``qa_short_side``) as JPEG quality 90, semantic triples last (:meth:`MagicVideoWorkflow.qa_parts`), with frames
chosen as the release chooses them (1 fps, or 16 spread over the whole clip when 1 fps gives more; clips in
retrieval order, ≤ 64 frames in all, :func:`qa_frame_plan`); when that call fails or comes back empty, it is
asked once more without images over the release's other rendering (``qa_retry_context``).

Everything else — rounds, repair, forced answer, the trace, the tally, ``SearchContext.ask`` for the store's
time extractor — is :class:`senri.methods.agent.MemorySearch`'s, so SENRI-Agent over the same store differs
only where the papers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from senri.answers import question_block
from senri.backends.base import ChatRequest, ImagePart, Message
from senri.memory.magic_video.graph import CHAIN, EPISODE, GRANULARITIES, SEMANTIC, VISUAL, episode_id
from senri.memory.store import MemoryItem
from senri.methods.agent import Episode, MemorySearch
from senri.methods.base import RunContext
from senri.records import letters_in_words

#: What the controller reads each round (``controller_view``): ``history`` — the release's round history;
#: ``combined`` — every retrieved item rendered together by the store, with the last round's feedback.
CONTROLLER_VIEWS = ("history", "combined")
#: The text of the QA call that is asked again without images (``qa_retry_context``): ``release`` — its other
#: renderer (``_render_retrieved_items_for_qa``: episodes and triples as stored, in retrieval order, no chain
#: facts); ``interleaved`` — the first call's rendering without its frames.
RETRY_CONTEXTS = ("release", "interleaved")
#: The release's JPEG quality for the QA frames (its OpenRouter wrapper).
QA_JPEG_QUALITY = 90
#: Where the context goes in answer.txt (the parts are put in its place).
_CONTEXT_MARK = "\x00context\x00"


def release_frame_indices(start_s: float, end_s: float, video_fps: float, n_frames: int, fps: float = 1.0,
                          max_frames: int | None = 16) -> list[int]:
    """The frame indices the release reads for one retrieved clip (G-R5, its ``_extract_frames``), on a video of
    ``n_frames`` frames at ``video_fps``: the clip's span clamped to the video, its first frame int(start · fps_v)
    to its last int(end · fps_v) (≤ the video's last frame), every int(fps_v / fps)-th frame — 1 fps — and, when
    that gives more than ``max_frames``, ``max_frames`` frames spread evenly over the whole span instead
    (``linspace(first, last, max_frames)`` truncated to int: both ends included). A span of one frame or less
    gives none, and so does a video without frames or a frame rate, and a span the release cannot convert to
    frames (a NaN or infinite time: its exception handler returns no frame)."""
    if not video_fps > 0 or n_frames <= 0:  # the release: duration 0, so start = end = frame 0 → none
        return []
    duration = n_frames / video_fps
    start = max(0.0, min(float(start_s), duration))
    end = max(start, min(float(end_s), duration))
    try:
        first, last = int(start * video_fps), min(int(end * video_fps), n_frames - 1)
        step = max(1, int(video_fps / fps) if fps > 0 else int(video_fps))
    except (ValueError, OverflowError):  # int() of NaN or infinity: the release catches it and returns no frame
        return []
    if first >= last:
        return []
    indices = list(range(first, last + 1, step))
    if max_frames is not None and len(indices) > max_frames:
        indices = np.linspace(first, last, max_frames, dtype=int).tolist()
    return indices


def qa_frame_plan(clips: Sequence[tuple[float, float]], video_fps: float, n_frames: int, fps: float = 1.0,
                  per_clip: int = 16, total: int = 64, used: int = 0) -> list[list[int]]:
    """Per clip, in the order given (the release's: retrieval order, round after round), its QA frame indices
    (:func:`release_frame_indices` with at most min(``per_clip``, what the budget has left)); once ``total``
    frames are spent a clip gets none (its caption still goes as text). ``used``: frames spent before."""
    out = []
    for start_s, end_s in clips:
        left = total - used
        if left <= 0:
            out.append([])
            continue
        indices = release_frame_indices(start_s, end_s, video_fps, n_frames, fps, min(per_clip, left))
        used += len(indices)
        out.append(indices)
    return out


def video_rate(video: Any) -> tuple[float, int] | None:
    """(frame rate, frame count) the QA frames are planned on: the probe's average rate, else its nominal rate,
    else frames / duration — what the release's decoder would report for the file — or None when the metadata
    gives none of them (the release's decoder then reads no frame: the QA call goes without images)."""
    duration = float(getattr(video, "duration_s", 0) or 0)
    n_frames = int(getattr(video, "n_frames", 0) or 0)
    fps = float(getattr(video, "avg_fps", 0) or 0) or float(getattr(video, "r_fps", 0) or 0)
    if fps <= 0 and n_frames > 0 and duration > 0:
        fps = n_frames / duration
    if fps <= 0:
        return None
    n_frames = n_frames or int(round(duration * fps))
    return (fps, n_frames) if n_frames > 0 else None


def minutes_clock(seconds: float) -> str:
    """"MM:SS" as the release's ``retrieve_by_time`` writes a time-bypass caption's bounds: whole seconds split
    into minutes and seconds, the minutes unbounded ("61:05" is 1 h 1 min 5 s)."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


@dataclass
class SearchRound:
    """One search round as the release's history keeps it: its number (error rounds count), the query, whether
    the time bypass served it, and the items it added (the store's order)."""

    round_no: int
    query: str
    bypass: bool
    items: list[MemoryItem]


@dataclass
class QAEntry:
    """One of the release's retrieved items for the QA call: ``kind`` episodic / chain / semantic / visual, its
    text, its time key, and (visual) the clip's item id."""

    kind: str
    text: str
    key: float
    clip: str | None = None


class MagicVideoWorkflow(MemorySearch):
    default_prompts: ClassVar[str] = "magic_video"
    #: G-L1: at most ``max_rounds`` controller calls, then the QA call (G15) — always, and no forced round.
    qa_call: ClassVar[bool] = True
    forced_round: ClassVar[bool] = False

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        if self.store.system != "magic_video":
            raise ValueError(f"method {context.method_name!r} is MAGIC-Video's own workflow: it needs "
                             f"memory_system magic_video, not {self.store.system!r}")
        config = context.method_config
        self.frames_per_clip = int(config.get("qa_frames_per_clip", 16))
        self.max_frames = int(config.get("qa_max_frames", 64))
        self.qa_fps = float(config.get("qa_fps", 1.0))
        side = config.get("qa_short_side")
        #: The QA frames' short side; None: the video's own resolution (the release's).
        self.qa_short_side = int(side) if side else None
        for key, allowed, default in (("controller_view", CONTROLLER_VIEWS, "history"),
                                      ("qa_retry_context", RETRY_CONTEXTS, "release")):
            if str(config.get(key, default)) not in allowed:
                raise ValueError(f"method {context.method_name!r}: {key} must be one of {list(allowed)}, "
                                 f"not {config.get(key)!r}")
        self.controller_view = str(config.get("controller_view", "history"))
        self.qa_retry_context = str(config.get("qa_retry_context", "release"))

    # ------------------------------------------------------------------------------------ search rounds
    @staticmethod
    def _rounds(ep: Episode) -> list[SearchRound]:
        """The question's search rounds (kept on its episode)."""
        return ep.__dict__.setdefault("magic_video_rounds", [])

    def _search(self, ep: Episode, query: str, memory_type: str | None = None) -> dict[str, Any]:
        """MemorySearch's search, kept as a round of the release's history (its query, the items it added, and
        whether the time bypass served it). Under ``controller_view: history`` a search that found nothing new is
        told by the history's ``[No new results]`` (the release's), not by a feedback line."""
        from senri.memory.magic_video.store import took_bypass

        before = len(ep.retrieved)
        record = super()._search(ep, query, memory_type)
        self._rounds(ep).append(SearchRound(len(ep.trace["rounds"]) + 1, query, took_bypass(record.get("notes", [])),
                                            list(ep.retrieved.values())[before:]))
        if self.controller_view == "history" and ep.feedback_action == "search":
            ep.feedback = []
        return record

    # ------------------------------------------------------------------------------------ rendering
    def _key(self, seconds: float | None) -> float:
        """An item's time as the release sorts by it: seconds of an HH:MM:SS clock; of a DAYn clock, the minute
        (the release's key reads DAYn HH:MM)."""
        t = float(seconds or 0.0)
        return (t // 60) * 60 if self.store.config.get("clock", "hms") == "day" else t

    def _episode_text(self, item: MemoryItem) -> str:
        clock = self.store.clock
        return f"[{clock(item.start_s)} - {clock(item.end_s)}] ({item.level}) {item.text}"

    def _clip_caption(self, item: MemoryItem) -> str:
        """A clip's caption as the release adds it when the clip's 30-s episode is not among the round's
        results: that episode's text, else the clip's own."""
        node = self.store.graph.nodes.get(episode_id(item.start_s, item.end_s, "30sec"))
        if node is not None and node.text:
            return node.display_text(self.store.clock)
        clock = self.store.clock
        span = f"[{clock(item.start_s)} - {clock(item.end_s)}]"
        return f"{span} {item.text}" if item.text else span

    def _frames_shown(self) -> bool:
        capabilities = self._capabilities
        return capabilities is not None and capabilities.images

    def _frame_plan(self, ep: Episode) -> dict[str, list[float]]:
        """Per retrieved clip (retrieval order), the times of its QA frames (G-R5, :func:`qa_frame_plan` on the
        video's frame rate and frame count, :func:`video_rate`): frame i is read at i / fps. Empty when the QA
        call will show no frames (a text-only model, or no frame rate: noted in the trace)."""
        if not self._frames_shown():
            return {}
        rate = video_rate(self.context.video)
        if rate is None:
            ep.trace["qa_no_frames"] = (f"{self.context.video.path}: no frame rate (avg_fps, r_fps, n_frames / "
                                        f"duration): the QA call goes without frames")
            return {}
        video_fps, n_frames = rate
        clips = [i for i in ep.retrieved.values() if i.kind == VISUAL and i.anchored]
        plan = qa_frame_plan([(c.start_s, c.end_s) for c in clips], video_fps, n_frames, self.qa_fps,
                             self.frames_per_clip, self.max_frames)
        return {c.item_id: [i / video_fps for i in indices] for c, indices in zip(clips, plan) if indices}

    @staticmethod
    def _bypass_episodes(r: SearchRound) -> list[MemoryItem]:
        """A time-bypass round's episodes as the release lists its time-range text: 30-s captions, then 3-min
        ones (then any coarser), each in time order."""
        return sorted((i for i in r.items if i.kind == EPISODE),
                      key=lambda i: (GRANULARITIES.index(i.level) if i.level in GRANULARITIES else 99, i.start_s))

    def _round_retrieved(self, r: SearchRound, frames: dict[str, list[float]]) -> str:
        """What one round retrieved, as the release's history writes it."""
        clock = self.store.clock
        if r.bypass:
            return "\n\n".join(f"[{minutes_clock(i.start_s)} - {minutes_clock(i.end_s)}] ({i.level})\n{i.text}"
                               for i in self._bypass_episodes(r)) or "[No results]"
        if not r.items:
            return "[No new results]"
        shown = {i.item_id for i in r.items}
        parts: list[tuple[tuple[int, float], tuple[int, float], str]] = []  # (first key, mixing key, line)
        images = 0
        for item in r.items:
            if item.kind == EPISODE:
                key = self._key(item.start_s)
                parts.append(((0, key), (0, key), f"[Retrieved episode] {self._episode_text(item)}"))
            elif item.kind == SEMANTIC:
                parts.append(((1, 0.0), (1, 0.0), f"[Retrieved semantic] {item.text}"))
            elif item.kind == VISUAL:
                key = self._key(item.start_s)
                if episode_id(item.start_s, item.end_s, "30sec") not in shown:
                    parts.append(((0, key), (0, key), f"[Retrieved episode] {self._clip_caption(item)}"))
                n = len(frames.get(item.item_id, ()))
                if n:
                    images += n
                    parts.append(((0, key + 0.5), (0, key),
                                  f"[{clock(item.start_s)}] [{n} visual frames of above episode]"))
        parts.sort(key=lambda p: p[0])  # stable: the store's order among equal times
        lines = [(p[1], p[2]) for p in parts]
        lines += [((0, self._key(self.store.chain_times.get(i.item_id, 0.0))), i.text)
                  for i in r.items if i.kind == CHAIN]
        lines.sort(key=lambda p: p[0])  # the release mixes the chain facts in by time (stable)
        text = "\n".join(line for _, line in lines)
        if images:
            text += f"\n[{images} image frames retrieved]"
        return text or "[No text results]"

    def round_history(self, ep: Episode) -> str:
        """G-L2, the release's ``_format_round_history``: each search round's number, query and what it
        retrieved (:meth:`_round_retrieved`), oldest first; ``(nothing retrieved yet)`` before the first."""
        rounds = self._rounds(ep)
        if not rounds:
            return "(nothing retrieved yet)"
        frames = self._frame_plan(ep)
        return "\n\n".join(self.prompt_set.render("round", round=r.round_no, query=r.query,
                                                  retrieved=self._round_retrieved(r, frames)) for r in rounds)

    def _memories_text(self, ep: Episode) -> str:
        if self.controller_view == "combined":
            return self.prompt_set.render("memories", memories=super()._memories_text(ep))
        return self.prompt_set.render("history", rounds=self.round_history(ep))

    def qa_entries(self, ep: Episode, frames: dict[str, list[float]]) -> list[QAEntry]:
        """The release's retrieved items, round after round: per search, its episodes and triples in the store's
        order (a clip adds its caption where its 30-s episode is not among the round's results, then its frames
        when it has any), then the round's chain facts; a bypass round's episodes (30-s, then 3-min)."""
        out: list[QAEntry] = []
        for r in self._rounds(ep):
            if r.bypass:
                out += [QAEntry("episodic", self._episode_text(i), self._key(i.start_s))
                        for i in self._bypass_episodes(r)]
                continue
            shown = {i.item_id for i in r.items}
            for item in r.items:
                if item.kind == EPISODE:
                    out.append(QAEntry("episodic", self._episode_text(item), self._key(item.start_s)))
                elif item.kind == SEMANTIC:
                    out.append(QAEntry("semantic", item.text, 0.0))
                elif item.kind == VISUAL:
                    key = self._key(item.start_s)
                    if episode_id(item.start_s, item.end_s, "30sec") not in shown:
                        out.append(QAEntry("episodic", self._clip_caption(item), key))
                    if frames.get(item.item_id):
                        out.append(QAEntry("visual", "", key + 0.5, item.item_id))
            out += [QAEntry("chain", i.text, self._key(self.store.chain_times.get(i.item_id, 0.0)))
                    for i in r.items if i.kind == CHAIN]
        return out

    def qa_parts(self, entries: Sequence[QAEntry], images: dict[str, list[bytes]]) -> list[Any]:
        """G-L3, the release's ``_render_retrieved_items_interleaved``: the entries other than triples in time
        order (stable), an episode as ``[Retrieved episode] …``, a chain fact as its tagged line, a clip's frames
        right after a ``[Visual frames of above episode]`` line, unlabelled; then ``[Semantic Knowledge]`` and the
        triples as ``[Retrieved semantic] …``. A clip none of whose frames is sent has no line."""
        parts: list[Any] = []
        lines: list[str] = []

        def flush() -> None:
            if lines:
                parts.append("\n".join(lines) + "\n")
                lines.clear()

        for entry in sorted((e for e in entries if e.kind != "semantic"), key=lambda e: e.key):
            if entry.kind == "episodic":
                lines.append(f"[Retrieved episode] {entry.text}")
            elif entry.kind == "chain":
                lines.append(entry.text)
            elif entry.kind == "visual" and images.get(entry.clip or ""):
                lines.append("[Visual frames of above episode]")
                flush()
                parts += [ImagePart(jpeg) for jpeg in images[entry.clip or ""]]
        semantic = [e for e in entries if e.kind == "semantic"]
        if semantic:
            lines += ["", "[Semantic Knowledge]", *(f"[Retrieved semantic] {e.text}" for e in semantic)]
        flush()
        return parts

    @staticmethod
    def qa_retry_text(entries: Sequence[QAEntry]) -> str:
        """The release's text-only retry context (``_render_retrieved_items_for_qa`` over its text items):
        the episodes' and triples' texts as stored, in retrieval order; chain facts are not among them."""
        return "\n".join(e.text for e in entries if e.kind in ("episodic", "semantic"))

    # ------------------------------------------------------------------------------------ the QA call
    def _qa_images(self, ep: Episode, frames: dict[str, list[float]]) -> dict[str, list[bytes]]:
        """The planned frames decoded at the video's own resolution (``qa_short_side``), as JPEG quality 90, per
        clip in retrieval order. A frame that does not decode is left out and counted ``black_frames`` (a
        decoder that fails on the file: all of them, noted in the trace)."""
        from senri.decode import encode_jpeg, read_frames

        wanted = sorted({t for times in frames.values() for t in times})
        if not wanted:
            return {}
        decoded: dict[float, bytes] = {}
        try:
            for target, frame in zip(wanted, read_frames(self.context.media.video, wanted,
                                                         short_side=self.qa_short_side)):
                if frame.image is not None:
                    decoded[target] = encode_jpeg(frame.image, quality=QA_JPEG_QUALITY)
        except Exception as exc:  # the release's frame reader returns no frames on any error
            ep.trace["qa_frames_error"] = f"{type(exc).__name__}: {exc}"
        out = {clip: [decoded[t] for t in times if t in decoded] for clip, times in frames.items()}
        lost = sum(len(times) for times in frames.values()) - sum(len(jpegs) for jpegs in out.values())
        if lost:
            ep.tally.count("black_frames", lost)
            ep.trace["qa_black_frames"] = lost
        return out

    def _answer_request(self, ep: Episode, proposed: str | None) -> ChatRequest | None:
        q = ep.question
        head, _, tail = self.prompt_set.render("answer", context=_CONTEXT_MARK,
                                               question=question_block(q.question, q.options),
                                               letters=letters_in_words(q.letters)).partition(_CONTEXT_MARK)
        retry = bool(ep.trace.get("qa_text_only"))
        frames = {} if retry else self._frame_plan(ep)
        entries = self.qa_entries(ep, frames)
        sampling = self.sampling()
        sampling["max_tokens"] = self.role_max_tokens("answer")

        def request(parts: list[Any]) -> ChatRequest:
            content: list[Any] = [head]
            for part in parts or ["(nothing retrieved)\n"]:
                if isinstance(part, str) and isinstance(content[-1], str):
                    content[-1] += part
                else:
                    content.append(part)
            tail_text = tail.lstrip("\n")
            if isinstance(content[-1], str):
                content[-1] = content[-1].rstrip("\n") + "\n\n" + tail_text
            else:
                content.append("\n\n" + tail_text)
            return ChatRequest(messages=(Message("user", tuple(content)),), purpose="answer", **sampling)

        if retry:
            if self.qa_retry_context == "release":
                text = self.qa_retry_text(entries)
                return request([text + "\n"] if text else [])
            return request(self.qa_parts(entries, {}))
        images = self._qa_images(ep, frames)
        order = [(clip, n) for clip, jpegs in images.items() for n in range(len(jpegs))]  # retrieval order

        def with_first(n: int) -> ChatRequest:
            kept: dict[str, list[bytes]] = {}
            for clip, j in order[:n]:
                kept.setdefault(clip, []).append(images[clip][j])
            return request(self.qa_parts(entries, kept))

        n = self._fit_frames(len(order), with_first)
        if n < len(order):  # sized before sending: the last retrieved clips' frames are left out first
            ep.tally.count("context_trims")
            ep.trace["qa_trim"] = {"rule": "drop the last retrieved clips' frames first", "frames_sent": n,
                                   "frames_left_out": len(order) - n}
        ep.trace["qa_images"] = n
        sent: dict[str, int] = {}
        for clip, _ in order[:n]:
            sent[clip] = sent.get(clip, 0) + 1
        ep.trace["qa_frames"] = [{"clip": [ep.retrieved[c].start_s, ep.retrieved[c].end_s],
                                  "times": [round(t, 3) for t in frames[c][:k]]} for c, k in sent.items()]
        return with_first(n)

    def _fit_frames(self, total: int, request: Callable[[int], ChatRequest]) -> int:
        """The most frames (retrieval order) whose request fits the model config's limits
        (:func:`senri.backends.budget.overflow`); all of them when the config states no limit."""
        from senri.backends.budget import overflow

        backend = self.context.backend
        if backend is None or not total or overflow(backend, request(total)) is None:
            return total
        low, high = 0, total - 1  # the largest n with request(n) fitting, by bisection
        while low < high:
            mid = (low + high + 1) // 2
            if overflow(backend, request(mid)) is None:
                low = mid
            else:
                high = mid - 1
        return low

    def _final_answer(self, ep: Episode, proposed: str | None, text: str | None) -> tuple[str | None, str | None]:
        """G-L3: the QA call; when it fails or comes back empty it is asked once more over the text memory
        only (the released code's retry, which drops the images to shorten the input). An unparsable reply is
        not retried (the release retries only a missing answer)."""
        before = len(ep.tally.errors)
        answer, reply = super()._final_answer(ep, proposed, text)
        failed = ep.tally.errors[before:]
        if (failed or not (reply or "").strip()) and not ep.trace.get("qa_text_only"):
            ep.trace["qa_text_only"] = True
            ep.trace["qa_text_only_retry"] = True
            answer, reply = super()._final_answer(ep, proposed, text)
            if answer is not None and failed:  # recovered: the first call's error is the trace's, not the row's
                del ep.tally.errors[before:before + len(failed)]
                ep.trace["qa_error_with_images"] = "; ".join(failed)
        return answer, reply
