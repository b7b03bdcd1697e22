"""``memory_search`` and ``senri_agent`` (with its ablations): a controller over the persistent memory.

``memory_search`` is the "original workflow" SENRI-Agent builds on: each round a controller LLM picks one
JSON action — ``search`` (one standalone query; the retriever returns text memories and, for each, a visual
candidate = absolute interval + description) or ``answer`` — for at most ``max_rounds`` (5) rounds, then one
forced answer round. Every action carries a short ``rationale`` (kept in the trace).

``senri_agent`` adds ``verify``: 1–3 target-guided visual checks (:mod:`senri.verify`), each split into
adaptive temporal cells (at most ``max_cells_per_round`` per verify, a safety cap recorded in the trace),
each cell inspected by a choice-blind verifier: it sees the check's target context, objective and
requirements and the cell's frames — as a 1 frame/s carrier video where the backend takes video, as images
labelled with their carrier offsets otherwise — and their timestamps (each sampled span's source interval and
sampling interval, for orientation), never the question or options. Its citations (``offset_sec``
on the carrier) are mapped back to source time. All cells go in one batch (the backend runs them in
parallel); malformed replies get one repair, batched too. Problems of a verify (dropped windows, clamps,
caps, refused checks) are shown to the controller in the next round. An updater LLM, under its own system
prompt, keeps a bounded working memory: a note and at most 3 reports with 4 evidence frames each, copied
unchanged, chosen from the retained reports plus the latest batch.

Ablations (Table 4): ``senri_agent_no_tg`` (a general observation prompt under its own system prompt, no
requirement list, summaries without R-ids),
``senri_agent_no_pv`` (one verifier per check over all its windows, at most B frames at rate f),
``senri_agent_no_wm`` (no updater; every report and all its evidence frames go to the controller).

Every prompt is a template file of the method's family (``config/prompts/senri_agent`` or
``config/prompts/memory_search``; ``prompts_dir`` overlays the user's own), and every role's token limit
comes from the method config's ``max_tokens`` map.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from senri.answers import question_block
from senri.backends.base import ChatRequest, ChatResponse, ImagePart, Message, Part, VideoPart
from senri.memory import caption_health, described, format_memory
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import StructuredReply, ask_json, ask_json_many
from senri.records import LETTERS, MemoryRow, Question, read_table
from senri.track import clock
from senri.verify import (Cell, Check, Report, cap_cells, cell_times, check_cells, read_report, source_timing,
                          validate_checks)

CITATION = {"type": "object", "properties": {"offset_sec": {"type": "number"}, "note": {"type": "string"}},
            "required": ["offset_sec"]}
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "observation": {"type": "string"}, "explanation": {"type": "string"},
        "ambiguity_reason": {"type": "string"}, "next_evidence_needed": {"type": "string"},
        "evidence_moments": {"type": "array", "items": CITATION},
        "requirement_findings": {"type": "object", "additionalProperties": {"type": "string"}},
        "requirement_evidence_moments": {"type": "object",
                                         "additionalProperties": {"type": "array", "items": CITATION}},
    },
    "required": ["observation", "explanation", "ambiguity_reason", "next_evidence_needed", "evidence_moments",
                 "requirement_findings", "requirement_evidence_moments"],
}
UPDATE_SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "selected_report_ids": {"type": "array", "items": {"type": "string"}}},
    "required": ["note", "selected_report_ids"],
}
VERIFIER_INPUTS = ("auto", "video", "images")
#: The verifier's reply form, quoted by its repair turn (repair.txt).
REPORT_FORM = ('{"observation": "...", "explanation": "...", "ambiguity_reason": "...", "next_evidence_needed": '
               '"...", "evidence_moments": [...], "requirement_findings": {...}, '
               '"requirement_evidence_moments": {...}}')
UPDATE_FORM = '{"note": "...", "selected_report_ids": [...]}'


@dataclass
class Evidence:
    """A report and the frames it cited (absolute time, JPEG), as working memory keeps them."""

    report: Report
    frames: list[tuple[float, bytes]]


@dataclass
class Episode:
    question: Question
    tally: CallTally = field(default_factory=CallTally)
    retrieved: dict[int, MemoryRow] = field(default_factory=dict)   # in retrieval order (an append-only prompt)
    reports: list[Evidence] = field(default_factory=list)
    note: str = ""
    retained: list[Evidence] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)               # problems of the last action, shown once
    feedback_action: str = "verify"
    trace: dict[str, Any] = field(default_factory=lambda: {"rounds": [], "calls": []})
    verifier_calls: int = 0
    frames_inspected: int = 0
    cells: int = 0
    checks: int = 0


def _report_valid(obj: dict) -> dict | None:
    """A verifier reply is usable when it is an object with an observation or requirement findings."""
    return obj if isinstance(obj, dict) and ("observation" in obj or "requirement_findings" in obj) else None


class MemorySearch(Method):
    approach = "persistent_memory"
    uses_model = True
    uses_memory = True
    can_verify: ClassVar[bool] = False
    target_guided: ClassVar[bool] = True
    split_cells: ClassVar[bool] = True
    working_memory: ClassVar[bool] = True
    default_prompts: ClassVar[str] = "memory_search"

    def __init__(self, context: RunContext) -> None:
        from senri.prompts import prompt_set
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
        self.max_cells = int(config.get("max_cells_per_round", 64))
        self.updater_images = bool(config.get("updater_images", True))
        self.verifier_input = str(config.get("verifier_input", "auto"))
        if self.verifier_input not in VERIFIER_INPUTS:
            raise ValueError(f"method {context.method_name!r}: verifier_input must be one of {VERIFIER_INPUTS}")
        self.prompt_set = prompt_set(config.get("prompts") or self.default_prompts, config.get("prompts_dir"))
        table = read_table(context.memory, MemoryRow).sort("start_s", "level")
        rows = [MemoryRow(**row) for row in table.select(list(MemoryRow.__dataclass_fields__)).iter_rows(named=True)]
        # A failed caption has nothing to find: it is not indexed, and every question books it (failed_captions).
        self.memory = [r for r in rows if described(r)]
        self.failed_memories = caption_health(rows)[1]
        index_dir = context.caption_cache / "index" if context.caption_cache else None
        self.index = MemoryIndex([f"{clock(r.start_s)}–{clock(r.end_s)} {r.place_labels or ''} {r.text}"
                                  for r in self.memory], index_dir, str(config.get("retriever", "embedding")))
        self.duration_s = context.video.duration_s

    @property
    def _capabilities(self):
        backend = self.context.backend
        return backend.capabilities if backend is not None else None

    # ----------------------------------------------------------------------------------------- context
    def _memories_text(self, ep: Episode) -> str:
        rows = list(ep.retrieved.values())
        return format_memory(rows, numbered=False) if rows else "(nothing retrieved yet)"

    def _candidates_text(self, ep: Episode) -> str:
        if not ep.retrieved:
            return "(none yet)"
        return "\n".join(f"- c{n} [{r.start_s:.0f}, {r.end_s:.0f}] s, valid_absolute_sec [0, {self.duration_s:.0f}]: "
                         f"{r.text[:160]}" for n, r in enumerate(ep.retrieved.values(), 1))

    def _shown_reports(self, ep: Episode) -> list[Evidence]:
        return ep.retained if self.working_memory else ep.reports

    def _working_memory_text(self, ep: Episode) -> str:
        shown = self._shown_reports(ep)
        if not self.can_verify or not (shown or ep.note):
            return ""
        lines = [""]
        if self.working_memory:
            lines.append(f"Working memory note: {ep.note or '(empty)'}")
            lines.append("Verifier reports kept in working memory (their evidence frames are shown above):"
                         if shown else "No verifier report kept yet.")
        else:
            lines.append("All verifier reports so far (their evidence frames are shown above):"
                         if shown else "No verifier report yet.")
        lines += [e.report.summary() for e in shown]
        return "\n".join(lines) + "\n"

    def _evidence_parts(self, evidence: list[Evidence], per_report: int | None = None) -> list[Part]:
        """Evidence frames as images labelled with their source time, each report's frames after its id."""
        capabilities = self._capabilities
        if capabilities is None or not capabilities.images:
            return []
        parts: list[Part] = []
        for e in evidence:
            frames = e.frames if per_report is None else e.frames[:per_report]
            if frames:
                parts.append(f"Evidence frames of {e.report.report_id}:")
                parts += [ImagePart(jpeg, t) for t, jpeg in frames]
        return parts

    # ----------------------------------------------------------------------------------------- controller
    def _actions_text(self, forced: bool, round_no: int = 0) -> tuple[list[str], str]:
        """The allowed actions and their form; the round line lives here, so the forced round is named the
        final answer round (never "round 6 of 5")."""
        if forced:
            return ["answer"], self.prompt_set.render("actions_forced", max_rounds=self.max_rounds)
        names = ["search", "verify", "answer"] if self.can_verify else ["search", "answer"]
        return names, self.prompt_set.render("actions", round=round_no, max_rounds=self.max_rounds)

    def _controller_messages(self, ep: Episode, round_no: int, forced: bool) -> tuple[Message, ...]:
        _, actions = self._actions_text(forced, round_no)
        feedback = ""
        if ep.feedback:
            feedback = self.prompt_set.render("feedback", action=ep.feedback_action,
                                              problems="\n".join(f"- {p}" for p in ep.feedback))
        q = ep.question
        text = self.prompt_set.render(
            "controller", duration_s=f"{self.duration_s:.0f}", memories=self._memories_text(ep),
            candidates=self._candidates_text(ep), working_memory=self._working_memory_text(ep),
            question=question_block(q.question, q.options), feedback=feedback, actions=actions)
        parts = self._evidence_parts(self._shown_reports(ep)) if self.can_verify else []
        return (Message.text("system", self.prompt_set.render("controller_system")),
                Message("user", (*parts, text)))

    def _controller(self, ep: Episode, round_no: int, forced: bool) -> StructuredReply:
        names, form = self._actions_text(forced, round_no)

        def valid(obj: dict) -> dict | None:
            action = str(obj.get("action", "")).strip().lower()
            if action not in names:
                return None
            rationale = str(obj.get("rationale") or "").strip()
            if action == "answer":
                letter = str(obj.get("answer", "")).strip().strip("().").upper()
                return {"action": "answer", "answer": letter, "rationale": rationale} if letter in LETTERS else None
            if action == "search":
                query = str(obj.get("query", "")).strip()
                return {"action": "search", "query": query, "rationale": rationale} if query else None
            checks = obj.get("checks")
            return {"action": "verify", "checks": checks, "rationale": rationale} if isinstance(checks, list) else None

        schema = {"type": "object", "properties": {"action": {"enum": names}, "rationale": {"type": "string"},
                                                   "query": {"type": "string"}, "answer": {"enum": list(LETTERS)},
                                                   "checks": {"type": "array"}},
                  "required": ["action", "rationale"]}
        return ask_json(self, self._controller_messages(ep, round_no, forced), schema, valid,
                        self.prompt_set.render("repair", form=form), "control:forced" if forced else "control",
                        ep.tally, self.retries, max_tokens=self.role_max_tokens("controller"))

    # ------------------------------------------------------------------------------------------ actions
    def _search(self, ep: Episode, query: str) -> dict[str, Any]:
        """The top ``top_k`` memories minus those already retrieved (M3-Agent's search over its memory graph
        drops the clips it already holds). When nothing new comes back — a repeated query — the controller
        hears so in the next round instead of seeing an unchanged prompt and asking the same again."""
        hits = self.index.search(query, self.top_k)
        new = [i for i, _ in hits if i not in ep.retrieved]
        for i in new:
            ep.retrieved[i] = self.memory[i]
        ep.tally.count("truncated_captions", caption_health([self.memory[i] for i in new])[0])
        if not new:
            ep.feedback = [self.prompt_set.render("search_nothing_new", query=query, top_k=self.top_k).strip()]
            ep.feedback_action = "search"
        return {"query": query, "retriever": self.index.kind, "new": len(new),
                "hits": [f"{self.memory[i].level} {self.memory[i].start_s:g}–{self.memory[i].end_s:g}s ({s:.3f})"
                         for i, s in hits]}

    def _as_video(self) -> bool:
        capabilities = self._capabilities
        takes_video = capabilities is not None and capabilities.video
        if self.verifier_input == "video" and not takes_video:
            raise ValueError(f"method {self.context.method_name!r}: verifier_input video, but model "
                             f"{self.context.model_name!r} takes no video")
        return self.verifier_input == "video" or (self.verifier_input == "auto" and takes_video)

    def _verifier_visual(self, jpegs: list[bytes], as_video: bool, times: list[float]) -> list[Part]:
        """The cell's frames as the verifier sees them: a 1 frame/s carrier (frame k at offset k s, the
        timeline its citations use; the frames' source ``times`` travel with it) for backends that take video,
        else images labelled with the same carrier offsets."""
        if not as_video:
            return [ImagePart(jpeg, float(k)) for k, jpeg in enumerate(jpegs)]
        from senri.decode import carrier_frame_count, carrier_from_jpegs

        mp4 = carrier_from_jpegs(jpegs, fps=1.0)
        count = carrier_frame_count(mp4)
        if count != len(jpegs):  # the paper's carrier check: exactly the sampled frames, nothing dropped or added
            raise RuntimeError(f"verifier carrier holds {count} frames, {len(jpegs)} were sampled")
        return [VideoPart(mp4, 1.0, tuple(times), timeline="carrier")]

    def _verifier_request(self, check: Check, cell: Cell, times: list[float], jpegs: list[bytes]) -> ChatRequest:
        """Choice-blind: only the check's task (or, without target guidance, a general prompt under its own
        system prompt, with no requirement list), the frames and their timestamps: the carrier timeline the
        citations use, and where on the source timeline the frames were sampled."""
        if self.target_guided:
            ids = check.requirement_ids()
            listed = "\n".join(f"{rid}: {text}" for rid, text in ids[1:]) or "(none beyond R1)"
            task = self.prompt_set.render("verifier", objective=check.objective,
                                          target_context=check.target_context, requirements=listed)
        else:
            ids = []
            task = self.prompt_set.render("verifier_general")
        as_video = self._as_video()
        timeline = self.prompt_set.render("verifier_video" if as_video else "verifier_images", n_frames=len(jpegs),
                                          last_offset=len(jpegs) - 1)
        reply = self.prompt_set.render(
            "verifier_reply", timeline=timeline, source_timing=source_timing(cell, times, check.fps),
            finding_form=", ".join(f'"{rid}": "<finding>"' for rid, _ in ids),
            moment_form=", ".join(f'"{rid}": [{{"offset_sec": <seconds>}}]' for rid, _ in ids))
        sampling = self.sampling()
        sampling["max_tokens"] = self.role_max_tokens("verifier")
        capabilities = self._capabilities
        return ChatRequest(
            messages=(Message.text("system", self.prompt_set.render(
                          "verifier_system" if self.target_guided else "verifier_system_general")),
                      Message("user", (task + "\n", *self._verifier_visual(jpegs, as_video, times), "\n" + reply))),
            json_schema=REPORT_SCHEMA if capabilities is not None and capabilities.json_schema else None,
            purpose="verify", **sampling)

    def _send(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        if self.parallel:
            return self.chat_many(requests)
        return [self.chat_many([r])[0] for r in requests]

    def _ask_verifiers(self, ep: Episode, requests: list[ChatRequest]) -> list[StructuredReply]:
        """All verifier calls of a verify in one batch (sent the way ``parallel`` says); every malformed reply
        (a reply cut at the token limit included) gets up to ``json_retries`` repair turns, the repairs batched
        too."""
        return ask_json_many(self, requests, _report_valid, self.prompt_set.render("repair", form=REPORT_FORM),
                             ep.tally, self.retries, send=self._send)

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
            pts: list[float] = []
            jpegs: list[bytes] = []
            for t in times:
                # Two targets the decoder resolves to one frame would repeat it on the carrier: kept once, so a
                # cell's frames are strictly increasing in source time.
                if t in decoded and (not pts or decoded[t][0] > pts[-1]):
                    pts.append(decoded[t][0])
                    jpegs.append(decoded[t][1])
            out.append((pts, jpegs))
        return out

    def _verify(self, ep: Episode, raw_checks: Any) -> dict[str, Any]:
        q = ep.question
        checks, problems = validate_checks(raw_checks, self.duration_s, forbidden=[q.question, *q.options])
        all_cells = check_cells(checks, split=self.split_cells)
        cells, caps = cap_cells(all_cells, self.max_cells)
        ep.checks += len(checks)
        ep.cells += len(cells)
        frames_per_cell = self._cells_frames([cell_times(c, checks[c.check].fps, checks[c.check].budget)
                                              for c in cells])
        jobs: list[tuple[Cell, Check, list[float], list[bytes]]] = []
        empty = 0
        for cell, (pts, jpegs) in zip(cells, frames_per_cell):
            if not jpegs:
                empty += 1
                continue
            jobs.append((cell, checks[cell.check], pts, jpegs))
            ep.frames_inspected += len(jpegs)
        # Carriers are H.264-encoded per cell; encoding runs outside the GIL, so threads overlap it (3x on 2 cores).
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(jobs), os.cpu_count() or 1))) as pool:
            requests = list(pool.map(lambda job: self._verifier_request(job[1], job[0], job[2], job[3]), jobs))
        results = self._ask_verifiers(ep, requests) if requests else []
        ep.verifier_calls += len(requests)
        new, failures, reasoning = [], [], {}
        for (cell, check, pts, jpegs), reply in zip(jobs, results):
            report_id = f"r{len(ep.reports) + 1}"
            report = read_report(report_id, cell.check, check, cell, reply.value, pts, reply.error,
                                 guided=self.target_guided)
            evidence = Evidence(report, [(pts[i], jpegs[i]) for i in report.evidence_frames])
            ep.reports.append(evidence)
            new.append(evidence)
            if reply.error:
                failures.append(f"{report_id}: {reply.error}"
                                + (f" after {reply.attempts} attempts" if reply.attempts > 1 else ""))
            if reply.reasoning:
                reasoning[report_id] = reply.reasoning
        # What the controller hears about its action in the next round.
        ep.feedback_action = "verify"
        feedback = list(problems)
        for check in checks:
            feedback += [f"check {check.position}: {a}" for a in check.adjustments if not a.startswith("B from preset")]
        feedback += [f"check {checks[c['check']].position}: {c['cells']} cells, capped to {c['kept']} spread evenly "
                     f"(at most {self.max_cells} verifier cells per verify)" for c in caps]
        if empty:
            feedback.append(f"{empty} cell(s) had no decodable frame and were skipped")
        feedback += [f"verifier {f}" for f in failures]
        ep.feedback = feedback
        record: dict[str, Any] = {
            "checks": [{"target_context": c.target_context, "objective": c.objective,
                        "requirements": list(c.requirements), "windows": [list(w) for w in c.windows],
                        "candidate_refs": list(c.candidate_refs), "fps": c.fps, "budget": c.budget,
                        "adjustments": list(c.adjustments)} for c in checks],
            "problems": problems, "cell_caps": caps, "cells_asked": len(all_cells),
            "cells": [[round(c.start_s, 3), round(c.end_s, 3)] for c in cells],
            "verifier_input": ("video" if self._as_video() else "images") if requests else None,
            "repairs": sum(1 for r in results if r.attempts > 1), "failures": failures,
            "reports": [e.report.summary() for e in new], "feedback": feedback}
        if reasoning:
            record["verifier_reasoning"] = reasoning
        if self.working_memory and new:
            record["working_memory"] = self._update_memory(ep, new)
        return record

    def _update_memory(self, ep: Episode, new: list[Evidence]) -> dict[str, Any]:
        pool = {e.report.report_id: e for e in ep.retained + new}

        def valid(obj: dict) -> dict | None:
            note, ids = obj.get("note"), obj.get("selected_report_ids")
            if not isinstance(note, str) or not isinstance(ids, list):
                return None
            return {"note": note.strip(), "ids": [str(i).strip() for i in ids]}

        q = ep.question
        text = self.prompt_set.render(
            "updater", memories=self._memories_text(ep), question=question_block(q.question, q.options),
            note=ep.note or "(empty)", reports="\n".join(e.report.summary() for e in pool.values()),
            max_reports=self.wm_reports)
        parts = self._evidence_parts(list(pool.values()), self.wm_frames) if self.updater_images else []
        messages = (Message.text("system", self.prompt_set.render("updater_system")), Message("user", (*parts, text)))
        reply = ask_json(self, messages, UPDATE_SCHEMA, valid, self.prompt_set.render("repair", form=UPDATE_FORM),
                         "update", ep.tally, self.retries, max_tokens=self.role_max_tokens("updater"))
        ep.trace["calls"].append(reply.record("update"))
        if reply.value is None:
            return {"kept": [e.report.report_id for e in ep.retained], "failure": reply.error}
        unknown = [i for i in reply.value["ids"] if i not in pool]
        picked = list(dict.fromkeys(i for i in reply.value["ids"] if i in pool))
        selected, truncated = picked[: self.wm_reports], picked[self.wm_reports:]
        ep.note = reply.value["note"]
        # Copied unchanged: the report as the verifier wrote it, its first evidence frames as decoded.
        ep.retained = [Evidence(pool[i].report, pool[i].frames[: self.wm_frames]) for i in selected]
        return {"note": ep.note, "kept": selected, "truncated": truncated, "dropped_unknown_ids": unknown}

    # -------------------------------------------------------------------------------------------- loop
    def answer(self, question: Question) -> MethodAnswer:
        started = time.monotonic()
        ep = Episode(question)
        ep.tally.count("failed_captions", self.failed_memories)
        letter, text = None, None
        for round_no in range(1, self.max_rounds + 2):
            forced = round_no == self.max_rounds + 1
            reply = self._controller(ep, round_no, forced)
            ep.trace["calls"].append(reply.record("control"))
            step: dict[str, Any] = {"round": round_no, "forced": forced}
            if ep.feedback:
                step["feedback_shown"] = list(ep.feedback)
                ep.feedback = []
            if reply.value is None:
                step["action"] = "malformed"
                ep.trace["rounds"].append(step)
                text = reply.text
                continue
            action = reply.value["action"]
            step["action"] = action
            if reply.value.get("rationale"):
                step["rationale"] = reply.value["rationale"]
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
    default_prompts = "senri_agent"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        capabilities = context.backend.capabilities if context.backend is not None else None
        if capabilities is None or not (capabilities.images or capabilities.video):
            raise ValueError(f"method {context.method_name!r}: its verifiers look at frames, but model "
                             f"{context.model_name!r} takes neither images nor video; run it with a "
                             f"vision-language model (memory_search is the text-only workflow)")
        if not self._as_video() and not capabilities.images:
            raise ValueError(f"method {context.method_name!r}: verifier_input images, but model "
                             f"{context.model_name!r} takes no images")


class SenriAgentNoTargetGuidance(SenriAgent):
    target_guided = False


class SenriAgentNoParallelVerifiers(SenriAgent):
    split_cells = False


class SenriAgentNoWorkingMemory(SenriAgent):
    working_memory = False
