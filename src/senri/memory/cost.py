"""What building one video's store cost, per builder role: the store's cost table (``cost.parquet``).

The caption memory writes one such table per video (``results/memory/<captioner>/<video>.cost.parquet``:
captions computed and reused, tokens, seconds); a memory system's store writes its own beside its items, one
row per LLM role of its builder — WorldMM's summariser / extractor / retriever, MAGIC-Video's G4–G12 prompts
on its one builder model — so a reader sees where a store's build went (calls, replies cut at their limit,
tokens, model seconds) without reading its log. Model seconds are those each reply took when it was first
made: a rebuild answered from the response cache reports the same seconds at no cost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

#: The store's cost table, in its folder.
COST_FILE = "cost.parquet"


@dataclass
class RoleCost:
    """One builder role's model calls: how many, how many failed or were cut at their completion limit, their
    tokens and the model's seconds."""

    calls: int = 0
    failed: int = 0
    cut: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_s: float = 0.0

    def add(self, response: Any) -> None:
        """Book one reply (a :class:`senri.backends.base.ChatResponse`)."""
        self.calls += 1
        self.failed += bool(response.error)
        self.cut += bool(not response.error and response.truncated)
        self.prompt_tokens += int(response.prompt_tokens or 0)
        self.completion_tokens += int(response.completion_tokens or 0)
        self.model_s += float(response.latency_s or 0.0)


def role_cost(stats: Mapping[str, Any]) -> RoleCost:
    """A role's cost from a record that holds its fields among others (WorldMM's role stats in config.yaml)."""
    return RoleCost(**{f.name: stats[f.name] for f in fields(RoleCost) if f.name in stats})


def write_cost(out_dir: Path, system: str, video_id: str, roles: Mapping[str, tuple[str, RoleCost]]) -> Path:
    """Write ``out_dir/cost.parquet``: per role (role → (model name, its cost)), in role order; a store whose
    builder made no call (an import) gets an empty table with the same columns."""
    from senri.records import StoreCost, to_frame, write_table

    rows = [StoreCost(system, video_id, role, model, cost.calls, cost.failed, cost.cut, cost.prompt_tokens,
                      cost.completion_tokens, round(cost.model_s, 3))
            for role, (model, cost) in sorted(roles.items())]
    return write_table(to_frame(rows, StoreCost), Path(out_dir) / COST_FILE, StoreCost)
