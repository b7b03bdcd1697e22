"""The report: paper-layout tables with paired statistics, figures, failure marks, one self-contained page."""

from __future__ import annotations

import base64
import re

import polars as pl
import pytest

from senri.config import write_sidecar
from senri.ingest import ingest
from senri.records import Prediction, to_frame, write_table
from senri.report import build_report

CONFIG = {
    "bootstrap_resamples": 2000,
    "confidence": 0.95,
    "pairs": [{"group": "vision", "baseline": "blind/m", "treatment": "direct_8/m"},
              {"group": "absent", "baseline": "blind/m", "treatment": "senri_agent/m"}],
    "ablations": [{"reference": "direct_8/m", "variants": {"fewer frames": "direct_4/m"}}],
    "no_visual_input": [{"label": "Question and options only", "run": "blind/m"},
                        {"label": "Direct perception (8 frames)", "run": "direct_8/m"}],
}


@pytest.fixture(scope="module")
def questions(small_demo):
    return ingest([small_demo["questions"]], small_demo["videos_dir"], [".mp4"])


def write_run(root, questions, method, model, approach, correct_every, frames=None, failures=(), memory="none",
              method_extra=None):
    """Predictions where every ``correct_every``-th question is right; ``failures`` maps qid index → kind."""
    rows = []
    for i, q in enumerate(questions.iter_rows(named=True)):
        right = i % correct_every == 0
        pred = q["answer"] if right else "ABCD"[("ABCD".index(q["answer"]) + 1) % 4]
        kind = dict(failures).get(i)
        error = {"timeout": "ReadTimeout: timed out", "error": "HTTP 500: boom"}.get(kind)
        if kind:
            pred = None
        rows.append(Prediction(video_id=q["video_id"], qid=q["qid"], task_type=q["task_type"], method=method,
                               model=model, pred=pred, answer=q["answer"], correct=pred == q["answer"],
                               parse_ok=kind is None, raw_output=pred, n_llm_calls=1, n_vlm_calls=0,
                               prompt_tokens=10, completion_tokens=1, latency_s=0.1, error=error, memory=memory))
    paths = []
    for video, part in to_frame(rows, Prediction).group_by("video_id"):
        path = root / "predictions" / method / model / f"{video[0]}.parquet"
        write_table(part, path, Prediction)
        method_config = {"name": method, "approach": approach, "implementation": method.split("_")[0],
                         **({"frames": frames} if frames else {}), **(method_extra or {})}
        write_sidecar(path, "answer", {"seed": 0, "method": method_config, "model": {"name": model}})
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def report(tmp_path_factory, questions):
    root = tmp_path_factory.mktemp("report")
    paths = []
    paths += write_run(root, questions, "random", "none", "baseline", 4)
    paths += write_run(root, questions, "blind", "m", "baseline", 3, failures={1: "parse", 2: "timeout"})
    paths += write_run(root, questions, "direct_4", "m", "direct_perception", 2, frames=4)
    paths += write_run(root, questions, "direct_8", "m", "direct_perception", 1, frames=8, failures={5: "error"})
    html = build_report(paths, questions, root / "out", CONFIG, seed=7)
    return root / "out", html


def test_tables_follow_the_paper_layouts(report):
    out, _ = report
    main = pl.read_parquet(out / "report/tables/main.parquet")
    assert main["approach"].to_list() == ["baseline", "baseline", "direct_perception", "direct_perception"]
    blind = main.filter(pl.col("method") == "blind").row(0, named=True)
    assert (blind["parse_failures"], blind["errors"], blind["timeouts"], blind["missing"]) == (1, 1, 1, 0)
    pairs = pl.read_parquet(out / "report/tables/pairs.parquet")
    assert pairs["run"].to_list() == ["blind/m", "direct_8/m", ""]
    assert re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\] p=\S+", pairs["total"][2])
    ablations = pl.read_parquet(out / "report/tables/ablations.parquet")
    assert ablations["variant"].to_list()[1] == "fewer frames"
    no_visual = pl.read_parquet(out / "report/tables/no_visual_input.parquet")
    assert no_visual["setting"][0] == "Random guessing (expected)" and no_visual["total"][0] == "25.0"
    # Model calls per question (VideoLucy A.8 layout): no VideoLucy run here, so no published A.8 rows beside them.
    calls = pl.read_parquet(out / "report/tables/llm_calls.parquet")
    assert calls.filter(pl.col("method") == "blind")["agent_mean"].to_list() == [1.0]
    assert "source" not in calls.columns and calls.height == main.height
    # Every marked run carries † in the Markdown of each table it appears in.
    for name in ("main", "pairs", "no_visual_input"):
        text = (out / f"report/tables/{name}.md").read_text()
        assert re.search(r"(blind|Question and options only|Original) †", text), name


def test_paired_statistics_for_every_category_with_the_seed(report, questions):
    out, _ = report
    stats = pl.read_parquet(out / "report/tables/paired_stats.parquet")
    vision = stats.filter(pl.col("comparison") == "vision: blind/m → direct_8/m")
    assert vision["category"].to_list() == ["total", "es", "l", "np", "oc", "rr", "se", "rer", "ter"]
    total = vision.filter(pl.col("category") == "total").row(0, named=True)
    assert total["n"] == questions.height and total["seed"] == 7 and total["resamples"] == 2000
    assert total["ci_low_pp"] <= total["delta_pp"] <= total["ci_high_pp"]
    # direct_8 is right everywhere except its one error; blind is right on every third question minus 2 failures.
    assert total["treatment_correct"] == questions.height - 1
    assert total["b_treatment_only"] - total["c_baseline_only"] == total["treatment_correct"] - total["baseline_correct"]


def test_figures_are_written_as_png_and_svg_and_embedded(report):
    out, html_path = report
    for name in ("frame_budget", "paired_change", "task_types", "letters"):
        assert (out / f"report/figures/{name}.png").stat().st_size > 1000, name
        assert (out / f"report/figures/{name}.svg").read_text().lstrip().startswith("<?xml")
    page = html_path.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    for heading in ("Table 2 layout", "Table 3 layout", "Table 4 layout", "Table 11 layout", "Fig. 5 layout",
                    "Fig. 6 layout", "Accuracy by task type", "Answer letters", "Paired statistics"):
        assert heading in page, heading
    assert "src=\"http" not in page and "<link" not in page  # self-contained
    assert "pair absent: run(s) not in this run set" in page


def test_the_report_is_deterministic(report, questions, tmp_path):
    out, html_path = report
    paths = sorted((out.parent / "predictions").rglob("*.parquet"))
    again = build_report(paths, questions, tmp_path, CONFIG, seed=7)
    assert again.read_text() == html_path.read_text()


def test_the_memory_captioner_names_runs_in_every_table_and_the_page(questions, tmp_path):
    paths = write_run(tmp_path / "perception", questions, "videolucy", "m", "persistent_memory", 3, memory="perception")
    paths += write_run(tmp_path / "vlm", questions, "videolucy", "m", "persistent_memory", 2,
                       memory="qwen25vl7b_vllm")
    paths += write_run(tmp_path, questions, "blind", "m", "baseline", 4)
    config = {**CONFIG, "pairs": [{"group": "captioner", "baseline": "videolucy/m/perception",
                                   "treatment": "videolucy/m/qwen25vl7b_vllm"},
                                  {"group": "ambiguous", "baseline": "blind/m", "treatment": "videolucy/m"}],
              "ablations": [], "no_visual_input": [{"label": "Question and options only", "run": "blind/m"}]}
    html = build_report(paths, questions, tmp_path / "out", config, seed=7).read_text()
    tables = tmp_path / "out/report/tables"
    main = pl.read_parquet(tables / "main.parquet")
    assert sorted(zip(main["method"], main["memory"])) == [
        ("blind", "none"), ("videolucy", "perception"), ("videolucy", "qwen25vl7b_vllm")]
    pairs = pl.read_parquet(tables / "pairs.parquet")
    assert pairs["memory"].to_list() == ["perception", "qwen25vl7b_vllm", ""]
    assert pl.read_parquet(tables / "no_visual_input.parquet")["memory"].to_list() == ["none", "none"]
    assert "videolucy/m: ran over more than one memory" in html
    assert "qwen25vl7b_vllm" in (tables / "main.md").read_text() and ">perception<" in html
    # A VideoLucy run set: appendix A.8's published rows beside the runs' own, marked as published.
    calls = pl.read_parquet(tables / "llm_calls.parquet")
    assert calls.filter(pl.col("source") == "this run set").height == 3
    assert "VideoLucy (published)" in calls["method"].to_list() and "Model calls per question" in html
    assert "(published)" in (tables / "llm_calls.md").read_text()


def _unique_questions(questions, k):
    """``k`` question texts that occur in no other question, so a scripted rule matches exactly one prompt."""
    texts = questions.sort("qid")["question"].to_list()
    unique = [t for t in texts if sum(t in other for other in texts) == 1]
    assert len(unique) >= k
    return unique[:k]


def test_run_health_of_a_scripted_run_matches_its_hand_counted_calls(tmp_path, questions, small_demo):
    """A blind run on the scripted backend: one call times out, one backend error, one unreadable reply; every
    other reply says (B). The run-health table must hold exactly those counts, read from the prediction files."""
    import json

    from senri.answer import answer_video
    from senri.probe import probe

    timed_out, broken, vague = _unique_questions(questions, 3)
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(rule) + "\n" for rule in [
        {"match": timed_out, "error": "ReadTimeout: timed out"},
        {"match": broken, "error": "HTTP 500: boom"},
        {"match": vague, "text": "Hard to say from what I saw."},
        {"text": "The answer is (B)."},
    ]))
    record = tmp_path / "record.jsonl"
    stage = {"seed": 0, "method": {"name": "blind", "implementation": "blind", "approach": "baseline",
                                   "uses_model": True, "answer_format": "text"},
             "model": {"name": "scripted", "backend": "scripted", "script": str(script), "record": str(record)}}
    paths = []
    for video_id, video_path in small_demo["videos"].items():
        rows = answer_video(questions, probe(video_path, video_id), stage)
        path = tmp_path / "predictions" / "blind" / "scripted" / f"{video_id}.parquet"
        write_table(rows, path, Prediction)
        write_sidecar(path, "answer", stage)
        paths.append(path)
    paths += write_run(tmp_path, questions, "random", "none", "baseline", 4)
    html = build_report(paths, questions, tmp_path / "out", CONFIG, seed=7).read_text()

    # Hand count: one request per question (the record), the three scripted failures, (B) right elsewhere.
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(requests) == questions.height
    assert sum(timed_out in json.dumps(r) for r in requests) == 1
    special = questions.filter(pl.col("question").is_in([timed_out, broken, vague]))
    right = questions.filter(~pl.col("question").is_in([timed_out, broken, vague]) & (pl.col("answer") == "B")).height
    assert special.height == 3
    health = pl.read_parquet(tmp_path / "out/report/tables/run_health.parquet")
    blind = health.filter(pl.col("method") == "blind").row(0, named=True)
    assert {k: blind[k] for k in ("questions", "correct", "parse_failures", "errors", "timeouts", "missing")} == {
        "questions": questions.height, "correct": right, "parse_failures": 1, "errors": 2, "timeouts": 1,
        "missing": 0}
    assert all(blind[k] == 0 for k in ("forced_answers", "forced_recovered", "context_trims", "truncated_captions",
                                       "failed_captions", "builder_losses", "capped_cells", "cell_s_requested",
                                       "cell_s_seen", "failed_memory_updates", "stripped_checks",
                                       "refused_checks", "repeated_queries"))
    assert blind["seen_share"] is None
    assert health.filter(pl.col("method") == "random")["timeouts"].to_list() == [0]
    for suffix in ("csv", "md"):
        assert (tmp_path / f"out/report/tables/run_health.{suffix}").stat().st_size > 0
    assert "<h2>Run health</h2>" in html and "Timed-out calls" in html and "Builder losses" in html


def test_runs_of_release_trained_models_on_restated_prompts_are_marked_and_told_how_to_run_the_release_s(
        questions, tmp_path):
    """Issue 38 item 4: a ParaVT run on senri's restatement gets § and a sentence naming prompts_from_release and
    the release's repository; the same method on the release's strings and a method of senri's own get nothing.
    Issue 54: a run that set an option departing from its release (EG-Agent's ``answer_reading: lenient``) gets
    ¶ and a sentence naming the option; one on the release's values gets nothing."""
    paths = write_run(tmp_path, questions, "paravt", "pv8b", "evidence_seeking", 2,
                      method_extra={"prompts": "paravt", "prompt_identity": {"family": "paravt", "files": {}}})
    paths += write_run(tmp_path, questions, "video_o3", "o3", "evidence_seeking", 2,
                       method_extra={"prompts": "video_o3", "prompt_identity": {
                           "family": "video_o3", "files": {}, "release": {"from_release": ["system"]}}})
    paths += write_run(tmp_path, questions, "blind", "m", "baseline", 3, method_extra={"prompts": "answer"})
    paths += write_run(tmp_path, questions, "egagent", "lenient", "persistent_memory", 2,
                       method_extra={"answer_reading": "lenient", "grader_routing": "release"})
    paths += write_run(tmp_path, questions, "egagent", "faithful", "persistent_memory", 2,
                       method_extra={"answer_reading": "release", "max_windows": None})
    build_report(paths, questions, tmp_path / "out", {**CONFIG, "pairs": [], "ablations": [],
                                                      "no_visual_input": []}, seed=0)
    main = (tmp_path / "out/report/tables/main.md").read_text()
    assert re.search(r"^\| paravt §( †)? \| pv8b \|", main, re.MULTILINE), main
    assert re.search(r"^\| video_o3( †)? \| o3 \|", main, re.MULTILINE) and "| blind" in main
    assert main.count(" §") == 1
    assert re.search(r"^\| egagent ¶( †)? \| lenient \|", main, re.MULTILINE), main
    assert main.count(" ¶") == 1 and ("¶ egagent/lenient departs from its release by option: "
                                      "answer_reading='lenient' (the release: 'release')." in main)
    assert ("§ paravt/pv8b ran on senri's restatement of its release's prompts (config/prompts/paravt/)" in main
            and "method.paravt.prompts_from_release=<a checkout of EvolvingLMMs-Lab/ParaVT @cf55249>" in main)
    page = (tmp_path / "out/report.html").read_text()
    assert 'class="note restated">§ paravt/pv8b ran on' in page


def test_the_report_says_next_to_the_main_table_which_runs_cannot_be_told_apart_from_chance(report, questions):
    from senri.report.tables import run_filter
    from senri.stats import compare

    out, html_path = report
    chance = pl.read_parquet(out / "report/tables/chance.parquet")
    assert chance["run"].to_list() == ["blind/m", "direct_4/m", "direct_8/m"]  # every run but random itself
    predictions = pl.concat([pl.read_parquet(p) for p in sorted((out.parent / "predictions").rglob("*.parquet"))])
    verdicts = {}
    for row in chance.iter_rows(named=True):
        # The project's paired statistics over the same questions, recomputed here from the predictions.
        base, treat = (predictions.filter(run_filter(run)).sort("qid") for run in ("random/none", row["run"]))
        assert base["qid"].to_list() == treat["qid"].to_list()
        expected = compare((base["pred"] == base["answer"]).fill_null(False).to_list(),
                           (treat["pred"] == treat["answer"]).fill_null(False).to_list(), base["video_id"].to_list(),
                           resamples=CONFIG["bootstrap_resamples"], seed=7)
        assert (row["ci_low_pp"], row["ci_high_pp"], row["delta_pp"]) == (
            expected.ci_low_pp, expected.ci_high_pp, expected.delta_pp)
        assert row["covers_zero"] == (expected.ci_low_pp <= 0 <= expected.ci_high_pp)
        verdicts[row["run"]] = row["covers_zero"]
    assert verdicts == {"blind/m": True, "direct_4/m": False, "direct_8/m": False}
    page = html_path.read_text()
    main_section = page[page.index("Main results (Table 2 layout)"):page.index("<h2>Run health</h2>")]
    assert "cannot be told apart from chance" in main_section and "make evidence" in main_section
    assert "blind/m: its 95% paired interval against random/none on the same" in main_section
    assert "direct_8/m: its 95%" not in main_section
    markdown = (out / "report/tables/chance.md").read_text()
    assert "| blind/m |" in markdown and "make evidence" in markdown


# --- page width: the Table 3 layout and the paired statistics fit report.html's 1200-px body (issue 28) ---------
PAGE_PX = 1200  # render.STYLE: body max-width
WIDE_TABLES = ("Paired comparisons (Table 3 layout)", "Ablations (Table 4 layout)", "Paired statistics", "Run health")


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory, questions):
    """The paper's run names (memory_search/qwen25vl7b_vllm, three-part names over two memories): the widest
    cells the tables get."""
    root = tmp_path_factory.mktemp("wide")
    model = "qwen25vl7b_vllm"
    config = {**CONFIG, "pairs": [
        {"group": "model vs chance", "baseline": "random/none", "treatment": "blind/smollm2"},
        {"group": "memory search", "baseline": f"memory_search/{model}", "treatment": f"senri_agent/{model}"},
        {"group": "captioner", "baseline": "videolucy/smollm2/perception", "treatment": f"videolucy/smollm2/{model}"}],
        "ablations": [{"reference": f"senri_agent/{model}",
                       "variants": {"w/o Target Guidance": f"senri_agent_no_tg/{model}",
                                    "w/o Working Memory": f"senri_agent_no_wm/{model}"}}],
        "no_visual_input": [{"label": "Question and options only", "run": "blind/smollm2"}]}
    paths = write_run(root, questions, "random", "none", "baseline", 4)
    paths += write_run(root, questions, "blind", "smollm2", "baseline", 3, failures={1: "parse", 2: "timeout"})
    paths += write_run(root / "p", questions, "videolucy", "smollm2", "persistent_memory", 4, memory="perception")
    paths += write_run(root / "v", questions, "videolucy", "smollm2", "persistent_memory", 2, memory=model)
    for method, every in (("memory_search", 2), ("senri_agent", 1), ("senri_agent_no_tg", 3), ("senri_agent_no_wm", 2)):
        paths += write_run(root, questions, method, model, "evidence_seeking", every, memory=model,
                           failures={3: "error"})
    return build_report(paths, questions, root / "out", config, seed=7)


def _table_cells(page: str) -> list[tuple[str, list[list[tuple[int, int]]]]]:
    """(section, rows of (longest unbreakable run of characters, colspan)) for every table of the page."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.section, self.in_h2, self.cell, self.span = [], "", False, None, 1

        def handle_starttag(self, tag, attrs):
            if tag == "h2":
                self.in_h2, self.section = True, ""
            elif tag == "table":
                self.tables.append((self.section, []))
            elif tag == "tr":
                self.tables[-1][1].append([])
            elif tag in ("td", "th"):
                self.cell, self.span = [""], int(dict(attrs).get("colspan", 1))
            elif tag == "wbr" and self.cell is not None:
                self.cell.append("")  # a break opportunity ends a word

        def handle_endtag(self, tag):
            if tag == "h2":
                self.in_h2 = False
            elif tag in ("td", "th") and self.cell is not None:
                words = [w for part in self.cell for w in part.split()]
                self.tables[-1][1][-1].append((max(map(len, words), default=0), self.span))
                self.cell = None

        def handle_data(self, data):
            if self.in_h2:
                self.section += data
            elif self.cell is not None:
                self.cell[-1] += data

    parser = Tables()
    parser.feed(page)
    return parser.tables


def test_the_wide_tables_cannot_be_narrower_than_the_page_estimate(wide_report):
    """Without a browser: a table is at least as wide as the sum of its columns' longest unbreakable words
    (12-px text ≈ 6.9 px a character, 11 px of padding and border a cell; within 3 % of headless Chromium's
    narrowest layout of these tables). Before issue 28 the Table 3 layout needed ≈ 1,280 px and the paired
    statistics ≈ 1,640 px by this estimate."""
    estimates = {}
    for section, rows in _table_cells(wide_report.read_text()):
        widest: dict[int, int] = {}
        for row in rows:
            if len(row) == 1 and row[0][1] > 1:
                continue  # a group row spans the table and wraps
            for column, (chars, _) in enumerate(row):
                widest[column] = max(widest.get(column, 0), chars)
        estimates.setdefault(section, []).append(sum(6.9 * chars + 11 for chars in widest.values()))
    for section in WIDE_TABLES:
        assert section in estimates, section
        assert max(estimates[section]) <= PAGE_PX, (section, estimates[section])


def _chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="needs Debian's chromium (apt-get install -y chromium)")
def test_the_wide_tables_fit_the_page_in_headless_chromium(wide_report, tmp_path):
    """Rendered at a 1280-px window: no table of the page extends past the body (no sideways scrolling)."""
    import json
    import subprocess

    measure = """<script>window.addEventListener('load', () => {
      const body = document.body.getBoundingClientRect(), out = [];
      document.querySelectorAll('table').forEach((t) => {
        let h = t.previousElementSibling; while (h && h.tagName !== 'H2') h = h.previousElementSibling;
        out.push({section: h ? h.textContent : '', right: t.getBoundingClientRect().right});
      });
      const pre = document.createElement('pre'); pre.id = 'measured';
      pre.textContent = JSON.stringify({body: body.right, page: document.documentElement.scrollWidth,
                                        view: document.documentElement.clientWidth, tables: out});
      document.body.appendChild(pre);
    });</script>"""
    page = tmp_path / "measured.html"
    page.write_text(wide_report.read_text().replace("</body>", measure + "</body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                          .replace("&amp;", "&"))
    over = [t for t in measured["tables"] if t["right"] > measured["body"] + 0.5]
    assert not over, over
    assert measured["page"] <= measured["view"]  # nothing scrolls sideways
    sections = {t["section"] for t in measured["tables"]}
    assert set(WIDE_TABLES) <= sections, sections


def test_run_health_counts_that_are_zero_in_every_run_collapse_into_one_line():
    """Issue 59: a count that is 0 in every run leaves the page's table for one line naming it; a count that is
    not 0 in some run stays, 0s included; questions, correct and accuracy always stay."""
    from senri.aggregate import RUN_HEALTH_COLUMNS, RUN_HEALTH_LABELS, RUN_KEYS
    from senri.report import run_health_html

    rows = [{**{k: f"{k}_{i}" for k in RUN_KEYS}, **{c: 0 for c in RUN_HEALTH_COLUMNS}} for i in range(2)]
    rows[1].update(timeouts=3, correct=0, accuracy=0.0)
    rows[0].update(questions=4, correct=2, accuracy=50.0, seen_share=None)
    page = run_health_html(pl.DataFrame(rows), 1)
    headers = re.findall(r"<th>(.*?)</th>", page.replace("<wbr>", ""))
    line = re.search(r"0 in every run: (.*?)\.</p>", page).group(1).split("; ")
    assert {RUN_HEALTH_LABELS[c] for c in ("questions", "correct", "accuracy", "timeouts", "seen_share")} <= set(headers)
    assert RUN_HEALTH_LABELS["context_trims"] in line and RUN_HEALTH_LABELS["timeouts"] not in line
    assert len(set(headers)) - len(RUN_KEYS) + len(line) == len(RUN_HEALTH_COLUMNS)
