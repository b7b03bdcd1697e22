"""``senri_agent_text_only``: SENRI-Agent for a text-only model, labelled as such (never reported as SENRI-Agent,
whose verifiers look at frames).

Everything but the verifiers' input is SENRI-Agent's: the controller, the memory system it searches, the
target-guided checks split into adaptive temporal cells at the check's rate f and budget B, the choice-blind
verifiers (the check's task only, never the question or the options), the working memory and the forced answer
round. Where SENRI-Agent decodes a cell's sampled moments into frames, this variant reads, at each sampled
moment, the video's **text memory** in force there — the caption memory (``memory.captioner``: the perception
captioner's on-screen text with when it was read, place labels, the ego-motion track's turns and pauses), its
finest level that covers the moment — and gives the verifier those texts on the same offset timeline
(moment k at offset_sec k), so its citations map back to source time exactly as a frame verifier's do.
Nothing is decoded and a report cites no evidence frames. It gives CPU evidence of what target-guided,
choice-blind verification adds over a memory system's original workflow on the same store (issue 40); the
paper's Table 3 is SENRI-Agent on a vision-language model.
"""

from __future__ import annotations

import bisect
from typing import Any, Mapping

from senri.backends.base import Capabilities, Part
from senri.methods.agent import SenriAgent
from senri.methods.base import MethodAnswer, RunContext, caption_memory
from senri.records import Question
from senri.verify import Report

#: Caption levels from the finest to the coarsest: a moment reads the finest level that covers it.
LEVELS_FINEST_FIRST = ("ultra_fine", "fine", "coarse")


def _finest_first(level: str) -> tuple[int, str]:
    """Sort key of a caption level: the known levels finest first, any other after them."""
    return (LEVELS_FINEST_FIRST.index(level) if level in LEVELS_FINEST_FIRST else len(LEVELS_FINEST_FIRST), level)


class SenriAgentTextOnly(SenriAgent):
    reads_frames = False
    verifier_system_role = "verifier_text_system"
    verifier_reply_role = "verifier_text_reply"
    sample_unit = "moment"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        rows, self.captioner = caption_memory(context)
        #: Per level, finest first: its captions with text as (start, end, text), in time order, their starts
        #: (for bisection) and the longest period (how far back a caption covering a moment can start).
        self.levels: list[tuple[str, list[tuple[float, float, str]], list[float], float]] = []
        for level in sorted({row["level"] for row in rows}, key=_finest_first):
            periods = [(row["start_s"], row["end_s"], row["text"]) for row in rows
                       if row["level"] == level and str(row["text"] or "").strip()]
            if periods:
                self.levels.append((level, periods, [a for a, _, _ in periods], max(b - a for a, b, _ in periods)))
        if not self.levels:
            raise ValueError(f"{context.memory}: the caption memory holds no text for the verifiers to read")

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str,
                            capabilities: Capabilities | None,
                            roles: Mapping[str, tuple[str, Capabilities | None]] | None = None) -> list[str]:
        """Every role reads text: any model will do."""
        return []

    def text_at(self, t: float) -> tuple[str, float, float, str] | None:
        """(level, start, end, text) of the finest caption whose period [start, end) holds ``t`` (the last
        period also holds its end, so the video's last moment is covered), the earliest-starting one where a
        level's periods overlap; None when no caption covers it. Bisected: a verify asks this for every sampled
        moment of up to 600 cells."""
        for level, periods, starts, longest in self.levels:
            covering = None
            j = bisect.bisect_right(starts, t) - 1  # the last period starting at or before t
            while j >= 0 and starts[j] >= t - longest:  # earlier ones end before t
                start, end, text = periods[j]
                if start <= t < end or (t == end and end >= self.duration_s):
                    covering = (level, start, end, text)
                j -= 1
            if covering is not None:
                return covering
        return None

    def _cells_frames(self, wanted: list[list[float]]) -> list[tuple[list[float], list[Any]]]:
        """Per cell, its sampled moments (source seconds) and the text memory in force at each: nothing is
        decoded, so every sampled moment is kept (the moments are strictly increasing, as cell_times gives)."""
        return [(list(times), [self.text_at(t) for t in times]) for times in wanted]

    def _as_video(self) -> bool:
        return False

    def _verifier_input_name(self) -> str:
        return "text"

    def _verifier_timeline(self, n_samples: int, as_video: bool) -> str:
        return self.prompt_set.render("verifier_text", n_moments=n_samples, last_offset=n_samples - 1)

    def _verifier_visual(self, samples: list[Any], as_video: bool, times: list[float]) -> list[Part]:
        """The moments' texts as lines on the offset timeline; consecutive moments that read the same caption
        share one line (``offset_sec 0–7``), with the caption's own level and source period."""
        lines: list[str] = []
        k = 0
        while k < len(samples):
            last = k
            while last + 1 < len(samples) and samples[last + 1] == samples[k]:
                last += 1
            offsets = f"{k}" if last == k else f"{k}–{last}"
            entry = samples[k]
            if entry is None:
                lines.append(f"offset_sec {offsets}: (no text memory covers these moments)")
            else:
                level, start, end, text = entry
                lines.append(f"offset_sec {offsets}: [{level} caption of {start:g}–{end:g} s] {' '.join(text.split())}")
            k = last + 1
        return ["Text memory at the supplied moments:\n" + "\n".join(lines)]

    def _evidence_of(self, report: Report, pts: list[float], samples: list[Any]) -> list[tuple[float, bytes]]:
        return []  # no frames: the report's citations keep their source times

    def answer(self, question: Question) -> MethodAnswer:
        answer = super().answer(question)
        answer.trace.update(variant="text_only", memory_captioner=self.captioner)
        return answer

    def summary(self) -> str | None:
        return f"{super().summary()}; text-only verifiers over the {self.captioner} caption memory"
