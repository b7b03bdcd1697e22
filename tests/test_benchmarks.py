"""The native readers of senri.benchmarks on real files (tests/reference/benchmarks/, excerpts under
tests/data/benchmarks/ with their source in its README) and on LVBench files built from spec LV1–LV5."""

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from reference import reference_file
from senri.benchmarks import BENCHMARKS, benchmark_name, load_benchmark
from senri.benchmarks.base import Benchmark, NativeFileError, NativeVideo, preset_by_bins
from senri.benchmarks.instance import lvbench_question
from senri.benchmarks.lvbench import split_options, time_reference
from senri.benchmarks.mlvu import answer_letter
from senri.benchmarks.videomme import youtube_id

DATA = Path(__file__).resolve().parent / "data" / "benchmarks"
VIDEOMME_EXCERPT = DATA / "videomme" / "videomme_json_file.excerpt.json"
EGOMEM_EXCERPT = DATA / "egomem" / "EgoMem.excerpt.json"
MLVU_DEV = [DATA / "mlvu" / f"{name}.json" for name in ("1_plotQA", "2_needle", "3_ego", "4_count", "5_order",
                                                       "6_anomaly_reco", "7_topic_reasoning", "8_sub_scene",
                                                       "9_summary")]
VM8_REPEATED = ["119-1", "214-3", "321-2", "325-1", "375-3", "587-3", "624-2", "627-2", "648-2", "894-1"]


def _read(name, **dataset):
    return BENCHMARKS.load(name).read({"video_ext": [".mp4"], **dataset})


def _flagged(native, flag):
    return sorted({q.record for q in native.quirks if q.flag == flag})


def test_every_registered_benchmark_is_a_benchmark_with_its_scorer_and_layout_named():
    assert BENCHMARKS.names() == ["egomem", "lvbench", "mlvu", "senri", "videomme"]
    for name in BENCHMARKS.names():
        benchmark = BENCHMARKS.load(name)
        assert isinstance(benchmark, Benchmark) and benchmark.name == name
        assert benchmark.categories and benchmark.official_scorer and benchmark.layout.name == name
    assert benchmark_name({"name": "demo"}) == "senri" and load_benchmark({}).strict


# ------------------------------------------------------------------------------------------------ Video-MME
def test_videomme_template_is_refused_with_its_position_unless_repaired():
    template = reference_file("benchmarks/videomme/output_test_template.json")
    with pytest.raises(NativeFileError, match=r"line 20, column 13.*repair_json"):
        _read("videomme", questions=[str(template)])
    native = _read("videomme", questions=[str(template)], repair_json=True)
    assert len(native.questions) == 9 and [q.split for q in native.questions[::3]] == ["short"] * 3
    assert any("removed 10 trailing comma(s)" in note for note in native.notes)
    assert [q.flag for q in native.quirks].count("file_note") == 2  # the repair, and no YouTube id in the template
    first = native.questions[0]
    assert (first.video_id, first.qid, first.task_type, first.answer) == ("001", "001-1", "Counting Problem", "C")
    assert first.categories == ["Counting Problem", "domain=Knowledge", "sub_category=Humanity & History"]
    assert first.options == ("Apples.", "Candles.", "Berries.", "The three kinds are of the same number.")
    assert native.videos["001"].files == ("data/001.mp4", "data/001.MP4", "data/001.mkv")


def test_videomme_nested_json_keeps_every_repeated_option_and_youtube_ids_with_dashes():
    native = _read("videomme", questions=[str(VIDEOMME_EXCERPT)])
    assert len(native.videos) == 38 and len(native.questions) == 114
    assert _flagged(native, "repeated_option") == VM8_REPEATED  # VM8: kept, flagged, counted
    assert [q.flag for q in native.quirks].count("repeated_option") == 11  # 214-3 repeats one text three times
    leading = [v for v in native.videos if v[0] in "-_"]
    assert len(leading) == 24 and "-ApL8d6tX5U" in leading and "_tvmjsKXTu8" in leading
    assert "azZZZbSwLQght" in native.videos
    question = next(q for q in native.questions if q.qid == "214-3")
    assert question.flags == ["repeated_option"] and question.answer in "ABCD"
    assert {q.split for q in native.questions} == {"short", "medium", "long"}
    assert native.videos["-ApL8d6tX5U"].files[0] == "data/-ApL8d6tX5U.mp4"


def test_videomme_parquet_rows_read_as_the_nested_layout(tmp_path):
    nested = json.loads(VIDEOMME_EXCERPT.read_text())
    rows = [{"video_id": v["video_id"], "duration": v["duration"], "domain": v["domain"],
             "sub_category": v["sub_category"], "url": f"https://www.youtube.com/watch?v={v['url']}",
             "videoID": v["url"], **{k: q[k] for k in ("question_id", "task_type", "question", "options", "answer")}}
            for v in nested for q in v["questions"]]
    path = tmp_path / "test-00000-of-00001.parquet"
    pl.DataFrame(rows).write_parquet(path)
    from_parquet = _read("videomme", questions=[str(path)])
    from_json = _read("videomme", questions=[str(VIDEOMME_EXCERPT)])
    assert from_parquet.questions == from_json.questions


def test_a_record_whose_video_id_cannot_name_a_file_is_left_out_and_reported(tmp_path):
    records = json.loads(EGOMEM_EXCERPT.read_text())[:2]
    records[0]["videoID"] = "A1 JAKE/DAY1"
    path = tmp_path / "EgoMem.json"
    path.write_text(json.dumps(records))
    native = _read("egomem", questions=[str(path)])
    assert [q.qid for q in native.questions] == ["1"] and _flagged(native, "bad_video_id") == ["0"]


def test_youtube_id_from_video_id_column_url_parameter_short_link_or_bare_id():
    assert youtube_id({"videoID": "-ApL8d6tX5U"}) == "-ApL8d6tX5U"
    assert youtube_id({"url": "https://www.youtube.com/watch?v=_tvmjsKXTu8&t=3"}) == "_tvmjsKXTu8"
    assert youtube_id({"url": "https://youtu.be/fFjv93ACGo8"}) == "fFjv93ACGo8"
    assert youtube_id({"url": "azZZZbSwLQght"}) == "azZZZbSwLQght" and youtube_id({"video_id": "001"}) is None


# ------------------------------------------------------------------------------------------------ LVBench
def _lvbench_file(tmp_path, videos):
    path = tmp_path / "video_info.meta.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in videos))
    return path


def _lv_video(key, qa, minutes=None):
    video = {"key": key, "type": "documentary", "qa": qa}
    if minutes is not None:
        video["video_info"] = {"duration_minutes": minutes, "fps": 30.0, "resolution": {"width": 640, "height": 360}}
    return video


def test_lvbench_options_come_out_of_the_question_text_and_categories_map_to_the_leaderboard_codes(tmp_path):
    question = lvbench_question("What is written on the sign (in red)?", ["Exit (left)", "Stop", "(B) Go", "Wait"])
    path = _lvbench_file(tmp_path, [
        _lv_video("-abcdefghij", [
            {"uid": 55, "question": question, "answer": "C", "question_type": ["key information retrieval", "reasoning"],
             "time_reference": "00:15-00:19"},
            {"uid": "56", "question": lvbench_question("Who?", ["a", "b", "c", "d"]), "answer": "A",
             "question_type": ["entity recognition"], "time_reference": "1:02:03-1:05:00"}], minutes=40.5),
        _lv_video("_klmnopqrst", [
            {"uid": "57", "question": lvbench_question("When?", ["x", "y", "x", "z"]), "answer": "E",
             "question_type": ["temporal grounding", "summarization", "event understanding"],
             "time_reference": "75:00-76:10"}])])
    native = _read("lvbench", questions=[str(path)])
    first, second, third = native.questions
    assert first.qid == "55" and second.qid == "56"  # LV3: uid as a string, int or not
    assert first.question == "What is written on the sign (in red)?"
    assert first.options == ("Exit (left)", "Stop", "(B) Go", "Wait") and first.answer == "C"
    assert first.categories == ["KIR", "Rea", "video_type=documentary"] and first.task_type == "KIR"  # LV6
    assert (first.evidence_start_s, first.evidence_end_s) == (15.0, 19.0)
    assert (second.evidence_start_s, second.evidence_end_s) == (3723.0, 3900.0)
    assert (third.evidence_start_s, third.evidence_end_s) == (4500.0, 4570.0)  # minutes past 59
    assert third.categories == ["TG", "Sum", "EU", "video_type=documentary"]
    assert third.flags == ["answer_not_an_option", "repeated_option"]  # kept, flagged
    assert native.videos["-abcdefghij"].duration_s == pytest.approx(2430.0)
    assert native.videos["-abcdefghij"].split == "short" and native.videos["_klmnopqrst"].split is None
    assert native.videos["-abcdefghij"].files[:2] == ("-abcdefghij.mp4", "videos/-abcdefghij.mp4")


def test_lvbench_index_layout_names_files_by_line_order(tmp_path):
    path = _lvbench_file(tmp_path, [_lv_video(f"key{i:08d}", [{"uid": i, "question": lvbench_question("Q?", ["a", "b"]),
                                                               "answer": "A", "question_type": ["reasoning"]}])
                                    for i in range(3)])
    native = _read("lvbench", questions=[str(path)], video_layout="index", samples_per_shard=2,
                   index_pattern="videos/{shard:05d}/{index:08d}.mp4")
    assert [v.files for v in native.videos.values()] == [("videos/00000/00000000.mp4",),
                                                         ("videos/00000/00000001.mp4",),
                                                         ("videos/00001/00000002.mp4",)]


def test_lvbench_record_without_option_lines_is_kept_and_a_bad_line_names_its_position(tmp_path):
    path = _lvbench_file(tmp_path, [_lv_video("abcdefghijk", [
        {"uid": "1", "question": "No options here", "answer": "A", "question_type": ["chit-chat"],
         "time_reference": "soon"}])])
    native = _read("lvbench", questions=[str(path)])
    assert native.questions[0].flags == ["answer_not_an_option", "bad_time_reference", "no_options",
                                         "unknown_category"]
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(NativeFileError, match=r"line 2, column 2"):
        _read("lvbench", questions=[str(path)])


def test_split_options_and_time_references():
    assert split_options("Q?\n(A) a\n(B) b") == ("Q?", ["a", "b"]) and split_options("Q? (A) a") is None
    assert time_reference("00:15-00:19") == (15.0, 19.0) and time_reference(None) is None


# ------------------------------------------------------------------------------------------------ MLVU
def test_mlvu_count_file_reads_every_question_with_letter_answers_and_task_file_ids():
    native = _read("mlvu", questions=[str(reference_file("benchmarks/mlvu/4_count.json"))])
    assert len(native.questions) == 206 and not native.quirks
    first = native.questions[0]
    assert (first.qid, first.video_id, first.categories, first.answer) == ("4_count:0", "4_count__count_126",
                                                                          ["count"], "B")  # "1" is candidate B
    assert first.split == "short" and native.videos["4_count__count_126"].files == ("video/4_count/count_126.mp4",)
    assert Counter(q.answer for q in native.questions).keys() <= set("ABCD")


def test_mlvu_dev_excerpt_keeps_and_flags_every_quirk_record():
    native = _read("mlvu", questions=[str(p) for p in MLVU_DEV])
    flags = {q.qid: q.flags for q in native.questions if q.flags}
    assert flags == {  # excerpt index → original index in tests/data/benchmarks/README.md
        "1_plotQA:2": ["repeated_option"],                                    # #18
        "1_plotQA:3": ["empty_option"],                                       # #23, two empty candidates
        "1_plotQA:4": ["answer_text_repeated", "repeated_option"],            # #335 "Three"
        "1_plotQA:5": ["answer_text_repeated", "repeated_option"],            # #387
        "1_plotQA:6": ["answer_text_repeated", "repeated_option"],            # #493
        "2_needle:1": ["answer_text_not_in_candidates"],                      # #34
        "2_needle:2": ["answer_text_not_in_candidates"],                      # #338
        "3_ego:1": ["empty_option"], "3_ego:3": ["empty_option"],             # #119, #313
        **{f"6_anomaly_reco:{i}": ["repeated_option"] for i in (0, 1, 2, 4, 5, 6, 7, 8)},
        "6_anomaly_reco:3": ["answer_text_repeated", "repeated_option"],      # #66
        "7_topic_reasoning:0": ["empty_record"],                              # #26
        "7_topic_reasoning:2": ["answer_text_repeated", "repeated_option"],   # #163
    }
    three = next(q for q in native.questions if q.qid == "1_plotQA:4")
    assert three.options.count("Three") == 2 and three.answer == "C"  # ML7: the last position
    assert next(q for q in native.questions if q.qid == "2_needle:1").answer == ""
    # ML5: the same file name in two task folders is two videos
    assert {"1_plotQA__movie101_30", "7_topic_reasoning__movie101_30", "3_ego__ego_11",
            "7_topic_reasoning__ego_11"} <= set(native.videos)
    assert native.videos["3_ego__ego_11"].files == ("video/3_ego/ego_11.mp4",)
    assert {q.categories[0] for q in native.questions} == {"plotQA", "needle", "ego", "count", "order",
                                                           "anomaly_reco", "topic_reasoning"}
    assert sum("without candidates" in note for note in native.notes) == 2  # sub_scene, summary left out
    first = _read("mlvu", questions=[str(MLVU_DEV[0])], mlvu_answer_position="first")
    assert next(q for q in first.questions if q.qid == "1_plotQA:4").answer == "B"


def test_mlvu_test_records_with_six_candidates_and_their_own_ids(tmp_path):
    path = tmp_path / "sportsQA.json"
    path.write_text(json.dumps([{"question_id": "SQA_0", "video": "sport_1.mp4", "duration": 4000.5,
                                 "question": "Which team?", "candidates": ["a", "b", "c", "d", "e", "f"],
                                 "answer": "f", "question_type": "sportsQA"},
                                {"question_id": "SQA_1", "video": "sport_1.mp4", "duration": 4000.5,
                                 "question": "Which?", "candidates": ["a", "b", "c"], "answer": "C",
                                 "question_type": "sportsQA"}]))
    native = _read("mlvu", questions=[str(path)])
    six, three = native.questions
    assert (six.qid, six.answer, six.option_e, six.option_f, len(six.options)) == ("SQA_0", "F", "e", "f", 6)
    assert (three.answer, three.options) == ("C", ("a", "b", "c")) and six.split == "extra_long"


def test_mlvu_answer_letter_rule():
    assert answer_letter("b", ["a", "b", "b"], "last") == ("C", [("answer_text_repeated",
                                                                  "answer text 'b' is candidate B, C; the last is taken")])
    assert answer_letter("x", ["a", "b"], "last")[0] == "" and answer_letter("B", ["a", "b"], "last") == ("B", [])


# ------------------------------------------------------------------------------------------------ EgoMem
def test_egomem_keeps_invalid_answers_and_gives_event_questions_their_positional_subtype():
    native = _read("egomem", questions=[str(EGOMEM_EXCERPT)])
    assert len(native.questions) == 41
    assert _flagged(native, "repeated_option") == ["262", "32", "33", "374"]
    assert _flagged(native, "empty_answer") == ["141", "148"]
    assert _flagged(native, "answer_not_an_option") == ["354", "401"]
    assert _flagged(native, "disputed") == ["211", "252"]
    by_id = {q.qid: q for q in native.questions}
    assert by_id["354"].answer == "E" and by_id["141"].answer == "" and by_id["211"].answer == "D"  # as released
    assert [by_id[str(i)].categories for i in range(252, 258)] == [
        ["Event", f"subtype={name}"] for name in ("Event Order", "Temporal Judge", "Temporal Align", "Event Context",
                                                  "Event Rectification", "Event Reconstruction")]
    assert by_id["0"].categories == ["Detail"] and by_id["0"].options[0].startswith("A girl")  # "A. " dropped
    assert native.videos["A1_JAKE_DAY1"].files == ("videos/A1_JAKE_DAY1.mp4",)


# ------------------------------------------------------------------------------------------------ presets
def test_presets_follow_the_benchmark_split_as_videolucy_sets_them():
    videomme, lvbench, mlvu, egomem, senri = (BENCHMARKS.load(n) for n in ("videomme", "lvbench", "mlvu",
                                                                          "egomem", "senri"))
    assert videomme.preset({}, NativeVideo("x", (), split="short", duration_s=3000.0)) == "videomme_short"
    assert mlvu.preset({}, NativeVideo("x", (), duration_s=600.0)) == "mlvu_short"  # an edge: the shorter bin
    assert mlvu.preset({}, NativeVideo("x", (), duration_s=600.5)) == "mlvu_medium"
    assert mlvu.preset({}, NativeVideo("x", (), duration_s=32550.0)) == "mlvu_extra_long"
    assert lvbench.preset({}, NativeVideo("x", (), duration_s=900.0)) == "lvbench_short"  # below 1800 s: open edge
    assert lvbench.preset({}, NativeVideo("x", (), duration_s=5400.0)) == "lvbench_medium"
    assert lvbench.preset({}, NativeVideo("x", (), duration_s=5401.0)) == "lvbench_long"
    assert lvbench.preset({}, NativeVideo("x", ())) is None  # no stated duration: memory.preset (auto)
    assert egomem.preset({}, NativeVideo("x", ())) == "egomem" and senri.preset({}, NativeVideo("x", ())) is None
    assert preset_by_bins({"a": 10, "b": None}, 11) == "b" and preset_by_bins({"a": 10, "b": 20}, 30) == "b"
