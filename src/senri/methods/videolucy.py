"""``videolucy``: hierarchical memory with iterative backtracking (VideoLucy, Algorithm 1).

1. The coarse memory of the whole video comes from the memory stage (question-independent, shared).
2. Sparse init: the localization agent picks the ``sparse_periods`` (3) most relevant coarse periods, each
   kept with its two neighbours, or says the question needs the whole video (then all periods are kept).
3. The answering agent replies ``{confidence, answer, time_period, reason}``. While it is not confident and
   fewer than ``max_iterations`` (5) iterations ran: one combined localization+instruction call names the
   single most relevant period not yet searched and an instruction; that period is re-captioned at its own
   depth with the instruction (its entry refreshed) and split into the next depth's clips, captioned with
   the same instruction; both join the memory; the answering agent replies again. The answer call of the
   last iteration is forced (it must pick an option).

Every caption goes through the shared caption cache, so a period another question (or method, or model)
already asked about with the same instruction is not captioned again. LLM calls per question are bounded by
(2 + 2·max_iterations)·(1 + json_retries); the trace records periods, depths, instructions, every call and
the caption cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from senri.answers import question_block
from senri.backends.base import Message
from senri.captioners.base import Clip
from senri.memory import LEVELS, choose_preset, format_memory, next_level, open_service, split
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import StructuredReply, ask_json
from senri.records import LETTERS, MemoryRow, Question, read_table

LOCALIZE_SCHEMA = {
    "type": "object",
    "properties": {"periods": {"type": "array", "items": {"type": "integer"}, "maxItems": 9},
                   "whole_video": {"type": "boolean"}},
    "required": ["periods", "whole_video"],
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"confidence": {"type": "boolean"}, "answer": {"type": "string", "enum": list(LETTERS)},
                   "time_period": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["confidence", "answer", "time_period", "reason"],
}
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"period": {"type": "integer"}, "instruction": {"type": "string"}},
    "required": ["period", "instruction"],
}
LOCALIZE_FORM = '{"periods": [<numbers>], "whole_video": <true|false>}'
ANSWER_FORM = ('{"confidence": <true|false>, "answer": "<A|B|C|D>", "time_period": "<m:ss–m:ss>", '
               '"reason": "<one sentence>"}')
SEARCH_FORM = '{"period": <number>, "instruction": "<instruction>"}'
ROLE = ("You help answer a question about my long first-person video from its text memory: time periods with "
        "descriptions written by a captioner. 'I' is the camera wearer.")


@dataclass
class Entry:
    """One period of the current memory: a caption at a depth, and whether backtracking searched it."""

    row: MemoryRow
    searched: bool = False

    @property
    def key(self) -> tuple[str, float, float]:
        return self.row.level, self.row.start_s, self.row.end_s


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


class VideoLucy(Method):
    approach = "persistent_memory"
    uses_model = True
    uses_memory = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        if context.memory is None or context.media is None or context.memory_config is None:
            raise ValueError(f"method {context.method_name!r} needs the video's memory (memory stage output)")
        config = context.method_config
        self.max_iterations = int(config.get("max_iterations", 5))
        self.sparse_periods = int(config.get("sparse_periods", 3))
        self.retries = int(config.get("json_retries", 1))
        memory = read_table(context.memory, MemoryRow)
        self.coarse = [MemoryRow(**row) for row in memory.filter(pl.col("level") == "coarse").sort("start_s")
                       .select(list(MemoryRow.__dataclass_fields__)).iter_rows(named=True)]
        if not self.coarse:
            raise ValueError(f"{context.memory}: the memory holds no coarse caption")
        self.preset, self.levels = choose_preset(context.memory_config["memory"], context.video.duration_s)
        self.service = open_service(context.memory_config, context.media, context.caption_cache)

    def close(self) -> None:
        self.service.close()

    def summary(self) -> str:
        stats = self.service.stats
        return (f"captioner {self.service.name}: {stats.computed} caption(s) computed, {stats.reused} reused "
                f"from the caption cache, {stats.frames} frame(s) read, {stats.failed} failed")

    # ------------------------------------------------------------------------------------------ prompts
    def _messages(self, text: str) -> tuple[Message, ...]:
        system = self.context.method_config.get("system") or ROLE
        return (Message.text("system", system), Message.text("user", text))

    @staticmethod
    def _question(question: Question) -> str:
        return question_block(question.question, question.options)

    def _memory_and_question(self, question: Question, memory: list[Entry]) -> str:
        return f"Current memory:\n{format_memory([e.row for e in memory])}\n\n{self._question(question)}\n\n"

    def _localize(self, question: Question, tally: CallTally) -> StructuredReply:
        n = len(self.coarse)

        def valid(obj: dict) -> dict | None:
            whole = _bool(obj.get("whole_video"))
            periods = obj.get("periods")
            if whole is None or not isinstance(periods, list):
                return None
            picked = [int(p) for p in periods if isinstance(p, int) and 0 <= p < n]
            return {"whole_video": whole, "periods": list(dict.fromkeys(picked))[: self.sparse_periods]}

        text = (f"Coarse memory of the whole video:\n{format_memory(self.coarse)}\n\n{self._question(question)}\n\n"
                f"Which time periods are most relevant to this question? Give the numbers of at most "
                f"{self.sparse_periods} periods, or set whole_video to true if answering needs the whole video "
                f"(for example counting or ordering over all of it). Reply with JSON only: {LOCALIZE_FORM}")
        return ask_json(self, self._messages(text), LOCALIZE_SCHEMA, valid, LOCALIZE_FORM, "localize", tally,
                        self.retries, max_tokens=64)

    def _answer(self, question: Question, memory: list[Entry], forced: bool, tally: CallTally) -> StructuredReply:
        def valid(obj: dict) -> dict | None:
            confidence = _bool(obj.get("confidence", obj.get("Confidence")))
            answer = str(obj.get("answer", obj.get("Answer", ""))).strip().strip("().").upper()
            if confidence is None or answer not in LETTERS:
                return None
            return {"confidence": confidence, "answer": answer,
                    "time_period": str(obj.get("time_period", obj.get("Time Period", ""))),
                    "reason": str(obj.get("reason", obj.get("Reason", "")))}

        rule = ("You must choose the most likely option now, even without full support; set confidence to "
                "whether the memory objectively supports it." if forced else
                "Set confidence to true only if the memory objectively supports one option; otherwise false "
                "(more detail will be looked up).")
        text = f"{self._memory_and_question(question, memory)}{rule} Reply with JSON only: {ANSWER_FORM}"
        return ask_json(self, self._messages(text), ANSWER_SCHEMA, valid, ANSWER_FORM,
                        "answer:forced" if forced else "answer", tally, self.retries, max_tokens=160)

    def _search(self, question: Question, memory: list[Entry], tally: CallTally) -> StructuredReply:
        open_ids = [i for i, e in enumerate(memory) if not e.searched]

        def valid(obj: dict) -> dict | None:
            period, instruction = obj.get("period"), obj.get("instruction")
            if not isinstance(period, int) or period not in open_ids or not isinstance(instruction, str):
                return None
            return {"period": period, "instruction": instruction.strip() or "Describe this part in detail."}

        text = (f"{self._memory_and_question(question, memory)}The memory is not detailed enough yet. Periods not "
                f"yet searched: {open_ids}. Pick the single period among them most likely to hold the missing "
                f"detail, and write an instruction telling the captioner what to look for there (without naming "
                f"the options). Reply with JSON only: {SEARCH_FORM}")
        return ask_json(self, self._messages(text), SEARCH_SCHEMA, valid, SEARCH_FORM, "search", tally, self.retries,
                        max_tokens=96)

    # ------------------------------------------------------------------------------------------ the loop
    def _sparse_init(self, reply: StructuredReply) -> tuple[list[Entry], dict[str, Any]]:
        n = len(self.coarse)
        if reply.value is None or reply.value["whole_video"] or not reply.value["periods"]:
            why = ("localizer: whole video" if reply.value is not None and reply.value["whole_video"]
                   else "localizer picked nothing usable: whole video")
            return [Entry(row) for row in self.coarse], {"whole_video": True, "why": why}
        keep = sorted({j for i in reply.value["periods"] for j in (i - 1, i, i + 1) if 0 <= j < n})
        return [Entry(self.coarse[j]) for j in keep], {"whole_video": False, "picked": reply.value["periods"],
                                                       "kept": keep}

    def _backtrack(self, entry: Entry, instruction: str) -> list[MemoryRow]:
        """Re-caption ``entry`` at its depth with ``instruction`` and split it into the next depth's clips."""
        row = entry.row
        clips = [Clip(row.start_s, row.end_s, self.levels[row.level].fps, instruction, row.level)]
        deeper = next_level(row.level)
        if deeper is not None:
            spec = self.levels[deeper]
            clips += [Clip(s, e, spec.fps, instruction, deeper) for s, e in split(row.start_s, row.end_s, spec.clip_s)]
        return self.service.captions(clips)

    def answer(self, question: Question) -> MethodAnswer:
        tally = CallTally()
        before = self.service.stats.as_dict()
        trace: dict[str, Any] = {"preset": self.preset, "calls": []}
        located = self._localize(question, tally)
        trace["calls"].append(located.record("localize"))
        memory, trace["sparse_init"] = self._sparse_init(located)
        reply = self._answer(question, memory, self.max_iterations == 0, tally)
        trace["calls"].append(reply.record("answer"))
        iterations = []
        while not (reply.value and reply.value["confidence"]) and len(iterations) < self.max_iterations:
            if all(e.searched for e in memory):
                break
            search = self._search(question, memory, tally)
            trace["calls"].append(search.record("search"))
            if search.value is not None:
                index, instruction = search.value["period"], search.value["instruction"]
            else:  # recorded above; backtracking goes on from the earliest unsearched period
                index = next(i for i, e in enumerate(memory) if not e.searched)
                instruction = f"Describe in detail everything relevant to: {question.question.strip()}"
            target = memory[index]
            target.searched = True
            rows = self._backtrack(target, instruction)
            refreshed = [r for r in rows if (r.level, r.start_s, r.end_s) == target.key]
            if refreshed:
                target.row = refreshed[0]
            known = {e.key for e in memory}
            memory += [Entry(r) for r in rows if (r.level, r.start_s, r.end_s) not in known]
            memory.sort(key=lambda e: (e.row.start_s, LEVELS.index(e.row.level), e.row.end_s))
            forced = len(iterations) + 1 == self.max_iterations
            reply = self._answer(question, memory, forced, tally)
            trace["calls"].append(reply.record("answer"))
            iterations.append({"period": f"{target.row.level} {target.row.start_s:g}–{target.row.end_s:g}s",
                               "instruction": instruction, "captions": [f"{r.level} {r.start_s:g}–{r.end_s:g}s"
                                                                        for r in rows],
                               "confident": bool(reply.value and reply.value["confidence"])})
        confident = bool(reply.value and reply.value["confidence"])
        forced = self.max_iterations == 0 or len(iterations) == self.max_iterations
        if not confident and not forced:
            # Backtracking ran out of unsearched periods before the cap: the forced answer happens now.
            reply = self._answer(question, memory, True, tally)
            trace["calls"].append(reply.record("answer"))
            forced = True
        after = self.service.stats.as_dict()
        if self.service.captioner.is_vlm:
            tally.n_vlm_calls += after["computed"] - before["computed"]
        trace.update(iterations=iterations, final_memory=[f"{e.row.level} {e.row.start_s:g}–{e.row.end_s:g}s"
                                                          for e in memory],
                     captions={k: after[k] - before[k] for k in after}, forced=forced)
        letter = reply.value["answer"] if reply.value else None
        return MethodAnswer(letter, reply.text, letter is not None, tally, trace)

