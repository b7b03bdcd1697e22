"""M3-Agent's controller (shared/spec/omni_memory.md M-L1..M-L4, MP3..MP6, K-11).

Each round the controller (M3-Agent-Control, a Qwen3-32B with thinking) replies; the text after the last
``</think>`` is matched by ``Action: \\[(.*)\\].*Content: (.*)`` (DOTALL, greedy: it anchors on the last "]" and the
last "Content: "). Action exactly "Answer" ends the question with the content as it stands (unstripped, to the
end); anything else is a search for the content (none: an empty search). The search result goes back as the next
user turn, "Searched knowledge: " + the JSON result, plus MP6's note when it is empty. The instruction (MP4) is
appended to the last user turn every round, the forced-answer note (MP5) in the last; the assistant's raw reply,
thinking included, stays in the history. Five rounds; a question whose last reply is no Answer has no response.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from typing import Any, Callable

from senri.memory.m3_agent.graph import MemoryGraph
from senri.memory.m3_agent.retrieval import NAME_SEARCH_MARK, Embed, name_search, search

ACTION = re.compile(r"Action: \[(.*)\].*Content: (.*)", re.DOTALL)
SEARCH_PREFIX = "Searched knowledge: "
TOTAL_ROUNDS = 5


@dataclass(frozen=True)
class Action:
    """A parsed controller reply: ``answer`` (the response) or a search (``query`` None: nothing to search)."""

    answer: str | None
    query: str | None


def parse_reply(reply: str) -> Action:
    """M-L2 / K-11: the regex on the text after the last ``</think>`` (a reply cut inside its thinking has none
    after it, so the whole text is matched and normally holds no "Action:": an empty search)."""
    match = ACTION.search(reply.split("</think>")[-1])
    if match is None:
        return Action(None, None)
    if match.group(1) == "Answer":
        return Action(match.group(2), None)
    return Action(None, match.group(2) or None)


def search_turn(graph_loader: Callable[[], MemoryGraph], query: str | None, embed: Embed, held_clips: list[int],
                empty_note: str, before_clip: int | None = None) -> tuple[str, dict[str, list[str]]]:
    """M-L3: the next user message for a search (and the result). The graph is loaded afresh (truncated to
    ``before_clip`` without refresh, then its equivalences refreshed: M-R1); a query holding "character id" is
    a name search, anything else a normal one; no query searches nothing."""
    result: dict[str, list[str]] = {}
    if query:
        graph = graph_loader()
        if before_clip is not None:
            graph.truncate_to_clip(before_clip, refresh=False)
        graph.refresh_equivalences()
        if NAME_SEARCH_MARK in query:
            result, _ = name_search(graph, query, embed, before_clip)
        else:
            result, _ = search(graph, query, embed, held_clips, before_clip)
    message = SEARCH_PREFIX + json.dumps(result, ensure_ascii=False).encode("utf-8", "ignore").decode("utf-8")
    if not result:
        message += empty_note  # MP6 as the release appends it (its own leading newline included)
    return message, result


@dataclass(frozen=True)
class ControlPrompts:
    """MP3 (a ``$question`` template), MP4, MP5 and MP6's note, as :func:`senri.release_prompts.load_release_texts`
    reads them from the user's release checkout (family ``m3_agent``): never shipped; tests pass their own."""

    system: str
    instruction: str
    last_round: str
    empty_note: str


@dataclass
class ControlTrace:
    """One question's loop: the conversation, each round's parsed action and search result, the response."""

    conversation: list[dict[str, str]] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    response: str | None = None
    held_clips: list[int] = field(default_factory=list)


def run_controller(question: str, generate: Callable[[list[dict[str, str]]], str],
                   graph_loader: Callable[[], MemoryGraph], embed: Embed, prompts: ControlPrompts,
                   rounds: int = TOTAL_ROUNDS, before_clip: int | None = None) -> ControlTrace:
    """M-L1..M-L4 for one question. ``generate`` takes the conversation (each message's content as the model
    sees it) and returns the raw reply text. Stops at the first Answer or after ``rounds`` generations; the
    search after the last reply is not run (the release runs it and never reads it)."""
    system = string.Template(prompts.system).substitute(question=question)
    trace = ControlTrace(conversation=[{"role": "system", "content": system},
                                       {"role": "user", "content": SEARCH_PREFIX + "{}"}])
    for index in range(rounds):
        # Appended to the last (user) message itself: the history keeps every round's instruction (ctl 168-175).
        trace.conversation[-1]["content"] += prompts.instruction
        if index == rounds - 1:
            trace.conversation[-1]["content"] += prompts.last_round
        reply = generate([dict(m) for m in trace.conversation])
        trace.conversation.append({"role": "assistant", "content": reply})
        action = parse_reply(reply)
        entry: dict[str, Any] = {"round": index + 1, "answer": action.answer, "query": action.query}
        trace.rounds.append(entry)
        if action.answer is not None:
            trace.response = action.answer
            break
        if index == rounds - 1:
            break
        message, result = search_turn(graph_loader, action.query, embed, trace.held_clips, prompts.empty_note,
                                      before_clip)
        entry["result_clips"] = sorted(result)
        trace.conversation.append({"role": "user", "content": message})
    return trace
