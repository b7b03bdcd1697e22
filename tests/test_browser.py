"""The question browser, opened in headless Chromium, and Snakemake's own report.

Two sources of traces, both written by the methods' own code with scripted models: a small DAG run (the small
demo's two videos through every stage with random guessing, memory search and SENRI-Agent: rounds, queries,
checks, verifier reports with evidence frames, working memory), and VideoLucy episodes on a generated clip
(test_videolucy's: backtracking to the needle, and a run forced to answer). Screenshots are kept under the
test's tmp folder (``browser_screenshots``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from conftest import DAG_DEMO
from senri.aggregate import score
from senri.records import Prediction, Question, VideoInfo, schema_of, to_frame
from senri.report.browser import Marks, build_browser, question_href, question_slug, time_strip
from test_videolucy import LOCALIZE_60_90, QUESTION, SEARCH_PATH, answer_json, hall, script_rules  # noqa: F401
from test_videolucy import run as run_videolucy
from test_workflow import N_QUESTIONS, snakemake

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
METHODS = "random,memory_search,senri_agent"


def scripted_rules() -> list[dict]:
    """The agents' script: memory search searches every round, SENRI-Agent verifies once and answers from the
    report (test_workflow's agent script, with rationales)."""
    verify = {"action": "verify", "rationale": "read the sign where I stood",
              "checks": [{"target_context": "the sign in front of me", "objective": "read the sign",
                          "requirements": ["the sign is legible"], "windows": [[3, 9]]}]}
    report = {"observation": "a sign", "evidence_moments": [0],
              "requirement_findings": {"R1": "a sign", "R2": "legible"},
              "requirement_evidence_moments": {"R1": [{"offset_sec": 0}], "R2": [{"offset_sec": 1}]}}
    return [
        {"match": "Update the working memory",
         "text": json.dumps({"note": "r1: a legible sign", "selected_report_ids": ["r1"]})},
        {"match": "observe in these frames", "text": json.dumps(report)},
        {"match": "Target context (R1)", "text": json.dumps(report)},
        {"match": "[r1]", "text": json.dumps({"action": "answer", "answer": "B", "rationale": "the report"})},
        {"match": "This is the last round", "text": json.dumps({"action": "answer", "answer": "A", "rationale": "x"})},
        {"match": "search, verify, answer", "text": json.dumps(verify)},
        {"match": "search, answer",
         "text": json.dumps({"action": "search", "query": "which sign did I see", "rationale": "find the sign"})},
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory, prepared_demo) -> Path:
    workdir = prepared_demo(tmp_path_factory.mktemp("browser_run"), DAG_DEMO)
    script = workdir / "agent.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in scripted_rules()))
    overrides = (f"{DAG_DEMO} method=[{METHODS}] model=[] "
                 f"+model.agent={{backend:scripted,script:{script},concurrency:4,images:true}} "
                 "method.memory_search.retriever=bm25 "
                 "report.pairs=[{group:search,baseline:memory_search/agent,treatment:senri_agent/agent}] "
                 "report.ablations=[] report.no_visual_input=[]")
    snakemake(workdir, "-c2", "--config", f"overrides={overrides}")
    (workdir / "overrides.txt").write_text(overrides)
    return workdir


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser_screenshots")


def chromium(url: str, tmp: Path, *extra: str) -> str:
    """Open ``url`` in headless Chromium (no network, no profile of the user's) and return the DOM after its
    scripts ran."""
    if CHROMIUM is None:
        raise AssertionError("chromium is not installed: `make install` installs Debian's chromium")
    profile = tmp / "chromium-profile"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--window-size=1400,2400", *extra, url],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def dom(url: str, tmp: Path) -> str:
    return chromium(url, tmp, "--dump-dom")


def screenshot(url: str, tmp: Path, path: Path) -> Path:
    chromium(url, tmp, f"--screenshot={path}")
    assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size > 10_000, path
    return path


class Rows(HTMLParser):
    """The question list's body rows as the browser left them: data attributes and whether hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.in_body = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        if tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body:
            self.rows.append(dict(attrs))

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag == "tbody":
            self.in_body = False


def list_rows(page: str) -> list[dict[str, str | None]]:
    parser = Rows()
    parser.feed(page)
    return parser.rows


def visible(rows: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
    return [r for r in rows if "hidden" not in r]


def predictions(run: Path) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in sorted((run / "results/predictions").glob("*/*/*.parquet"))
                      if not p.name.endswith(".config.parquet")], how="diagonal_relaxed")


def index_url(run: Path, query: str = "") -> str:
    return (run / "results/report/questions/index.html").as_uri() + query


def page_url(run: Path, qid: str) -> str:
    return (run / "results/report/questions" / question_href(qid)).as_uri()


@pytest.mark.workflow
def test_the_list_has_one_row_per_prediction_and_the_report_links_it(run, tmp_path, shots):
    rows = list_rows(dom(index_url(run), tmp_path))
    preds = predictions(run)
    assert len(rows) == preds.height == 3 * N_QUESTIONS and len(visible(rows)) == len(rows)
    counted = pl.DataFrame({"run": [r["data-run"] for r in rows]}).group_by("run").len().sort("run")
    expected = (preds.select(run=pl.col("method") + "/" + pl.col("model")).group_by("run").len().sort("run"))
    assert counted.equals(expected)
    page = (run / "results/report.html").read_text()
    assert 'href="report/questions/index.html"' in page
    screenshot(index_url(run), tmp_path, shots / "question_list.png")


@pytest.mark.workflow
def test_filters_by_task_type_and_correctness_in_the_address(run, tmp_path):
    preds = predictions(run)
    task = "OC"
    page = dom(index_url(run, f"?task={task}&correct=no"), tmp_path)
    shown = visible(list_rows(page))
    wrong = preds.filter((pl.col("task_type") == task) & (pl.col("pred").is_null() | (pl.col("pred") != pl.col("answer"))))
    assert len(shown) == wrong.height > 0
    assert {r["data-task"] for r in shown} == {task} and {r["data-correct"] for r in shown} == {"no"}
    assert f"{wrong.height} of {preds.height} rows shown" in page
    one_run = visible(list_rows(dom(index_url(run, "?run=senri_agent/agent&correct=yes"), tmp_path)))
    agent = preds.filter((pl.col("method") == "senri_agent") & (pl.col("pred") == pl.col("answer")))
    assert len(one_run) == agent.height and {r["data-run"] for r in one_run} == {"senri_agent/agent"}


@pytest.mark.workflow
def test_every_question_has_a_page_with_every_run_its_timeline_and_time_strip(run, tmp_path, shots):
    questions = pl.read_parquet(run / "results/questions.parquet")
    folder = run / "results/report/questions"
    assert sorted(p.name for p in (folder / "q").glob("*.html")) == sorted(
        f"{question_slug(q)}.html" for q in questions["qid"])
    q = questions.filter(pl.col("evidence_start_s").is_not_null()).row(0, named=True)
    page = dom(page_url(run, q["qid"]), tmp_path)
    for label in ("random/none", "memory_search/agent", "senri_agent/agent"):
        assert re.search(rf'<section class="run" data-run="{re.escape(label)}">.*?class="timeline"', page, re.S), label
        strip = re.search(rf'<div class="strip-run" data-run="{re.escape(label)}">(.*?)</div>', page, re.S)
        assert strip and '<svg class="strip"' in strip.group(1) and 'class="evidence"' in strip.group(1), label
    assert q["question"] in page and f">{q['qid']}<" in page
    def section(label: str) -> str:
        return re.search(rf'<section class="run" data-run="{re.escape(label)}">(.*?)</section>', page, re.S).group(1)

    def strip(label: str) -> str:
        return re.search(rf'<div class="strip-run" data-run="{re.escape(label)}">(.*?)</div>', page, re.S).group(1)

    agent = section("senri_agent/agent")
    for part in ("round 1", "verify", "check 1", "target context: the sign in front of me", "report r1",
                 "working memory", "note: r1: a legible sign", "<summary>prompt</summary>", "tokens"):
        assert part in agent, part
    assert 'class="frame"' in strip("senri_agent/agent") and "verified cells" in strip("senri_agent/agent")
    assert "query: <b>which sign did I see</b>" in section("memory_search/agent")
    assert "memories read" in strip("memory_search/agent")
    screenshot(page_url(run, q["qid"]), tmp_path, shots / "question_page.png")


@pytest.mark.workflow
def test_evidence_thumbnails_load(run, tmp_path):
    questions = pl.read_parquet(run / "results/questions.parquet")
    q = questions.filter(pl.col("evidence_start_s").is_not_null()).row(0, named=True)
    page = dom(page_url(run, q["qid"]), tmp_path)
    body = re.search(r'<body data-images-loaded="(\d+)" data-images-broken="(\d+)"', page)
    assert body, "the page's image check did not run"
    loaded, broken = map(int, body.groups())
    assert broken == 0 and loaded >= 3  # the evidence window's middle and the verifier's two cited frames
    assert re.search(r'<img src="frames/[^"]+" alt="3\.0s">', page) and re.search(r'<img src="frames/[^"]+" alt="4\.0s">', page)
    frames = list((run / "results/report/questions/q/frames").glob("*.jpg"))
    assert frames and all(f.read_bytes()[:2] == b"\xff\xd8" for f in frames)
    # A copied folder that lost a frame shows it (no silently broken picture).
    cited = re.findall(r'src="(frames/[^"]+\.jpg)"', page)
    copy = tmp_path / "copy"
    shutil.copytree(run / "results/report/questions", copy / "report/questions")
    (copy / "report/questions/q" / cited[0]).unlink()
    copied = dom((copy / "report/questions" / question_href(q["qid"])).as_uri(), tmp_path)
    assert re.search(r'data-images-broken="[1-9]', copied) and "frame file missing" in copied


@pytest.mark.workflow
def test_the_pair_table_links_its_discordant_questions(run):
    page = (run / "results/report.html").read_text()
    line = re.search(r'<p class="note discordant">(.*?)</p>', page, re.S).group(1)
    won, lost = map(int, re.search(r"won (\d+) .*lost (\d+)", line).groups())
    preds = predictions(run)
    a = preds.filter(pl.col("method") == "memory_search").select("qid", a=pl.col("pred") == pl.col("answer"))
    t = preds.filter(pl.col("method") == "senri_agent").select("qid", t=pl.col("pred") == pl.col("answer"))
    both = a.join(t, on="qid")
    assert won == both.filter(pl.col("t") & ~pl.col("a")).height
    assert lost == both.filter(pl.col("a") & ~pl.col("t")).height
    links = re.findall(r'href="(report/questions/q/[^"]+)"', line)
    assert len(links) == won + lost and all((run / "results" / link).is_file() for link in links)


@pytest.mark.workflow
def test_snakemake_report_lists_the_tables_figures_and_the_browser(run, tmp_path):
    overrides = (run / "overrides.txt").read_text()
    out = tmp_path / "report.zip"
    snakemake(run, "--config", f"overrides={overrides}", "--report", str(out))
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        page = archive.read("report/report.html").decode()
    # Snakemake stores each result under report/data/raw/<digest>/ with its own name (a folder's files keep their
    # path inside the folder); its page lists every result by name, category and caption.
    stored = {n.split("/raw/", 1)[1].split("/", 1)[1] for n in names if "/raw/" in n}
    for wanted in ("main.csv", "per_video.csv", "pairs.csv", "paired_stats.csv", "ablations.csv", "task_types.png",
                   "letters.png", "report.html", "index.html"):
        assert wanted in stored and wanted in page, wanted
    questions = pl.read_parquet(run / "results/questions.parquet")
    assert {f"q/{question_slug(q)}.html" for q in questions["qid"]} <= stored
    assert any(n.startswith("q/frames/") and n.endswith(".jpg") for n in stored)
    for caption in ("Question browser", "Tables", "Figures", "The question browser: a sortable, filterable list",
                    "Main table: accuracy"):
        assert caption in page, caption


def test_videolucy_iterations_periods_and_the_forced_call_on_the_page(hall, tmp_path, shots):
    """Two VideoLucy runs on the hall clip: one backtracks to the needle (64–65 s) and answers confidently, one is
    never confident and makes the forced call after one iteration."""
    found, _, _ = run_videolucy(hall, tmp_path / "found", script_rules(LOCALIZE_60_90, SEARCH_PATH))
    forced, _, _ = run_videolucy(hall, tmp_path / "forced", script_rules(LOCALIZE_60_90, SEARCH_PATH[:1],
                                                                       answer=answer_json(False)), max_iterations=1)
    forced["method"] = "videolucy_1_iteration"
    predictions = pl.DataFrame([found, forced], schema=schema_of(Prediction))
    questions = to_frame([QUESTION], Question)
    videos = to_frame([hall["info"]], VideoInfo)
    index = build_browser(score(predictions, questions), predictions, questions, videos, tmp_path / "questions")
    url = (index.parent / question_href(QUESTION.qid)).as_uri()
    page = dom(url, tmp_path)
    lucy = re.search(r'<section class="run" data-run="videolucy/agent">(.*?)</section>', page, re.S).group(1)
    for part in ("preset <b>mlvu_short</b>", "iteration 1: backtrack coarse 60–90s", "iteration 2: backtrack fine 60–65s",
                 "depth: coarse → fine;", "depth: fine → ultra_fine;", "what do I hold?", "answering agent afterwards: confident",
                 "<summary>prompt</summary>", "localize"):
        assert part in lucy, part
    assert "answer:forced" not in lucy
    one = re.search(r'<section class="run" data-run="videolucy_1_iteration/agent">(.*?)</section>', page, re.S).group(1)
    assert "forced answer" in one and "answer:forced" in one and "iteration 2" not in one
    strip = re.search(r'<div class="strip-run" data-run="videolucy/agent">(.*?)</div>', page, re.S).group(1)
    assert "periods searched" in strip and "cited by the answer" in strip and "memories read" in strip
    assert re.search(r"<title>cited by the answer \(64\.0–65\.0s\)</title>", strip)
    body = re.search(r'<body data-images-loaded="(\d+)" data-images-broken="(\d+)"', page)
    assert body and body.groups() == ("1", "0")  # the evidence window's middle, decoded from the clip
    screenshot(url, tmp_path, shots / "videolucy_page.png")


def test_question_slugs_are_file_names_and_distinct():
    assert question_slug("demo_01_q3") == "demo_01_q3"
    odd = [question_slug(q) for q in ("a/b", "a_b", "a b", "../x")]
    assert len(set(odd)) == 4 and all(re.fullmatch(r"[A-Za-z0-9._-]+", s) and not s.startswith(".") for s in odd)


def test_the_time_strip_places_marks_on_the_video_timeline():
    marks = Marks(memories=[(0.0, 30.0, "coarse 0–30s")], cells=[(45.0, 60.0, "round 2")], frames=[75.0])
    svg = time_strip(100.0, (50.0, 55.0), marks)
    assert re.search(r'class="evidence" x="500.0" y="0" width="50.0"', svg)
    assert 'class="mark" x="0.0" y="20" width="300.0"' in svg and 'x="450.0"' in svg
    assert re.search(r'class="frame" x1="750.0"', svg)


def test_the_list_shows_what_each_run_did_and_flags_a_memory_method_that_retrieved_nothing():
    """Issue 34: rounds, searches, memories returned and QA calls are columns of the list, and a memory method
    that answered with nothing retrieved is flagged, so a run that never searched is visible at a glance."""
    from senri.report.browser import index_page

    base = {"video_id": "v", "qid": "q1", "task_type": "L", "direction": "ES", "answer": "A", "pred": "A",
            "correct": True, "model": "m", "memory": "magic_video/perception", "latency_s": 1.0}
    rows = [{**base, "method": "magic_video", "rounds": 1, "searches": 0, "memories_returned": 0, "qa_calls": 1,
             "answered_without_retrieval": 1},
            {**base, "method": "worldmm", "memory": "worldmm/perception", "rounds": 5, "searches": 4,
             "memories_returned": 11, "qa_calls": 1, "bypasses": 0, "failed_search_calls": 2}]
    labels = {(r["method"], r["model"], r["memory"]): f"{r['method']}/{r['model']}" for r in rows}
    page = index_page(rows, labels, "../../report.html")
    listed = list_rows(page)
    assert [r["data-flag"] for r in listed] == ["no-retrieval", "search-fallback"]
    assert "<th>rounds</th><th>searches</th><th>memories</th><th>QA calls</th>" in page
    assert '<td class="num">5</td><td class="num">4</td><td class="num">11</td><td class="num">1</td>' in page
