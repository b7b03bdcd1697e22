"""WorldMM's multiscale windows (W-C3) and its controller's reply reader (W-L1), computed by the release's own
``_summarize_level`` and ``WorldMemory._parse_reasoning_response`` on Hypothesis-drawn inputs.

    python bench/release_cases/worldmm.py [--src /work/wt/_src/worldmm] [--n 400]

Needs a checkout of github wgcyeo/WorldMM at ``COMMIT``. Loads ``src/worldmm/memory/episodic/gen_multiscale.py``
from it with a stand-in for its one package import (``worldmm.llm.LLMModel``, an annotation) and a scripted LLM
that echoes the ids of a batch's captions (only the batching is reference data, as in the shared release
cases). Each case chains the levels as ``gen_multiscale`` does (each level reads the level below's output) and
records every window's direct members, its ``start_time``/``end_time`` strings; ``raised`` where the release
raises. Writes ``tests/reference/generated/worldmm/``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SRC, examples, outcome, write_cases  # noqa: E402

COMMIT = "1e6901d104259251457fad3df864794f9639be5f"
RELEASE = {"release": "github wgcyeo/WorldMM", "commit": COMMIT}


def load(src: Path):
    """``gen_multiscale`` and ``memory/memory.py`` from the checkout; the sibling packages they import for other
    work (the LLM and embedding clients, the three memories) are stand-in names."""
    import importlib

    package = src / "src" / "worldmm"
    for name, path in (("worldmm", package), ("worldmm.memory", package / "memory"),
                       ("worldmm.memory.episodic", package / "memory" / "episodic")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    stubs = {"worldmm.llm": ("LLMModel", "PromptTemplateManager"), "worldmm.embedding": ("EmbeddingModel",),
             "worldmm.memory.semantic": ("SemanticMemory", "SemanticTripleEntry"),
             "worldmm.memory.visual": ("VisualMemory",)}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update({a: object for a in attrs})
        sys.modules[name] = module
    episodic = sys.modules["worldmm.memory.episodic"]
    episodic.EpisodicMemory = episodic.CaptionEntry = object
    gm = importlib.import_module("worldmm.memory.episodic.gen_multiscale")
    memory = importlib.import_module("worldmm.memory.memory")
    import logging

    logging.disable(logging.CRITICAL)
    return gm, memory


class EchoLLM:
    """A batch's summary is the ``+``-joined text of its inputs (their ids), in braces."""

    def generate(self, messages):
        context = messages[-1]["content"].removeprefix("All descriptions: ")
        return "{" + "+".join(context.split("\n")) + "}"


def multiscale(gm, n: int) -> list[dict]:
    from hypothesis import strategies as st

    centis = st.one_of(st.integers(0, 3000 * 100), st.sampled_from([0, 500, 1000, 2999, 3000, 17999, 18000,
                                                                      59999, 60000, 8639900, 8640000]),
                       st.integers(0, 100).map(lambda s: s * 1000))
    timeline = st.lists(centis, max_size=40).map(sorted)
    windows = st.one_of(st.just([30, 180, 600]), st.lists(st.sampled_from([1, 7, 10, 30, 60, 180, 600, 3600]),
                                                          min_size=1, max_size=3))
    strategy = st.tuples(timeline, windows)
    cases = []
    for starts, levels in examples(strategy, n):
        items = [{"text": f"c{k}", "start_time": _hhmmssff(c), "video_path": "v.mp4"} for k, c in enumerate(starts)]

        def run():
            below, out = items, []
            for window in levels:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    made = gm._summarize_level(below, window, "", EchoLLM(), "DAY1")
                out.append([{"members": m["text"], "start_time": m["start_time"], "end_time": m["end_time"]}
                            for m in made])
                below = made
            return out

        cases.append({"input": {"start_centis": starts, "windows": levels}, "output": outcome(run)})
    return cases


def reasoning_reply(memory, n: int) -> list[dict]:
    """``WorldMemory._parse_reasoning_response(reply)`` (W10's reader): the decision and the selected memory, or
    the exception it raises (the loop then counts an error)."""
    import json

    from hypothesis import strategies as st

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                       st.sampled_from(["", "episodic", "Semantic", "VISUAL", "visual ", "other", "search", "Search",
                                        "answer", "ANSWER", "retrieve", "who?", "a {brace}"]), st.text(max_size=6))
    selected = st.one_of(
        st.fixed_dictionaries({}, optional={"memory_type": scalar, "search_query": scalar, "extra": scalar}),
        scalar, st.lists(scalar, max_size=2))
    decision = st.fixed_dictionaries({}, optional={
        "decision": st.one_of(st.sampled_from(["search", "answer", "Search", "ANSWER", "retrieve", ""]), scalar),
        "selected_memory": selected, "reason": scalar})
    as_json = decision.map(lambda d: json.dumps(d, ensure_ascii=False))
    wrapped = st.builds(lambda pre, body, post: pre + body + post,
                        st.sampled_from(["", "Reply: ", "```json\n", "<think>{draft}</think>", "{", "}"]), as_json,
                        st.sampled_from(["", "\n```", " Done.", " {\"x\": 1}", "}", "{"]))
    strategy = st.one_of(as_json, wrapped, st.sampled_from(["", "answer", "null", "[]", "[1, 2]", "42", '"search"',
                                                            "{not json}", '{"decision": "search"'] ),
                         st.text(max_size=12))
    cases = []
    for reply in examples(strategy, n):
        def run():
            out = memory.WorldMemory._parse_reasoning_response(object(), reply)
            chosen = out.selected_memory
            return {"decision": out.decision,
                    "selected_memory": None if chosen is None else {"memory_type": chosen.memory_type,
                                                                     "search_query": chosen.search_query}}
        cases.append({"input": {"reply": reply}, "output": outcome(run)})
    return cases


def _hhmmssff(centis: int) -> str:
    seconds, ff = divmod(centis, 100)
    return f"{seconds // 3600:02d}{seconds % 3600 // 60:02d}{seconds % 60:02d}{ff:02d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=SRC / "worldmm")
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    gm, memory = load(args.src.resolve())
    kinds = {"multiscale_windows": multiscale(gm, args.n), "reasoning_reply": reasoning_reply(memory, args.n)}
    path = write_cases("worldmm", RELEASE, kinds)
    print(path, {k: len(v) for k, v in kinds.items()})


if __name__ == "__main__":
    main()
