"""``memory_search`` and ``senri_agent`` (with its ablations): a controller over the persistent memory.

``memory_search`` is the "original workflow" SENRI-Agent builds on: each round a controller LLM picks one
JSON action — ``search`` (one standalone query; the retriever returns text memories and, for each, a visual
candidate = absolute interval + description) or ``answer`` — for at most ``max_rounds`` (5) rounds, then one
forced answer round.

``senri_agent`` adds ``verify``: 1–3 target-guided visual checks (:mod:`senri.verify`), each split into
adaptive temporal cells, each cell inspected by a choice-blind verifier (it sees the check's target
context, objective and requirements and the cell's frames, never the question or options), all cells in one
batch so the backend runs them in parallel. An updater LLM keeps a bounded working memory: a note and at most
3 reports with 4 evidence frames each, copied unchanged. Ablations (Table 4): ``senri_agent_no_tg`` (a general
observation prompt instead of the structured task), ``senri_agent_no_pv`` (one verifier per check, no
cells), ``senri_agent_no_wm`` (every report and all their frames go to the controller).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from senri.answers import question_block
from senri.backends.base import ChatRequest, ImagePart, Message, Part
from senri.memory import format_memory
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import StructuredReply, ask_json
from senri.records import LETTERS, MemoryRow, Question, read_table
from senri.track import clock
from senri.verify import Check, Report, cell_times, check_cells, read_report, validate_checks

ROLE = ("You answer a four-choice question about my long first-person video ('I' is the camera wearer). You "
        "cannot see the video; you act on it through tools. Keep rationales short.")
VERIFIER_ROLE = ("You are a careful visual verifier. You see a few frames of a first-person video and report only "
                 "what is visible in them. You do not know why you are asked.")
REPORT_FORM = ('{"observation": "...", "explanation": "...", "ambiguity_reason": "...", "next_evidence_needed": "...", '
               '"evidence_moments": [<seconds>], "requirement_findings": {"R1": "..."}, '
               '"requirement_evidence_moments": {"R1": [<seconds>]}}')
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "observation": {"type": "string"}, "explanation": {"type": "string"},
        "ambiguity_reason": {"type": "string"}, "next_evidence_needed": {"type": "string"},
        "evidence_moments": {"type": "array", "items": {"type": "number"}},
        "requirement_findings": {"type": "object", "additionalProperties": {"type": "string"}},
        "requirement_evidence_moments": {"type": "object",
                                         "additionalProperties": {"type": "array", "items": {"type": "number"}}},
    },
    "required": ["observation", "evidence_moments", "requirement_findings", "requirement_evidence_moments"],
}
UPDATE_SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "selected_report_ids": {"type": "array", "items": {"type": "string"}}},
    "required": ["note", "selected_report_ids"],
}


@dataclass
class Evidence:
    """A report and the frames it cited (absolute time, JPEG), as working memory keeps them."""

    report: Report
    frames: list[tuple[float, bytes]]


@dataclass
class Episode:
    question: Question
    tally: CallTally = field(default_factory=CallTally)
    retrieved: dict[int, MemoryRow] = field(default_factory=dict)
    reports: list[Evidence] = field(default_factory=list)
    note: str = ""
    retained: list[Evidence] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=lambda: {"rounds": [], "calls": []})
    verifier_calls: int = 0
    frames_inspected: int = 0
    cells: int = 0
    checks: int = 0


class MemorySearch(Method):
    approach = "persistent_memory"
    uses_model = True
    uses_memory = True
    can_verify: ClassVar[bool] = False
    target_guided: ClassVar[bool] = True
    split_cells: ClassVar[bool] = True
    working_memory: ClassVar[bool] = True

    def __init__(self, context: RunContext) -> None:
        from senri.retrieval import MemoryIndex

        super().__init__(context)
        if context.memory is None or context.media is None:
            raise ValueError(f"method {context.method_name!r} needs the video's memory (memory stage output)")
        config = context.method_config
        self.max_rounds = int(config.get("max_rounds", 5))
        self.top_k = int(config.get("top_k", 3))
        self.retries = int(config.get("json_retries", 1))
        self.wm_reports = int(config.get("wm_reports", 3))
        self.wm_frames = int(config.get("wm_frames", 4))
        self.short_side = int(config.get("verifier_short_side", 448))
        self.parallel = bool(config.get("parallel_verifiers", True))
        table = read_table(context.memory, MemoryRow).sort("start_s", "level")
        self.memory = [MemoryRow(**row) for row in table.select(list(MemoryRow.__dataclass_fields__)).iter_rows(named=True)]
        index_dir = context.caption_cache / "index" if context.caption_cache else None
        self.index = MemoryIndex([f"{clock(r.start_s)}–{clock(r.end_s)} {r.place_labels or ''} {r.text}"
                                  for r in self.memory], index_dir, str(config.get("retriever", "embedding")))
        self.duration_s = context.video.duration_s

    # ----------------------------------------------------------------------------------------- prompts
    def _actions(self, forced: bool) -> tuple[list[str], str]:
        if forced:
            return ["answer"], ('This is the last round: answer now. Reply with JSON only: '
                                '{"action": "answer", "answer": "<A|B|C|D>"}')
        forms = ['{"action": "search", "query": "<one standalone query to the memory>"}']
        names = ["search"]
        if self.can_verify:
            names.append("verify")
            forms.append('{"action": "verify", "checks": [{"target_context": "<the occurrence to inspect>", '
                         '"objective": "<one local observation goal>", "requirements": ["<observable condition>"], '
                         '"windows": [[<start s>, <end s>]], "fps": <0.05-4>, "budget": <8-64>}]} '
                         '(1-3 small checks; windows inside the candidates\' intervals, seconds of the video)')
        names.append("answer")
        forms.append('{"action": "answer", "answer": "<A|B|C|D>"}')
        return names, "Choose one action: " + ", ".join(names) + ". Reply with JSON only, one of:\n" + "\n".join(forms)

    def _controller_messages(self, ep: Episode, round_no: int, forced: bool) -> tuple[Message, ...]:
        q = ep.question
        lines = [question_block(q.question, q.options), ""]
        rows = [ep.retrieved[i] for i in sorted(ep.retrieved)]
        if rows:
            lines += ["Text memories retrieved so far:", format_memory(rows, numbered=False), "",
                      "Visual candidates (interval in the video, description):"]
            lines += [f"- [{r.start_s:.0f}s, {r.end_s:.0f}s] {r.text[:160]}" for r in rows]
        else:
            lines.append("Nothing retrieved yet.")
        parts: list[Part] = []
        shown = ep.reports if not self.working_memory else ep.retained
        if self.can_verify:
            if self.working_memory and ep.note:
                lines += ["", f"Working memory note: {ep.note}"]
            if shown:
                lines += ["", "Verifier reports" + (" kept in working memory:" if self.working_memory else ":")]
                lines += [e.report.summary() for e in shown]
            images_ok = self.context.backend is not None and self.context.backend.capabilities.images
            if images_ok:
                parts = [ImagePart(jpeg, t) for e in shown for t, jpeg in e.frames]
        names, form = self._actions(forced)
        lines += ["", f"Round {round_no} of {self.max_rounds} (then a forced answer).", form]
        return (Message.text("system", self.context.method_config.get("system") or ROLE),
                Message("user", (*parts, "\n".join(lines))))

    def _controller(self, ep: Episode, round_no: int, forced: bool) -> StructuredReply:
        names, form = self._actions(forced)

        def valid(obj: dict) -> dict | None:
            action = str(obj.get("action", "")).strip().lower()
            if action not in names:
                return None
            if action == "answer":
                letter = str(obj.get("answer", "")).strip().strip("().").upper()
                return {"action": "answer", "answer": letter} if letter in LETTERS else None
            if action == "search":
                query = str(obj.get("query", "")).strip()
                return {"action": "search", "query": query} if query else None
            return {"action": "verify", "checks": obj.get("checks")} if isinstance(obj.get("checks"), list) else None

        schema = {"type": "object", "properties": {"action": {"enum": names}, "query": {"type": "string"},
                                                   "answer": {"enum": list(LETTERS)}, "checks": {"type": "array"}},
                  "required": ["action"]}
        return ask_json(self, self._controller_messages(ep, round_no, forced), schema, valid, form,
                        "control:forced" if forced else "control", ep.tally, self.retries, max_tokens=384)

    # ------------------------------------------------------------------------------------------ actions
    def _search(self, ep: Episode, query: str) -> dict[str, Any]:
        hits = self.index.search(query, self.top_k)
        for i, _ in hits:
            ep.retrieved.setdefault(i, self.memory[i])
        return {"query": query, "retriever": self.index.kind,
                "hits": [f"{self.memory[i].level} {self.memory[i].start_s:g}–{self.memory[i].end_s:g}s ({s:.3f})"
                         for i, s in hits]}

    def _verifier_request(self, check: Check, frames: list[ImagePart]) -> ChatRequest:
        """Choice-blind: only the check's task (or, without target guidance, a general prompt) and frames."""
        if self.target_guided:
            requirement_lines = "\n".join(f"{rid}: {text}" for rid, text in check.requirement_ids())
            task = (f"Target context (R1): {check.target_context}\nObjective: {check.objective}\n"
                    f"Requirements, in order:\n{requirement_lines}\n")
        else:
            task = "Describe what you observe in these frames.\n"
        text = (f"{task}The frames above are shown at 1 frame per second; cite moments as seconds on this clip's "
                f"own timeline (0 = the first frame). Give a finding for each requirement id you can check and "
                f"the moments that show it; leave a finding empty when the frames do not show it. "
                f"Reply with JSON only: {REPORT_FORM}")
        sampling = self.sampling()
        sampling["max_tokens"] = max(sampling["max_tokens"], 384)
        return ChatRequest(messages=(Message.text("system", VERIFIER_ROLE), Message("user", (*frames, text))),
                           json_schema=REPORT_SCHEMA if self.context.backend.capabilities.json_schema else None,
                           purpose="verify", **sampling)

    def _cells_frames(self, wanted: list[list[float]]) -> list[tuple[list[float], list[bytes]]]:
        """Frames of every cell of a verify in one pass over the video (one packet index, frames shared by
        overlapping cells decoded once): per cell, (absolute times, JPEGs)."""
        from senri.decode import encode_jpeg, read_frames

        flat = sorted({t for times in wanted for t in times})
        decoded: dict[float, tuple[float, bytes]] = {}
        for target, frame in zip(flat, read_frames(self.context.media.video, flat, short_side=self.short_side)):
            if frame.image is not None:
                decoded[target] = (float(frame.pts_s), encode_jpeg(frame.image))
        out = []
        for times in wanted:
            found = [decoded[t] for t in times if t in decoded]
            out.append(([p for p, _ in found], [j for _, j in found]))
        return out

    def _verify(self, ep: Episode, raw_checks: Any) -> dict[str, Any]:
        from senri.methods.structured import first_valid

        checks, problems = validate_checks(raw_checks, self.duration_s)
        cells = check_cells(checks, split=self.split_cells)
        ep.checks += len(checks)
        ep.cells += len(cells)
        jobs = []
        frames_per_cell = self._cells_frames([cell_times(c, checks[c.check].fps, checks[c.check].budget)
                                              for c in cells])
        for cell, (pts, jpegs) in zip(cells, frames_per_cell):
            check = checks[cell.check]
            ep.frames_inspected += len(jpegs)
            frames = [ImagePart(jpeg, float(k)) for k, jpeg in enumerate(jpegs)]  # the 1 frame/s carrier timeline
            jobs.append((cell, check, pts, jpegs, self._verifier_request(check, frames)))
        requests = [job[4] for job in jobs]
        if self.parallel:
            responses = self.chat_many(requests)
        else:
            responses = [self.chat_many([r])[0] for r in requests]
        ep.tally.add_all(requests, responses)
        ep.verifier_calls += len(requests)
        new = []
        for (cell, check, pts, jpegs, _), response in zip(jobs, responses):
            report_id = f"r{len(ep.reports) + 1}"
            obj = None if response.error else first_valid(response.text or "", lambda o: o)
            report = read_report(report_id, cell.check, check if self.target_guided else None, cell, obj, pts,
                                 response.error)
            evidence = Evidence(report, [(pts[i], jpegs[i]) for i in report.evidence_frames])
            ep.reports.append(evidence)
            new.append(evidence)
        record = {"checks": [{"target_context": c.target_context, "objective": c.objective,
                              "requirements": list(c.requirements), "windows": [list(w) for w in c.windows],
                              "fps": c.fps, "budget": c.budget, "adjustments": list(c.adjustments)} for c in checks],
                  "problems": problems, "cells": [[round(c.start_s, 3), round(c.end_s, 3)] for c in cells],
                  "reports": [e.report.summary() for e in new]}
        if self.working_memory and new:
            record["working_memory"] = self._update_memory(ep, new)
        return record

    def _update_memory(self, ep: Episode, new: list[Evidence]) -> dict[str, Any]:
        candidates = {e.report.report_id: e for e in ep.retained + new}

        def valid(obj: dict) -> dict | None:
            note, ids = obj.get("note"), obj.get("selected_report_ids")
            if not isinstance(note, str) or not isinstance(ids, list):
                return None
            return {"note": note.strip(), "ids": [str(i) for i in ids]}

        q = ep.question
        rows = [ep.retrieved[i] for i in sorted(ep.retrieved)]
        text = "\n".join([
            question_block(q.question, q.options), "",
            f"Current note: {ep.note or '(empty)'}", "",
            "Retrieved text memories (claims of the memory, not visual facts):",
            format_memory(rows, numbered=False) if rows else "(none)", "",
            "Verifier reports (visual facts, with ids):",
            *(e.report.summary() for e in candidates.values()), "",
            "Update the working memory: summarize faithfully in at most 250 words, keep qualifications, "
            "uncertainty, scope and provenance; never infer, recount, reconcile or pick an answer; attribute "
            "conflicting claims to their report ids; keep retrieval claims apart from visual facts. Select the "
            f"ids of at most {self.wm_reports} existing reports worth keeping (possibly none). Reply with JSON only: "
            '{"note": "...", "selected_report_ids": ["r1"]}',
        ])
        reply = ask_json(self, (Message.text("system", ROLE), Message.text("user", text)), UPDATE_SCHEMA, valid,
                         '{"note": "...", "selected_report_ids": [...]}', "update", ep.tally, self.retries,
                         max_tokens=512)
        ep.trace["calls"].append(reply.record("update"))
        if reply.value is None:
            return {"kept": [e.report.report_id for e in ep.retained], "failure": reply.error}
        unknown = [i for i in reply.value["ids"] if i not in candidates]
        selected = list(dict.fromkeys(i for i in reply.value["ids"] if i in candidates))[: self.wm_reports]
        ep.note = reply.value["note"]
        # Copied unchanged: the report as the verifier wrote it, its first evidence frames as decoded.
        ep.retained = [Evidence(candidates[i].report, candidates[i].frames[: self.wm_frames]) for i in selected]
        return {"note": ep.note, "kept": selected, "dropped_unknown_ids": unknown}

    # -------------------------------------------------------------------------------------------- loop
    def answer(self, question: Question) -> MethodAnswer:
        started = time.monotonic()
        ep = Episode(question)
        letter, text = None, None
        for round_no in range(1, self.max_rounds + 2):
            forced = round_no == self.max_rounds + 1
            reply = self._controller(ep, round_no, forced)
            ep.trace["calls"].append(reply.record("control"))
            step: dict[str, Any] = {"round": round_no, "forced": forced}
            if reply.value is None:
                step["action"] = "malformed"
                ep.trace["rounds"].append(step)
                text = reply.text
                continue
            action = reply.value["action"]
            step["action"] = action
            if action == "answer":
                letter, text = reply.value["answer"], reply.text
                ep.trace["rounds"].append(step)
                break
            step.update(self._search(ep, reply.value["query"]) if action == "search"
                        else self._verify(ep, reply.value["checks"]))
            ep.trace["rounds"].append(step)
        ep.trace.update(
            n_rounds=len(ep.trace["rounds"]), actions=[r["action"] for r in ep.trace["rounds"]],
            checks=ep.checks, cells=ep.cells, verifier_calls=ep.verifier_calls,
            frames_inspected=ep.frames_inspected, retriever=self.index.kind, note=ep.note,
            wall_s=round(time.monotonic() - started, 3),
            tokens=ep.tally.prompt_tokens + ep.tally.completion_tokens,
        )
        return MethodAnswer(letter, text, letter is not None, ep.tally, ep.trace)


class SenriAgent(MemorySearch):
    can_verify = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        capabilities = context.backend.capabilities if context.backend is not None else None
        if capabilities is None or not capabilities.images:
            raise ValueError(f"method {context.method_name!r}: its verifiers look at frames, but model "
                             f"{context.model_name!r} takes no images; run it with a vision-language model "
                             f"(memory_search is the text-only workflow)")


class SenriAgentNoTargetGuidance(SenriAgent):
    target_guided = False


class SenriAgentNoParallelVerifiers(SenriAgent):
    split_cells = False


class SenriAgentNoWorkingMemory(SenriAgent):
    working_memory = False

