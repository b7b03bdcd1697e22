"""What every answering method implements, and what it hands back to the answer stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from senri.records import Question, VideoInfo


@dataclass(frozen=True)
class RunContext:
    """Everything a method may read besides the question: the video's facts and its own config slice."""

    video: VideoInfo
    method_name: str
    method_config: Mapping[str, Any]
    model_name: str
    model_config: Mapping[str, Any]
    seed: int


@dataclass
class MethodAnswer:
    """A method's answer to one question. ``pred`` is a letter A–D, or None when the output did not parse."""

    pred: str | None
    raw_output: str | None
    parse_ok: bool
    n_llm_calls: int = 0
    n_vlm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Method:
    """Base class: one instance per (method, model, video) job; :meth:`answer` is called once per question.

    ``approach`` groups methods in the report tables (the papers' direct perception / evidence seeking /
    persistent memory); ``uses_model`` tells the workflow whether to run the method once per model.
    """

    approach: ClassVar[str] = "baseline"
    uses_model: ClassVar[bool] = True

    def __init__(self, context: RunContext) -> None:
        self.context = context

    def answer(self, question: Question) -> MethodAnswer:
        raise NotImplementedError
