"""WorldMM's multiscale windows against cases generated from its release's own ``_summarize_level`` (WorldMM @
1e6901d) on Hypothesis-drawn caption timelines (``tests/reference/generated/worldmm/``;
``bench/release_cases/worldmm.py`` made them): every case's levels chained as ``gen_multiscale`` chains them,
each window's members and its start/end labels compared. The suite reads a deterministic sample;
``python bench/generated_cases.py worldmm`` reads all."""

from __future__ import annotations

import pytest

from release_generated import book, generated_cases, sample
from senri.memory.store import MemoryItem
from senri.memory.worldmm.common import hhmmssff, item_id, window_batches

SYSTEM = "worldmm"


@pytest.fixture(scope="module")
def cases() -> dict:
    return generated_cases(SYSTEM)


def _windows(start_centis: list[int], levels: list[int]) -> list[list[dict]]:
    """senri's levels: 10-s captions at the case's starts, each coarser level batching the one below."""
    below = [MemoryItem(f"c{k}", "episodic", f"c{k}", c / 100, c / 100 + 10, level="10sec")
             for k, c in enumerate(start_centis)]
    out = []
    for window in levels:
        made = []
        for members, start, end in window_batches(below, window):
            made.append(MemoryItem(item_id(f"{window}s", start, end), "episodic",
                                   "{" + "+".join(m.text for m in members) + "}", float(start), float(end),
                                   level=f"{window}s"))
        out.append([{"members": m.text, "start_time": hhmmssff(m.start_s), "end_time": hhmmssff(m.end_s)}
                    for m in made])
        below = made
    return out


def _on_the_clock(label: str) -> str:
    """A release label read on a 24-hour clock ("24002900" → "00002900")."""
    return f"{int(label[:-6]) % 24:02d}{label[-6:]}"


def test_multiscale_windows_batch_and_label_as_the_release(cases):
    """Equal, except the named deviation ``labels_wrap_at_midnight`` (docs/protocol.md): a window that ends (or
    starts) past 24:00 is labelled by the release with hours ≥ 24 ("24002900"), by senri on the next day's clock
    (its times are absolute across days: the same moment, "00002900" of the next day)."""
    for case in sample(cases["kinds"]["multiscale_windows"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = _windows(inp["start_centis"], inp["windows"])
        if ours == out["value"]:
            book(SYSTEM, "multiscale_windows")
            continue
        wrapped = [[{**w, "start_time": _on_the_clock(w["start_time"]), "end_time": _on_the_clock(w["end_time"])}
                    for w in level] for level in out["value"]]
        assert ours == wrapped, case
        book(SYSTEM, "multiscale_windows", "deviation:labels_wrap_at_midnight")


def test_every_generated_kind_is_read(cases):
    assert set(cases["kinds"]) == {"multiscale_windows"}
    assert cases["meta"]["commit"] == "1e6901d104259251457fad3df864794f9639be5f"
    assert len(cases["kinds"]["multiscale_windows"]) >= 200
