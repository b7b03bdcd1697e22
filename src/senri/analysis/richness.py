"""Information richness and relevance per memory level (VideoLucy Fig. 5; appendix Tables 11 and 12).

For every question whose VideoLucy trace reached a given level (``analysis.richness.level``: ultra-fine by
default, "the questions that reached the deepest level"), each level's memory text — the texts of the
question's final memory at that level (``final_memory`` / ``final_memory_texts`` of the trace), joined — gets:

- its **information richness**: the Shannon entropy of the text's word distribution (Table 11, as senri reads
  it: ``H = -Σ_w p(w) log2 p(w)``, ``p(w)`` a word's share of the text's words, words lower-cased runs of
  letters and digits), :func:`shannon_entropy`;
- its **relevance** to the question: a relevance evaluator model (its own model config,
  ``analysis.richness.evaluator``) scores the text against the question on a whole-number scale
  (``score_min``–``score_max``) in a JSON reply ``{"score", "reason"}`` (Table 12's form, our own wording:
  ``config/prompts/richness/relevance.txt``), :func:`parse_relevance`. A reply that does not parse, or scores
  outside the scale, is counted (``unparsed``, ``out_of_scale``), never guessed: its score stays null.

Two tables come out: one row per (run, question, level), and Fig. 5's curves, per (run, level): questions,
mean entropy, mean relevance over the scored replies and the counts of replies that were not scored.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import polars as pl

from senri.answers import json_objects, question_block, split_reasoning
from senri.memory.hierarchy import LEVELS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """The words of a text: lower-cased runs of letters and digits (punctuation and spacing are not words)."""
    return [w.lower() for w in _WORD.findall(text or "")]


def shannon_entropy(text: str) -> float:
    """The Shannon entropy, in bits, of the word distribution of ``text``: 0.0 for an empty text or one word
    repeated; ``log2(n)`` for ``n`` distinct words each used equally often."""
    counts = Counter(words(text))
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return max(0.0, -sum(c / total * math.log2(c / total) for c in counts.values()))


@dataclass(frozen=True)
class Relevance:
    """One evaluator reply read: ``score`` when it parsed within the scale, else None and why (``status``:
    ``ok``, ``unparsed``, ``out_of_scale`` or ``error`` for a call that failed)."""

    score: int | None
    status: str


def parse_relevance(reply: str | None, score_min: int, score_max: int) -> Relevance:
    """Read the evaluator's score: the first JSON object with a ``score`` key (any case) whose value is a
    whole number (an integer, or a string or float that is one). A number outside ``score_min``–``score_max``
    is ``out_of_scale``; no such object, or a value that is no whole number, is ``unparsed``. Nothing is
    guessed from free text."""
    body = split_reasoning(reply)[0]
    for obj in json_objects(body):
        fields = {str(k).lower(): v for k, v in obj.items()}
        if "score" not in fields:
            continue
        value = fields["score"]
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.0+)?\s*", value):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
            return Relevance(None, "unparsed")
        score = int(value)
        if not score_min <= score <= score_max:
            return Relevance(None, "out_of_scale")
        return Relevance(score, "ok")
    return Relevance(None, "unparsed")


def level_texts(trace: Mapping[str, Any]) -> dict[str, str]:
    """Level → the joined texts of the trace's final memory at that level (levels absent: not reached)."""
    labels, texts = trace.get("final_memory") or [], trace.get("final_memory_texts") or []
    by_level: dict[str, list[str]] = {}
    for label, text in zip(labels, texts):
        by_level.setdefault(str(label).split(" ", 1)[0], []).append(str(text or ""))
    return {level: "\n".join(parts) for level, parts in by_level.items() if level in LEVELS}


@dataclass(frozen=True)
class LevelText:
    """One (run, question, level) to score."""

    method: str
    model: str
    memory: str
    video_id: str
    qid: str
    level: str
    text: str


def texts_to_score(predictions: pl.DataFrame, reached: str) -> list[LevelText]:
    """Every level's text, up to ``reached``, of the questions whose trace reached ``reached``."""
    depth = LEVELS.index(reached)
    out: list[LevelText] = []
    for row in predictions.iter_rows(named=True):
        try:
            trace = json.loads(row.get("trace") or "{}")
        except json.JSONDecodeError:
            continue
        texts = level_texts(trace if isinstance(trace, dict) else {})
        if reached not in texts:
            continue
        out += [LevelText(row["method"], row["model"], row.get("memory") or "", row["video_id"], row["qid"], level,
                          texts[level]) for level in LEVELS[:depth + 1] if level in texts]
    return out


LEVEL_COLUMNS = {"method": pl.String, "model": pl.String, "memory": pl.String, "video_id": pl.String,
                 "qid": pl.String, "level": pl.String, "words": pl.Int64, "entropy_bits": pl.Float64,
                 "relevance": pl.Int64, "relevance_status": pl.String, "evaluator_reply": pl.String}


def score_levels(items: Sequence[LevelText], questions: pl.DataFrame,
                 evaluate: Callable[[list[str]], list[tuple[str | None, str | None]]],
                 render: Callable[..., str], score_min: int, score_max: int) -> pl.DataFrame:
    """The per-level table: entropy of each text and the evaluator's relevance. ``evaluate`` takes the
    rendered prompts and returns ``(reply text, error)`` per prompt; ``render`` fills the prompt file."""
    by_qid = {q["qid"]: q for q in questions.iter_rows(named=True)}
    prompts = []
    for item in items:
        q = by_qid[item.qid]
        options = [q["option_a"], q["option_b"], q["option_c"], q["option_d"]]
        prompts.append(render(question=question_block(q["question"], options), text=item.text,
                              score_min=score_min, score_max=score_max))
    replies = evaluate(prompts) if prompts else []
    rows = []
    for item, (reply, error) in zip(items, replies):
        relevance = Relevance(None, "error") if error else parse_relevance(reply, score_min, score_max)
        record = asdict(item)
        text = record.pop("text")
        rows.append({**record, "words": len(words(text)), "entropy_bits": shannon_entropy(text),
                     "relevance": relevance.score, "relevance_status": relevance.status,
                     "evaluator_reply": error or reply})
    return pl.DataFrame(rows, schema=LEVEL_COLUMNS)


CURVE_COLUMNS = {"method": pl.String, "model": pl.String, "memory": pl.String, "level": pl.String,
                 "questions": pl.Int64, "entropy_bits": pl.Float64, "relevance": pl.Float64, "scored": pl.Int64,
                 "unparsed": pl.Int64, "out_of_scale": pl.Int64, "errors": pl.Int64}


def curves(levels: pl.DataFrame) -> pl.DataFrame:
    """Fig. 5's two curves per run: per level, the questions, their mean entropy, the mean relevance of the
    scored replies, and how many replies were not scored (by reason)."""
    if levels.is_empty():
        return pl.DataFrame(schema=CURVE_COLUMNS)
    status = pl.col("relevance_status")
    table = levels.group_by("method", "model", "memory", "level").agg(
        pl.len().cast(pl.Int64).alias("questions"), pl.col("entropy_bits").mean(),
        pl.col("relevance").cast(pl.Float64).mean().alias("relevance"),
        (status == "ok").sum().cast(pl.Int64).alias("scored"),
        (status == "unparsed").sum().cast(pl.Int64).alias("unparsed"),
        (status == "out_of_scale").sum().cast(pl.Int64).alias("out_of_scale"),
        (status == "error").sum().cast(pl.Int64).alias("errors"))
    order = pl.col("level").replace_strict({level: i for i, level in enumerate(LEVELS)}, return_dtype=pl.Int64)
    return table.sort("method", "model", "memory", order).select(list(CURVE_COLUMNS))


def videolucy_runs(cfg: Mapping[str, Any], pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The planned runs of VideoLucy (implementation ``videolucy``): the runs the analysis reads."""
    return [(m, model) for m, model in pairs if cfg["method"][m].get("implementation") == "videolucy"]


def run_richness(stage: Mapping[str, Any], prediction_paths: Sequence[str], questions: pl.DataFrame,
                 cache: str | None, out_dir: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The stage: read the VideoLucy runs' predictions, score every reached level's text with the evaluator
    (through its response cache: a rerun repeats no call), write ``levels.parquet`` and ``curves.parquet``."""
    from pathlib import Path

    from senri.aggregate import load_predictions
    from senri.backends import open_backend
    from senri.backends.base import ChatRequest, Message
    from senri.prompts import config_prompts

    spec = stage["richness"]
    model = spec.get("evaluator_config")
    if not model:
        raise ValueError("config.analysis.richness.evaluator: no relevance evaluator model is configured")
    score_min, score_max = int(spec["score_min"]), int(spec["score_max"])
    prompts = config_prompts(spec)
    assert prompts is not None
    max_tokens = min(int(spec["max_tokens"]), int(model.get("max_tokens_cap") or spec["max_tokens"]))
    backend = open_backend(model, cache)

    def evaluate(texts: list[str]) -> list[tuple[str | None, str | None]]:
        requests = [ChatRequest(messages=(Message.text("user", text),), max_tokens=max_tokens,
                                temperature=float(model.get("temperature", 0.0)), seed=int(stage["seed"]),
                                purpose="richness:relevance") for text in texts]
        return [(r.text, r.error) for r in backend.complete_many(requests)]

    items = texts_to_score(load_predictions(prediction_paths), str(spec["level"]))
    levels = score_levels(items, questions, evaluate, lambda **v: prompts.render("relevance", **v),
                          score_min, score_max)
    table = curves(levels)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    levels.write_parquet(out / "levels.parquet")
    table.write_parquet(out / "curves.parquet")
    return levels, table
