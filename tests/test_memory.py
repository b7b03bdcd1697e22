"""Caption memory, presets and the shared caption cache, with a scripted VLM captioner over generated videos
(real decoding, real caption cache). VideoLucy's backtracking is in tests/test_videolucy.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from senri.captioners.base import Clip, VideoMedia
from senri.memory.hierarchy import (CaptionCache, build_memory, choose_preset, describe_preset_rule, keep_good_caption,
                          level_clips, memory_plan, open_service, split)
from senri.records import MemoryCost, check_frame

REPO = Path(__file__).resolve().parents[1]
MEMORY = yaml.safe_load((REPO / "config/memory/auto.yaml").read_text())


def test_split_covers_the_span_with_a_shorter_last_clip():
    assert split(0, 25, 10) == [(0, 10), (10, 20), (20, 25)]
    assert split(60, 90, 10) == [(60, 70), (70, 80), (80, 90)]
    assert split(0, 10, 10) == [(0, 10)]
    with pytest.raises(ValueError):
        split(0, 10, 0)


#: Every bin edge of the `auto` rule in config/memory/auto.yaml and the preset on each side of it.
EDGES = [(600, "mlvu_short", "mlvu_medium"), (1200, "mlvu_medium", "mlvu_long"), (3600, "mlvu_long", "lvbench_medium"),
         (5400, "lvbench_medium", "lvbench_long"), (7200, "lvbench_long", "egomem")]


@pytest.mark.parametrize("edge,below,above", EDGES)
def test_auto_preset_at_every_bin_edge(edge, below, above):
    assert choose_preset(MEMORY, edge - 0.5)[0] == below
    assert choose_preset(MEMORY, edge)[0] == below  # a duration on a bound takes the shorter preset
    assert choose_preset(MEMORY, edge + 0.001)[0] == above
    assert choose_preset(MEMORY, 1)[0] == "mlvu_short" and choose_preset(MEMORY, 10 * 3600)[0] == "egomem"


def test_every_appendix_setting_is_a_named_preset():
    spec = {"mlvu_short": (30, 5, 1, 1, 2, 2), "mlvu_medium": (60, 5, 1, 1, 2, 2), "mlvu_long": (100, 10, 1, 1, 2, 2),
            "mlvu_extra_long": (200, 10, 1, 1, 2, 2), "videomme_short": (5, 1, 1, 2, 4, 4),
            "videomme_medium": (50, 5, 1, 1, 2, 2), "videomme_long": (100, 10, 1, 1, 2, 2),
            "lvbench_short": (100, 10, 1, 1, 2, 2), "lvbench_medium": (150, 10, 1, 1, 2, 2),
            "lvbench_long": (200, 10, 1, 1, 2, 2), "egomem": (800, 80, 8, 0.25, 0.5, 1)}
    assert set(MEMORY["presets"]) == set(spec)
    for name, (tc, tf, tuf, fc, ff, fu) in spec.items():
        _, levels = choose_preset({**MEMORY, "preset": name}, 10)
        assert [(levels[lv].clip_s, levels[lv].fps) for lv in ("coarse", "fine", "ultra_fine")] == [
            (tc, fc), (tf, ff), (tuf, fu)], name
    with pytest.raises(ValueError, match="no preset named"):
        choose_preset({**MEMORY, "preset": "huge"}, 10)


def test_a_two_and_a_half_hour_walk_gets_egomem_with_200_frames_per_coarse_clip():
    plan = memory_plan(MEMORY, 9000)
    assert plan["preset"] == "egomem" and plan["auto"]
    assert plan["levels"]["coarse"] == {"clip_s": 800, "fps": 0.25, "clips": 12, "frames_per_clip": 200,
                                        "dropped_per_clip": 0, "precomputed": True}
    assert plan["levels"]["fine"]["frames_per_clip"] == 40 and plan["levels"]["ultra_fine"]["frames_per_clip"] == 8
    capped = memory_plan({**MEMORY, "max_frames": 32}, 9000)["levels"]["coarse"]
    assert capped["frames_per_clip"] == 32 and capped["dropped_per_clip"] == 168
    rule = describe_preset_rule(MEMORY)
    assert "7200 s < duration" not in rule and "duration > 7200 s: egomem" in rule
    assert len(level_clips(MEMORY, 9000, "coarse", "x")) == 12


def test_caption_cache_round_trip_and_damaged_entries(tmp_path):
    cache = CaptionCache(tmp_path / "captions")
    clip = Clip(0, 30, 1.0, "describe", "coarse")
    key = CaptionCache.key("fp", {"captioner": "x"}, clip)
    assert key != CaptionCache.key("fp", {"captioner": "y"}, clip)
    assert key != CaptionCache.key("fp", {"captioner": "x"}, Clip(0, 30, 1.0, "other", "coarse"))
    assert cache.get(key) is None
    cache.put(key, {"text": "hello", "n_frames": 3, "error": None, "created_at": "t"})
    assert cache.get(key)["text"] == "hello" and len(cache) == 1
    (tmp_path / "captions" / key[:2] / f"{key}.json").write_text("{broken")
    assert cache.get(key) is None  # recomputed, not trusted
    assert not list((tmp_path / "captions").glob("*/.*.tmp"))



# ------------------------------------------------------------------------------------------- captioners


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """An 800 s, 64×48, 1 fps video: one EgoMem coarse clip."""
    from senri.media import run_ffmpeg
    from senri.probe import probe

    out = tmp_path_factory.mktemp("long")
    video = out / "long.mp4"
    run_ffmpeg(["-y", "-f", "lavfi", "-i", "testsrc2=s=64x48:r=1:d=800", "-c:v", "libx264", "-g", "4",
                "-pix_fmt", "yuv420p", str(video)], what="test video")
    return video, probe(video, "long")


def _vlm_service(tmp_path, video, info, rules, **memory):
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    record = tmp_path / "calls.jsonl"
    model = {"backend": "scripted", "script": str(script), "record": str(record)}
    model.update(memory.pop("model", {}))
    memory_slice = {"memory": {**MEMORY, "captioner": "scripted_vlm", "short_side": 48, **memory}, "track": {},
                    "captioner_model": model}
    media = VideoMedia(info.video_id, video, info.fingerprint, info.duration_s)
    return open_service(memory_slice, media, tmp_path / "captions"), record


def _calls(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def test_an_800_s_clip_at_a_quarter_fps_sends_200_frames_and_a_cap_records_what_it_drops(long_clip, tmp_path):
    video, info = long_clip
    rules = [{"match": "This clip", "text": "I walk.", "prompt_tokens": 5000, "completion_tokens": 300,
              "latency_s": 2.5}]
    service, record = _vlm_service(tmp_path / "all", video, info, rules)
    rows = service.captions([Clip(0, 800, 0.25, "describe", "coarse")])
    payload = _calls(record)[0]["payload"]
    images = [p for p in payload["messages"][0]["content"] if isinstance(p, dict) and "image" in p]
    assert len(images) == 200 and rows[0].n_frames == 200 and rows[0].dropped_frames == 0
    assert payload["max_tokens"] == 2048  # the released code's max_new_tokens
    assert "200 frames sampled at 0.25 per second" in payload["messages"][0]["content"][0]
    stats = service.stats
    assert (stats.calls, stats.prompt_tokens, stats.completion_tokens, stats.seconds) == (1, 5000, 300, 2.5)
    service.close()

    capped, record = _vlm_service(tmp_path / "capped", video, info, rules, max_frames=32)
    rows = capped.captions([Clip(0, 800, 0.25, "describe", "coarse")])
    images = [p for p in _calls(record)[0]["payload"]["messages"][0]["content"] if isinstance(p, dict)]
    assert len(images) == 32 and rows[0].n_frames == 32 and rows[0].dropped_frames == 168
    assert capped.stats.dropped_frames == 168
    capped.close()


def test_a_backend_that_takes_video_gets_the_clip_as_one_video_at_its_rate(long_clip, tmp_path):
    video, info = long_clip
    service, record = _vlm_service(tmp_path, video, info, [{"text": "I walk."}], model={"video": True})
    rows = service.captions([Clip(0, 80, 0.5, "describe", "fine")])
    parts = [p for p in _calls(record)[0]["payload"]["messages"][0]["content"] if isinstance(p, dict)]
    # The clip's rate and its frames' source times travel with the video (vLLM hands them to the model).
    assert parts == [{"video": parts[0]["video"], "fps": 0.5, "times_s": [2.0 * k for k in range(40)],
                      "timeline": "source"}] and rows[0].n_frames == 40
    # The video's wrapper speaks of one video, not of images that follow their timestamps.
    text = _calls(record)[0]["payload"]["messages"][0]["content"][0]
    assert "shown as one video" in text and "image" not in text
    service.close()


def test_both_clip_wrappers_are_in_the_captioner_identity(long_clip, tmp_path):
    video, info = long_clip
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "clip_images.txt").write_text("My images wrapper, $n_frames frames.\n$instruction\n")
    identities = []
    for name, prompts_dir in (("ours", None), ("theirs", str(mine))):
        service, _ = _vlm_service(tmp_path / name, video, info, [{"text": "I walk."}], model={"video": True},
                                  prompts="captioner", prompts_dir=prompts_dir)
        identities.append(service.captioner.identity())
        service.close()
    # A video-mode captioner never renders clip_images.txt, yet editing it changes the identity (both wrappers).
    assert identities[0]["wrapper"] != identities[1]["wrapper"]


def test_a_clip_with_no_decodable_frame_is_no_captioner_call(long_clip, tmp_path):
    video, info = long_clip
    service, record = _vlm_service(tmp_path, video, info, [{"text": "I walk."}])
    rows = service.captions([Clip(900, 930, 1.0, "describe", "coarse"), Clip(0, 10, 1.0, "describe", "coarse")])
    assert rows[0].error and "could be decoded" in rows[0].error and rows[1].error is None
    stats = service.stats
    assert len(_calls(record)) == 1  # only the decodable clip reached the model
    assert (stats.calls, stats.computed, stats.failed, stats.unsent) == (1, 1, 0, 1)
    service.close()


def test_two_levels_with_the_same_span_and_rate_are_two_cache_entries(long_clip, tmp_path):
    video, info = long_clip
    fine, ultra = Clip(0, 1, 4.0, "x", "fine"), Clip(0, 1, 4.0, "x", "ultra_fine")  # videomme_short's levels
    assert CaptionCache.key("fp", {}, fine) != CaptionCache.key("fp", {}, ultra)
    service, record = _vlm_service(tmp_path, video, info, [{"text": "I walk."}])
    rows = service.captions([fine, ultra])
    assert [r.level for r in rows] == ["fine", "ultra_fine"] and service.stats.computed == 2
    assert len(service.cache) == 2 and len(_calls(record)) == 2
    service.close()


def test_failed_captioner_calls_are_counted_never_cached_and_never_replace_a_good_caption(long_clip, tmp_path):
    video, info = long_clip
    rules = [{"match": "from 10 s to 20 s", "error": "CUDA out of memory"},
             {"match": "from 20 s to 30 s", "text": "   "},  # an empty caption is a failure too
             {"text": "I walk."}]
    service, record = _vlm_service(tmp_path, video, info, rules)
    clips = [Clip(s, s + 10, 1.0, "x", "fine") for s in (0, 10, 20)]
    rows = service.captions(clips)
    assert [r.error is None for r in rows] == [True, False, False] and rows[1].text == ""
    assert (service.stats.computed, service.stats.failed, service.stats.calls) == (1, 2, 3)
    assert len(service.cache) == 1  # a rerun tries the failed clips again
    service.captions(clips)
    assert (service.stats.reused, service.stats.failed, service.stats.calls) == (1, 4, 5)
    old = rows[0]
    kept = keep_good_caption(old, rows[1])
    assert kept.text == "I walk." and "CUDA out of memory" in kept.error
    assert keep_good_caption(old, rows[0]) is rows[0]
    service.close()


def test_vlm_identity_holds_the_wrapper_prompt_and_the_frame_selection_code(long_clip, tmp_path):
    video, info = long_clip
    service, _ = _vlm_service(tmp_path, video, info, [{"text": "I walk."}])
    identity = service.captioner.identity()
    assert identity["wrapper"] and identity["frame_code"] and identity["max_frames"] is None
    assert identity["max_tokens"] == 2048 and identity["as_video"] is False
    service.close()


def test_the_memory_stage_records_its_preset_and_the_captioner_cost(long_clip, tmp_path):
    video, info = long_clip
    service, _ = _vlm_service(tmp_path, video, info, [{"text": "I walk.", "prompt_tokens": 10}],
                              preset="egomem")
    rows, cost = build_memory(service, {**MEMORY, "preset": "egomem"}, info.duration_s)
    service.close()
    check_frame(cost, MemoryCost, "cost")
    assert rows.height == 1 and rows["n_frames"].to_list() == [200]
    row = cost.row(0, named=True)
    assert (row["preset"], row["clip_s"], row["fps"], row["computed"], row["caption_prompt_tokens"]) == (
        "egomem", 800, 0.25, 1, 10)


# ------------------------------------------------------------------------------------------- retrieval


def test_a_fact_past_the_first_256_word_pieces_of_a_long_memory_is_found(tmp_path):
    """A 2,048-token VLM caption is read in overlapping chunks (best chunk wins), not cut at MiniLM's 256."""
    from senri.memory.retrieval import CHUNK_PIECES, MemoryIndex, windows

    assert windows(list(range(10)), 4, 1) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert windows(list(range(5)), 8, 2) == [list(range(5))] and windows([], 8, 2) == [[]]
    corridor = " ".join(f"I walk along corridor {n} past grey office doors and ceiling lights." for n in range(60))
    long = corridor + " Then I lock a red bicycle to the railing outside the bakery."
    # Without chunks the long memory's vector is the corridor's, and the near misses (a car parked outside a
    # shop, a scooter) outrank it (measured: third, 0.18 against 0.32).
    texts = ["I stir a pot of pasta on the stove in the kitchen.", long, "A cat sleeps on a sofa by the window.",
             "I park the car on the street outside a shop.", "I ride a scooter to the station."]
    index = MemoryIndex(texts, tmp_path, "embedding")
    assert index.kind == "embedding"
    pieces = len(index.embedder.tokenizer(long, add_special_tokens=False, verbose=False)["input_ids"])
    assert pieces > 3 * CHUNK_PIECES and int((index.owners == 1).sum()) >= 3  # several chunks for one memory
    assert index.search("Where did I lock my red bicycle?", 1)[0][0] == 1
    again = MemoryIndex(texts, tmp_path, "embedding")  # from the index cache: same chunks, same answer
    assert (again.owners == index.owners).all() and again.search("red bicycle by the bakery", 1)[0][0] == 1


# ------------------------------------------------------------------------------------ caption health (#24)

LOOP = "I walk along the corridor. " + "The door is open. " * 40


def test_a_length_cut_caption_is_marked_and_a_looping_one_is_retried_once_with_the_repetition_settings(
        long_clip, tmp_path):
    video, info = long_clip
    rules = [{"match": "from 0 s to 10 s", "repetition_penalty": None, "text": "I walk and then I",
              "finish_reason": "length"},  # cut, but no loop: kept as it is, marked
             {"match": "from 10 s to 20 s", "repetition_penalty": None, "text": LOOP, "finish_reason": "length"},
             {"match": "from 10 s to 20 s", "repetition_penalty": 1.2, "text": "I walk past an open door."},
             {"text": "I walk."}]
    service, record = _vlm_service(tmp_path, video, info, rules, model={"repetition_penalty": 1.2})
    clips = [Clip(s, s + 10, 1.0, "x", "fine") for s in (0, 10, 20)]
    rows = service.captions(clips)
    assert [r.finish_reason for r in rows] == ["length", "stop", "stop"]
    assert rows[0].text == "I walk and then I" and rows[0].error is None
    assert rows[1].text == "I walk past an open door."  # the retry's caption
    calls = _calls(record)
    assert len(calls) == 4 and [c["payload"].get("repetition_penalty") for c in calls] == [None, None, None, 1.2]
    assert (service.stats.calls, service.stats.truncated, service.stats.retried) == (4, 1, 1)
    # The mark is kept in the caption cache: a rerun reads it back without a call.
    again = service.captions(clips)
    assert [r.finish_reason for r in again] == ["length", "stop", "stop"] and len(_calls(record)) == 4
    service.close()
    # A retry that fails keeps the cut caption (marked), and both calls are counted.
    failing = [{"match": "from 10 s to 20 s", "repetition_penalty": None, "text": LOOP, "finish_reason": "length"},
               {"match": "from 10 s to 20 s", "error": "HTTP 400: unknown field repetition_penalty"}]
    kept, record = _vlm_service(tmp_path / "failing", video, info, failing)
    row = kept.captions([clips[1]])[0]
    assert row.error is None and row.text == LOOP.strip() and row.finish_reason == "length"
    assert len(_calls(record)) == 2 and _calls(record)[1]["payload"]["repetition_penalty"] == 1.05
    assert kept.stats.calls == 2
    kept.close()
    off, record = _vlm_service(tmp_path / "off", video, info, rules, repetition_retry=False)
    assert off.captions([clips[1]])[0].finish_reason == "length" and len(_calls(record)) == 1
    off.close()


def test_repetition_loops_are_told_from_ordinary_captions():
    from senri.captioners.vlm import looping

    assert looping(LOOP) and looping("a " + "door " * 30) and looping("x " + "the cat sat on the mat. " * 6)
    assert not looping("I walk along a grey corridor, turn left at the sign and open the red door.")
    assert not looping("no no no")  # too short to be a loop
    assert not looping(" ".join(f"corridor {n} is grey." for n in range(40)))  # similar, never repeated


def test_one_clip_that_cannot_be_captioned_fails_alone_and_its_batch_keeps_the_others(long_clip, tmp_path,
                                                                                     monkeypatch):
    from senri.captioners.vlm import BackendCaptioner

    video, info = long_clip
    service, record = _vlm_service(tmp_path, video, info, [{"text": "I walk."}])
    frames = BackendCaptioner._frames

    def broken_frames(self, clip):
        if clip.start_s == 10:
            raise OSError("frame store unreadable")
        return frames(self, clip)

    monkeypatch.setattr(BackendCaptioner, "_frames", broken_frames)
    rows = service.captions([Clip(s, s + 10, 1.0, "x", "fine") for s in (0, 10, 20)])
    assert [r.error is None for r in rows] == [True, False, True] and "frame store unreadable" in rows[1].error
    assert len(_calls(record)) == 2 and (service.stats.computed, service.stats.unsent) == (2, 1)

    # A captioner that raises for a whole batch: the service asks clip by clip, and only the bad one fails.
    many = service.captioner.caption_many

    def raising(clips):
        if any(c.start_s == 40 for c in clips):
            raise RuntimeError("engine rejected the batch")
        return many(clips)

    monkeypatch.setattr(service.captioner, "caption_many", raising)
    rows = service.captions([Clip(s, s + 10, 1.0, "x", "fine") for s in (30, 40, 50)])
    assert [r.error is None for r in rows] == [True, False, True] and "rejected" in rows[1].error
    service.close()


def test_a_failed_caption_never_reaches_a_model_as_its_error_text():
    from senri.memory.hierarchy import caption_health, format_memory
    from senri.records import MemoryRow

    def row(start, text, error=None, finish=None):
        return MemoryRow("v", "coarse", start, start + 30, 1.0, 30, "h", text, "c", "t", None, None, error,
                         finish_reason=finish)

    rows = [row(0, "I walk."), row(30, "", "CUDA out of memory"), row(60, "I open a door and", finish="length")]
    listed = format_memory(rows)
    assert "CUDA" not in listed and "no caption" not in listed and listed.count("\n") == 1
    assert "[1] coarse 1:00–1:30: I open a door and" in listed
    assert caption_health(rows) == (1, 1)
