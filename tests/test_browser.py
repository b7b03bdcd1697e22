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
import urllib.parse
from html import unescape as html_unescape
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
    overrides = (f"{DAG_DEMO} sampling.build=[] method=[{METHODS}] model=[] "  # no frame store: no page reads one
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
    """The rows of the list (``data-i``) or of the grid (``data-qid``), not those of the per-run table."""
    parser = Rows()
    parser.feed(page)
    return [r for r in parser.rows if "data-i" in r or "data-qid" in r]


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
    assert 'href="report/questions/index.html"' in page and 'href="report/questions/grid.html"' in page
    assert 'href="questions/index.html"' in (run / "results/report/index.html").read_text()
    # The per-run line counts what the prediction files hold (no retrieval: memory runs only).
    page = dom(index_url(run), tmp_path)
    for label, cells in re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', page, re.S):
        method = label.split("/")[0]
        mine = preds.filter(pl.col("method") == method)
        values = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)]
        right = mine.filter(pl.col("pred") == pl.col("answer")).height
        assert values[1] == str(mine.height) and values[2].startswith(f"{right}/{mine.height} ("), label
        no_retrieval = int((mine["answered_without_retrieval"] > 0).sum())
        assert values[3] == ("–" if method == "random" else f"{no_retrieval}/{mine.height}"), label
        assert values[4] == f"{int((mine['forced_answers'] > 0).sum())}/{mine.height}", label
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
    assert f"accuracy of the rows shown: 0 of {wrong.height} right" in page
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
        assert re.search(rf'<section class="run"[^>]* data-run="{re.escape(label)}">.*?class="timeline"', page, re.S), label
    for label in ("memory_search/agent", "senri_agent/agent"):
        strip = re.search(rf'<div class="strip-run" data-run="{re.escape(label)}">(.*?)</div>', page, re.S)
        assert strip and '<svg class="strip"' in strip.group(1) and 'class="evidence"' in strip.group(1), label
    assert q["question"] in page and f">{q['qid']}<" in page

    def section(label: str) -> str:
        return re.search(rf'<section class="run"[^>]* data-run="{re.escape(label)}">(.*?)</section>', page, re.S).group(1)

    def strip(label: str) -> str:
        return re.search(rf'<div class="strip-run" data-run="{re.escape(label)}">(.*?)</div>', page, re.S).group(1)

    agent = section("senri_agent/agent")
    for part in ("round 1", "verify", "check 1", "target context: the sign in front of me", "report r1",
                 "working memory", "note: r1: a legible sign", "<summary>prompt</summary>", "tokens"):
        assert part in agent, part
    assert 'class="frame"' in strip("senri_agent/agent") and "verified cells" in strip("senri_agent/agent")
    assert "query: <b>which sign did I see</b>" in section("memory_search/agent")
    assert "memories read" in strip("memory_search/agent")
    # Honest strips (issue 39 item 5): random reads no video and gets words, not an empty strip; a lane shows
    # only where the trace has marks; each mark links to the trace step it came from.
    assert "no video read" in strip("random/none") and "<svg" not in strip("random/none")
    assert "cited frames" not in strip("memory_search/agent") and "evidence window</text>" not in strip("memory_search/agent")
    for run_label in ("memory_search/agent", "senri_agent/agent"):
        targets = re.findall(r'<a href="#([^"]+)"><(?:rect|line) class="(?:mark|frame)"', strip(run_label))
        assert targets and all(f'id="{t}"' in page for t in targets), run_label
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
    lucy = re.search(r'<section class="run"[^>]* data-run="videolucy/agent">(.*?)</section>', page, re.S).group(1)
    for part in ("preset <b>mlvu_short</b>", "iteration 1: backtrack coarse 60–90s", "iteration 2: backtrack fine 60–65s",
                 "depth: coarse → fine;", "depth: fine → ultra_fine;", "what do I hold?", "answering agent afterwards: confident",
                 "<summary>prompt</summary>", "localize"):
        assert part in lucy, part
    assert "answer:forced" not in lucy
    one = re.search(r'<section class="run"[^>]* data-run="videolucy_1_iteration/agent">(.*?)</section>', page, re.S).group(1)
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
    assert 'class="mark" x="0.0" y="4" width="300.0"' in svg and 'x="450.0"' in svg
    assert re.search(r'class="frame" x1="750.0"', svg)
    assert "evidence window</text>" not in svg and "periods searched" not in svg  # no empty lane
    question = time_strip(100.0, (50.0, 55.0), Marks(), evidence_lane=True)
    assert "evidence window</text>" in question and "cited frames" not in question
    linked = time_strip(100.0, None, Marks(cells=[(1.0, 2.0, "round 1", "round-1")]), prefix="r-x")
    assert '<a href="#r-x-round-1"><rect class="mark"' in linked


def test_the_list_shows_what_each_run_did_and_flags_a_memory_method_that_retrieved_nothing():
    """Issue 34: rounds, searches, memories returned and QA calls are columns of the list, and a memory method
    that answered with nothing retrieved is flagged, so a run that never searched is visible at a glance."""
    from senri.report.browser import index_page, list_script, shown_rows

    base = {"video_id": "v", "qid": "q1", "task_type": "L", "direction": "ES", "answer": "A", "pred": "A",
            "correct": True, "model": "m", "memory": "magic_video/perception", "latency_s": 1.0}
    rows = [{**base, "method": "magic_video", "rounds": 1, "searches": 0, "memories_returned": 0, "qa_calls": 1,
             "answered_without_retrieval": 1},
            {**base, "method": "worldmm", "memory": "worldmm/perception", "rounds": 5, "searches": 4,
             "memories_returned": 11, "qa_calls": 1, "bypasses": 0, "failed_search_calls": 2}]
    labels = {(r["method"], r["model"], r["memory"]): f"{r['method']}/{r['model']}" for r in rows}
    page = index_page(rows, labels, "../index.html")
    script = list_script(shown_rows(rows, labels), {})  # the list's rows, which the page inserts a page at a time
    page += "<table><tbody>" + "".join(json.loads(script.split(" = ", 1)[1].rstrip(";\n"))) + "</tbody></table>"
    listed = list_rows(page)
    assert [r["data-flag"] for r in listed] == ["no-retrieval", "search-fallback"]
    heads = "".join(f'<th data-key="{k}">{h}</th>' for k, h in (
        ("rounds", "rounds"), ("searches", "searches"), ("memories", "memories"), ("checks", "checks"),
        ("cells", "cells"), ("frames", "frames"), ("tools", "tool calls"), ("qa", "QA calls")))
    assert heads in page
    assert "".join(f'<td class="num">{n}</td>' for n in (5, 4, 11, 0, 0, 0, 0, 1)) in page
    # The per-run line: magic_video's one question answered without retrieval, worldmm's none.
    runs = dict(re.findall(r'<tr data-run="([^"]+)">.*?<td class="num no-retrieval">(.*?)</td>', page))
    assert re.sub(r"<[^>]+>", "", runs["magic_video/m"]) == "1/1" and runs["worldmm/m"] == "0/1"


@pytest.mark.workflow
def test_both_views_page_through_their_rows(run, tmp_path):
    """Issue 53: a view shows a page of rows (``rows=``, ``page=`` in the address), not 37,800 at once; the list
    makes its table rows from ``list.js`` for the page it shows only."""
    total = predictions(run).height
    page = dom(index_url(run, "?rows=5&page=2"), tmp_path)
    shown = list_rows(page)
    assert [r["data-i"] for r in shown] == ["5", "6", "7", "8", "9"] and visible(shown) == shown
    pages = -(-total // 5)
    assert f"{total} of {total} rows shown" in page and f"rows 6–10 on page 2 of {pages}" in page
    assert '<p class="pager">' in page and f'<span id="page-at" class="note">page 2 of {pages}</span>' in page
    questions = pl.read_parquet(run / "results/questions.parquet")["qid"].to_list()
    assert [r["data-qid"] for r in grid_rows(dom(grid_url(run, "?rows=4"), tmp_path))] == questions[:4]


# --- issue 39: the address holds the state, bad values warn, the grid, previous / next, the copied folder -------
def grid_url(run: Path, query: str = "") -> str:
    return (run / "results/report/questions/grid.html").as_uri() + query


def outcomes(run: Path) -> dict[str, dict[str, bool]]:
    """Per question, per run label: right or not (from the prediction files)."""
    out: dict[str, dict[str, bool]] = {}
    for r in predictions(run).iter_rows(named=True):
        out.setdefault(r["qid"], {})[f"{r['method']}/{r['model']}"] = r["pred"] == r["answer"]
    return out


def grid_rows(page: str) -> list[dict[str, str | None]]:
    return [r for r in list_rows(page) if r.get("data-qid")]


def warnings_of(page: str) -> str:
    box = re.search(r'<div id="warnings" class="warning"( hidden(?:="")?)?>(.*?)</div>', page, re.S)
    assert box, "no warnings box"
    return "" if box.group(1) else re.sub(r"<[^>]+>", " ", box.group(2))


@pytest.mark.workflow
def test_bad_filter_values_are_named_in_a_warning_and_ignored(run, tmp_path):
    preds = predictions(run)
    page = dom(index_url(run, "?run=memory_search&correct=0&colour=red&rows=all"), tmp_path)
    warning = warnings_of(page)
    assert 'unknown run "memory_search" ignored' in warning and "memory_search/agent" in warning
    assert 'rows "all" ignored (a whole number from 1)' in warning
    assert 'unknown filter "colour" ignored' in warning and "correct" not in warning.split("colour")[0]
    wrong = preds.filter(pl.col("pred").is_null() | (pl.col("pred") != pl.col("answer")))
    assert len(visible(list_rows(page))) == wrong.height  # correct=0 read as "no"; the unknown run ignored
    assert warnings_of(dom(index_url(run, "?correct=no"), tmp_path)) == ""
    grid = dom(grid_url(run, "?outcome=sometimes&right=nobody&page=99"), tmp_path)
    assert 'unknown outcome "sometimes"' in warnings_of(grid) and 'unknown right "nobody"' in warnings_of(grid)
    assert "page 99 is past the last page of this selection; showing page 1" in warnings_of(grid)
    assert len(grid_rows(grid)) == pl.read_parquet(run / "results/questions.parquet").height


def link(page: str, ident: str) -> dict[str, str]:
    """The attributes of the element ``id=ident`` (unescaped), whatever their order."""
    tag = re.search(rf'<a id="{ident}"[^>]*>|<a [^>]*id="{ident}"[^>]*>', page)
    assert tag, ident
    return {k: html_unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', tag.group(0))}


def with_script(page: Path, script: str) -> str:
    """A copy of ``page`` beside it with ``script`` run after the page's own: how these tests click and type."""
    copy = page.with_name(f"_test_{page.name}")
    copy.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    return copy.as_uri()


@pytest.mark.workflow
def test_changes_are_written_to_the_address_and_the_address_restores_them(run, tmp_path):
    index = run / "results/report/questions/index.html"
    act = """
      const set = (id, v) => { const el = document.getElementById(id); el.value = v;
        el.dispatchEvent(new Event(id === 'f-q' ? 'input' : 'change')); };
      set('f-run', 'senri_agent/agent'); set('f-task', 'OC'); set('f-q', 'how many');
      const th = document.querySelector('th[data-key="seconds"]'); th.click(); th.click();
      document.body.dataset.address = location.search;
      document.body.dataset.order = [...document.querySelectorAll('#questions tbody tr:not([hidden])')]
        .map(tr => tr.dataset.i).join(',');"""
    page = dom(with_script(index, act), tmp_path)
    address = html_unescape(re.search(r'data-address="([^"]*)"', page).group(1))
    assert address.startswith("?") and dict(urllib.parse.parse_qsl(address[1:])) == {
        "run": "senri_agent/agent", "task": "OC", "q": "how many", "sort": "seconds", "order": "desc"}
    order = re.search(r'data-order="([^"]*)"', page).group(1)
    # Opening that address shows the same rows in the same order, the controls set as they were.
    again = dom(index_url(run, address), tmp_path)
    shown = [r["data-i"] for r in visible(list_rows(again))]
    assert ",".join(shown) == order
    preds = predictions(run)
    questions = pl.read_parquet(run / "results/questions.parquet")
    wanted = preds.filter((pl.col("method") == "senri_agent") & (pl.col("task_type") == "OC")).join(
        questions.select("qid", "question"), on="qid").filter(
        pl.col("question").str.to_lowercase().str.contains("how many", literal=True)
        | pl.col("qid").str.to_lowercase().str.contains("how many", literal=True))
    assert len(shown) == wanted.height
    assert 'class="sorted-desc"' in again or "sorted-desc" in again


@pytest.mark.workflow
def test_text_search_finds_questions_by_their_text_in_both_views(run, tmp_path):
    questions = pl.read_parquet(run / "results/questions.parquet")
    word = questions["question"][0].split()[-1].strip("?.,").lower()
    hits = questions.filter(pl.col("question").str.to_lowercase().str.contains(word, literal=True)
                            | pl.col("qid").str.to_lowercase().str.contains(word, literal=True))["qid"].to_list()
    listed = visible(list_rows(dom(index_url(run, f"?q={urllib.parse.quote(word)}"), tmp_path)))
    assert hits and {r["data-i"] for r in listed} and len(listed) == 3 * len(hits)
    gridded = [r["data-qid"] for r in grid_rows(dom(grid_url(run, f"?q={urllib.parse.quote(word)}"), tmp_path))
               if "hidden" not in r]
    assert sorted(gridded) == sorted(hits)


@pytest.mark.workflow
def test_the_grid_filters_disagreements_all_wrong_and_any_pair(run, tmp_path, shots):
    truth = outcomes(run)
    runs = ["random/none", "memory_search/agent", "senri_agent/agent"]

    def shown(query: str) -> list[str]:
        return sorted(r["data-qid"] for r in grid_rows(dom(grid_url(run, query), tmp_path)) if "hidden" not in r)

    mixed = sorted(q for q, by in truth.items() if 0 < sum(by[r] for r in runs) < len(runs))
    all_wrong = sorted(q for q, by in truth.items() if not any(by[r] for r in runs))
    won = sorted(q for q, by in truth.items() if by["senri_agent/agent"] and not by["memory_search/agent"])
    assert shown("?outcome=mixed") == mixed and shown("?outcome=all_wrong") == all_wrong
    assert shown("?right=senri_agent/agent&wrong=memory_search/agent") == won
    page = dom(grid_url(run), tmp_path)
    assert len(grid_rows(page)) == len(truth) and f"{len(truth)} of {len(truth)} questions shown" in page
    cells = re.findall(r'<td class="cell (yes|no|missing)" data-run="senri_agent/agent"', page)
    assert cells.count("yes") == sum(by["senri_agent/agent"] for by in truth.values())
    screenshot(grid_url(run, "?outcome=mixed"), tmp_path, shots / "grid.png")


@pytest.mark.workflow
def test_previous_and_next_walk_the_filtered_sorted_selection_and_back_keeps_it(run, tmp_path):
    preds = predictions(run).filter(pl.col("method") == "senri_agent")
    wrong = sorted(preds.filter(pl.col("pred").is_null() | (pl.col("pred") != pl.col("answer")))["qid"].to_list(),
                   reverse=True)
    assert len(wrong) >= 3
    query = "?from=list&run=senri_agent%2Fagent&correct=no&sort=qid&order=desc"
    page = dom((run / "results/report/questions" / question_href(wrong[1])).as_uri() + query, tmp_path)
    prev, nxt, back = link(page, "prev"), link(page, "next"), link(page, "back")["href"]
    assert (prev["data-qid"], nxt["data-qid"]) == (wrong[0], wrong[2])
    assert nxt["href"].startswith(f"{question_slug(wrong[2])}.html?from=list&")
    assert back.startswith("../index.html?") and dict(urllib.parse.parse_qsl(back.split("?", 1)[1])) == {
        "run": "senri_agent/agent", "correct": "no", "sort": "qid", "order": "desc"}
    assert f"question 2 of {len(wrong)} in this selection" in page
    first = dom((run / "results/report/questions" / question_href(wrong[0])).as_uri() + query, tmp_path)
    assert "href" not in link(first, "prev") and link(first, "prev")["class"] == "disabled"
    # The list's own links carry its state to the question pages.
    listed = dom(index_url(run, "?run=senri_agent/agent&correct=no"), tmp_path)
    carried = html_unescape(re.search(r'<a class="question" data-page="[^"]+" href="([^"]+)"', listed).group(1))
    assert "from=list" in carried and "correct=no" in carried


@pytest.mark.workflow
def test_a_memory_search_page_shows_counts_and_flags_that_match_its_trace(run, tmp_path):
    row = predictions(run).filter(pl.col("method") == "memory_search").row(0, named=True)
    trace = json.loads(row["trace"])
    searches = sum(1 for r in trace["rounds"] if r["action"] == "search")
    assert row["rounds"] == len(trace["rounds"]) and row["searches"] == searches > 0
    page = dom(page_url(run, row["qid"]), tmp_path)
    line = re.search(r'<tr><td><a href="#r-[^"]+">memory_search/agent</a></td>(.*?)</tr>', page, re.S).group(1)
    numbers = [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', line)]
    assert numbers[:8] == [row[c] for c in ("rounds", "searches", "memories_returned", "checks", "cells",
                                            "frames_seen", "tool_calls", "qa_calls")]
    assert ("no retrieval" in line) == bool(row["answered_without_retrieval"]) and "no retrieval" not in line
    assert page.count('<div class="step" id="r-') >= len(trace["rounds"])


@pytest.mark.workflow
def test_the_copied_report_folder_has_no_broken_link(run, tmp_path):
    copy = tmp_path / "elsewhere" / "report"
    shutil.copytree(run / "results/report", copy)
    pages = sorted(copy.rglob("*.html"))
    assert (copy / "index.html") in pages and (copy / "questions/grid.html") in pages
    broken, checked = [], 0
    for page in pages:
        for target in re.findall(r'(?:href|src)="([^"#][^"]*)"', page.read_text()):
            if target.startswith(("data:", "http:", "https:")):
                continue
            checked += 1
            path = (page.parent / html_unescape(target).split("?", 1)[0].split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(copy)} → {target}")
    assert checked > 50 and broken == []
    # The script-written links resolve too (previous / next, back), in the copied folder.
    qid = pl.read_parquet(run / "results/questions.parquet")["qid"][1]
    page = dom((copy / "questions" / question_href(qid)).as_uri() + "?from=list", tmp_path)
    for target in (link(page, name).get("href") for name in ("prev", "next", "back")):
        assert target, page[:200]
        assert (copy / "questions/q" / html_unescape(target).split("?", 1)[0]).resolve().is_file(), target


def test_blind_debiased_shows_its_four_orderings_their_letters_and_how_the_prediction_follows(hall, tmp_path):
    """Issue 39 item 2: a debiased page shows the four calls, each ordering's letter mapping, the scores by
    original option, and the prediction as their arg-max — here B, which the model never ranks first under the
    first ordering (it prefers the letter A)."""
    from senri.answer import answer_video

    options = [QUESTION.option_a, QUESTION.option_b, QUESTION.option_c, QUESTION.option_d]
    rules = []
    for k in range(4):  # ordering k shows option (j + k) % 4 at position j; the model likes A and option B
        shown = [options[(j + k) % 4] for j in range(4)]
        logprobs = {letter: (-0.5 if letter == "A" else -2.0) + (1.2 if shown[j] == QUESTION.option_b else 0.0)
                    for j, letter in enumerate("ABCD")}
        rules.append({"match": f"A. {shown[0]}\n", "text": "A", "letter_logprobs": logprobs})
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    stage = {"seed": 0, "method": {"name": "blind_debiased", "implementation": "blind", "answer_format": "logprobs",
                                   "debias": True, "prompts": "answer"},
             "model": {"name": "m", "backend": "scripted", "script": str(script), "max_tokens": 8}}
    preds = answer_video(to_frame([QUESTION], Question), hall["info"], stage)
    row = preds.row(0, named=True)
    assert row["pred"] == "B" and row["n_llm_calls"] == 4
    questions = to_frame([QUESTION], Question)
    index = build_browser(score(preds, questions), preds, questions, to_frame([hall["info"]], VideoInfo),
                          tmp_path / "questions")
    page = dom((index.parent / question_href(QUESTION.qid)).as_uri(), tmp_path)
    section = re.search(r'data-run="blind_debiased/m">(.*?)</section>', page, re.S).group(1)
    assert [f"answer:shift{k}" in section for k in range(4)] == [True] * 4 and section.count("<summary>prompt</summary>") == 4
    assert "options shown as: A = option C, B = option D, C = option A, D = option B" in section  # shift 2
    scores = json.loads(row["trace"])["scores_by_letter"]
    assert max(scores, key=scores.get) == "B"
    assert f"B {scores['B']:.3g}" in section and "how the prediction follows" in section
    assert re.search(r"arg-max of each original option.*?<b>B</b>", section, re.S)
    assert "no video read" in page
