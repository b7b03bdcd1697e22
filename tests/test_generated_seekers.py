"""Issue 60: the differential cases generated from the releases' own functions (ParaVT cf55249, Video-o3
a6e0973, LongVideo-R1 77c87ec, VideoARM 195e325/d9fd317; tests/reference/generated/, bench/release_cases/) through
senri. The suite runs an evenly spread sample of every kind (all of them: ``python
bench/release_cases/check_seekers.py``); each case passes or is a named deviation its adapter checked
(tests/generated_seekers.py)."""

from __future__ import annotations

import collections
import json

import pytest

from generated_seekers import ADAPTERS, SYSTEMS, generated, sample, verdict

#: Cases per kind in the suite (the episode kinds run senri's whole loop, a caption tree holds up to 584 nodes:
#: fewer).
PER_KIND = {"forced_turn": 6, "caption_tree": 12, "episodes": 12}
DEFAULT_PER_KIND = 30
#: The deviations each system may name (docs/protocol.md), nothing else.
NAMED = {"paravt": {"multiple_choice_only", "frame_without_pixels_refused", "torch_build_linspace"},
         "video_o3": {"frame_without_pixels_refused"}, "longvideo_r1": set(), "videoarm": set()}


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_kind_has_cases_and_an_adapter(system):
    data = generated(system)
    assert data["meta"]["commit"] and len(data["meta"]["commit"]) == 40
    assert set(data["kinds"]) == set(ADAPTERS[system])
    assert all(len(cases) >= 100 for cases in data["kinds"].values()), \
        {kind: len(cases) for kind, cases in data["kinds"].items()}


@pytest.mark.parametrize("system,kind", [(s, k) for s in SYSTEMS for k in ADAPTERS[s]])
def test_a_sample_of_each_kind_equals_the_release(system, kind):
    cases = sample(generated(system)["kinds"][kind], PER_KIND.get(kind, DEFAULT_PER_KIND))
    counts = collections.Counter(verdict(system, kind, case) for case in cases)
    named = {v[len("deviation:"):] for v in counts if v.startswith("deviation:")}
    assert named <= NAMED[system], named
    assert counts["pass"] > 0, counts


def test_the_adapters_fail_where_senri_would_differ():
    """An adapter is not a test that cannot fail: a release outcome changed by hand is caught."""
    case = dict(generated("paravt")["kinds"]["extract_letter"][5])
    case["output"] = {"value": "not a letter"}
    with pytest.raises(AssertionError):
        verdict("paravt", "extract_letter", case)
    raising = next(c for c in generated("longvideo_r1")["kinds"]["tree_width"] if "raised" in c["output"])
    with pytest.raises(AssertionError):
        verdict("longvideo_r1", "tree_width", {**raising, "output": {"value": [4, 0]}})
    tree = next(c for c in generated("longvideo_r1")["kinds"]["caption_tree"] if "value" in c["output"])
    levels = [dict(level) for level in tree["output"]["value"]["levels"]]
    levels[-1]["digest"] = "0" * 64  # one node of the low level told otherwise
    with pytest.raises(AssertionError):
        verdict("longvideo_r1", "caption_tree", {**tree, "output": {"value": {**tree["output"]["value"],
                                                                             "levels": levels}}})
    episode = next(c for c in generated("longvideo_r1")["kinds"]["episodes"]
                   if "value" in c["output"] and c["output"]["value"]["video_qa"])
    told = json.loads(json.dumps(episode))
    told["output"]["value"]["video_qa"][0]["time_labels"][0] = "-1.0"  # one frame's time told otherwise
    with pytest.raises(AssertionError):
        verdict("longvideo_r1", "episodes", told)
    told = json.loads(json.dumps(episode))
    told["output"]["value"]["turns"][-1][-1] = ["R4"]  # the last message of the last call told a nudge
    with pytest.raises(AssertionError):
        verdict("longvideo_r1", "episodes", told)
    crop = next(c for c in generated("paravt")["kinds"]["crop_frames_torchvision"] if c["output"]["returned_frames"])
    with pytest.raises(AssertionError):
        verdict("paravt", "crop_frames_torchvision", {**crop, "output": {**crop["output"], "torchvision_decoded": [0]}})


def test_the_videoarm_adapters_fail_where_senri_would_differ():
    """VideoARM's new kinds: a mosaic tile, an argument object and a caption told otherwise are caught."""
    grid = next(c for c in generated("videoarm")["kinds"]["mosaic_layout"] if c["output"]["value"].get("grids"))
    told = json.loads(json.dumps(grid))
    told["output"]["value"]["grids"][0]["tiles_row_major"][1][2] = "frame99"
    with pytest.raises(AssertionError):
        verdict("videoarm", "mosaic_layout", told)
    read = next(c for c in generated("videoarm")["kinds"]["tool_arguments"] if c["output"].get("type") == "dict")
    with pytest.raises(AssertionError):
        verdict("videoarm", "tool_arguments", {**read, "output": {"value": {"told": 1}, "type": "dict"}})
    with pytest.raises(AssertionError):
        verdict("videoarm", "tool_arguments", {"input": {"arguments": "Sure: {\"a\": 1} {\"b\": 2}"},
                                               "output": {"value": None, "type": "NoneType"}})
    caption = generated("videoarm")["kinds"]["caption_reply"][3]
    with pytest.raises(AssertionError):
        verdict("videoarm", "caption_reply", {**caption, "output": {"value": {"status": "success", "caption": "x y"}}})
