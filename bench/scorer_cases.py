"""Generate tests/reference/scorers/: every named scorer's tool run on awkward replies, from the tool's own code.

Run (outside the package; the tools' checkouts are never part of the repository)::

    PYTHONPATH=src:/work/wt/_src/_gendeps python bench/scorer_cases.py --src /work/wt/_src

``--src`` holds one folder per tool, each an export of the tool's repository at the commit recorded in the
folder's ``COMMIT`` file (``git archive <commit> <paths>``; see tests/reference/scorers/README.md for the exact
repositories, commits and paths). Each tool's functions are loaded from those files as they are; the imports a
computation does not use (torch, cv2, datasets, loguru, the Hugging Face downloaders) are given stand-ins.

What is written (JSON Lines, one object a line):

- ``<scorer>.jsonl`` — one reply case per line: ``reply`` (None = no prediction), ``options``, ``answer`` (the
  gold letter as senri stores it; "" for an answer that is no candidate's text), ``letter`` (what the tool
  extracted and compared: any string, None when it extracted nothing), ``verdict`` (correct / wrong / skipped),
  ``raised`` (the exception the tool's own code raised on this reply, or None). A reply that makes the tool raise
  is given the verdict the tool's run gives a question in that state (documented per tool in the README).
- ``aggregates.jsonl`` — sets of questions run through the tool's own aggregation: the numbers it returns and
  the text it prints.
- ``videolucy_parse.jsonl`` — VideoLucy's ``parse_answer`` on each reply: the dict it returns (as JSON), None,
  or the exception.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import logging
import math
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "reference" / "scorers"

# --- the replies -------------------------------------------------------------------------------------------------

#: Every reply shape issue 58 names and more; each is scored by every tool.
HAND_REPLIES: list[str | None] = [
    None, "", " ", "\n\t", "A", "B", "C", "D", "E", "F", "a", "b", "c", "d", " B", "B ", "\nC\n", "B.", "B)",
    "(B)", "(b)", "[B]", "**B**", "B!", "A!", "C?", "D;", "'B'", '"C"', "B:", "Answer: C", "Answer: C. Jade.",
    "Answer:C", "ANSWER: b", "answer is d", "answer: (b)", "Best answer: C", "Best option: (C)",
    "Best Option: (A) Apples", "The best answer is D", "The best answer is: D", "The best answer is (D).",
    "The answer is (c).", "Based on the video the answer is (c).", "The correct option is B",
    "The correct option: B", "The correct answer C", "The best option is C", "Option: D", "option d",
    "Option B", "(C) or maybe (D)", "C or D", "I pick (D) over A.", "So the answer is C, not (B) really",
    "It is (B) or maybe (C) here", "\\boxed{D}", "$\\boxed{B}$", "Final answer: \\boxed{C}.", "答案是D",
    "答案为B", "答案：C", "选B", "我选 C", "정답은 B", "答えはA", "（B）", "Ｂ", "The answer is B (Fishing)",
    "B) ... (see A)", "(B) Fishing", "B. Fishing", "B. Fishing.", "Fishing", "fishing", "FISHING",
    "Apples and candles", "apples", "I think it's candles.", "It must be berries", "berries, not fishing",
    "<think>The answer is B</think>A", "<think>A or B?</think>Best answer: C", "C<think>noise D</think>",
    "</think>D", "<think>unfinished A", "<think></think>", "<think>\nLet me see. (A) no. (B) yes.\n</think>\n\nB",
    "<THINK>x</THINK>C", '{"Answer": "D"}', '{"answer": "B"}', '{"answer": "b"}', '{"answer": "(C) Berries"}',
    "{'Confidence': True, 'Answer': 'C. Jade', 'Reason': 'x'}",
    '{"Confidence": true, "Answer": "B", "Time Period": [[0, 5]]}', "{'Answer': 'No Answer'}",
    '{"Confidence": false, "Answer": "No Answer", "Reason": "insufficient"}',
    '<think>{"Answer": "A"}</think>{"Answer": "D"}', '{"Answer": "A"} then {"Answer": "C"}',
    '```json\n{"answer": "A"}\n```', "{[1]: 2}", "{'A'}", "{'Answer': 'B',\n 'Reason': 'two\nlines'}",
    "{'Answer': }", "{}", "NA", "N/A", "nan", "NaN", "None", "null", "NULL", "#N/A", "<NA>", "n/a",
    "Failed to obtain answer via API.", "Cannot determine the answer", "Z", "Z. None of the above",
    "I cannot answer this question from the video provided here today sorry",
    "i think it is probably the one with the most items shown in the video clip",
    "Since the man is walking, option B is wrong, so A.", "The correct answer is **B**. Here's why: it fits.",
    "The correct answer is **b**.", "B, C", "A B", "AB", "DCBA", "E. something", "(E)", "(F) Sixth", "(@)", "@",
    "1", "2", "Option 3", "The answer", "The answer is", "Answer:", "The answer is A.", "the answer is A.",
    "Answer: (A)", "A) Apples", "a) apples", "(a) apples", "A. Apples", "A.Apples", "A:Apples", "D Fishing",
    "It is D", "It is D.", "Definitely D!", "Definitely d", "B\n\nExplanation: the fish.",
    "Explanation: the video shows fish.\nAnswer: D", "Candles (B)", "Berries C", "I choose B", "I select: C",
    "My answer is D", "the choice is A", "Correct answer is C", "A or B or C or D", "None of A, B, C, D fits.",
    "Either (A) or (B); final: (C)", " (D) ", "\u200bB", "B\u3002", "B。", "Answer：B", "Answer - B",
    "The best answer isB", "The best answer is The answer is C", "XYZ", "...", ")", "()", "(", "))B", "B))",
    "((B", "( B)", "(B", "B (", "Option (A) is wrong but (B) is right", "Because A) and B) differ, C)",
    "Apples? Candles? Berries!", "berries berries", "option text: Candles",
]


def hypothesis_replies(count: int = 150) -> list[str]:
    """Replies drawn by Hypothesis (derandomized: the same strings on every run of the pinned version) from a
    grammar of the fragments replies are made of, plus free text."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    fragments = st.sampled_from([
        "A", "B", "C", "D", "E", "F", "a", "b", "c", "d", "(", ")", "[", "]", ".", ":", "!", "?", ",", " ", "\n",
        "The answer is ", "Answer: ", "Best answer: ", "The best option is", "Option: ", "answer is ", "<think>",
        "</think>", "{", "}", '"Answer": ', "'Answer': ", '"', "'", "\\boxed{", "答案是", "选", "Apples", "Candles",
        "Berries", "Fishing", "fishing", "I think ", "maybe ", " or ", "nan", "NA", "Z", "@", "**", "（", "）"])
    texts = st.one_of(st.lists(fragments, min_size=0, max_size=8).map("".join),
                      st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24))
    drawn: list[str] = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(texts)
    def draw(text: str) -> None:
        drawn.append(text)

    draw()
    seen: set[str] = set(r for r in HAND_REPLIES if r is not None)
    unique = []
    for text in drawn:
        if text not in seen:
            seen.add(text)
            unique.append(text)
    return unique


# --- questions -----------------------------------------------------------------------------------------------------

#: Video-MME's options carry their letter (VM4); LVBench's are embedded in the question, EgoMem's "A. text".
LETTERED = ["A. Apples.", "B. Candles.", "C. Berries.", "D. Fishing."]
PLAIN = ["Apples", "Candles", "Berries", "Fishing"]
#: MLVU questions: (candidates, answer text). Four and six candidates (the test set's A–F), a duplicated answer
#: text (the template keeps the last position), an answer in no candidate (gold "(@)").
MLVU_QUESTIONS: list[tuple[list[str], str]] = [
    (PLAIN, "Apples"), (PLAIN, "Candles"), (PLAIN, "Berries"), (PLAIN, "Fishing"),
    (["red", "blue", "green", "yellow", "black", "white"], "black"),
    (["red", "blue", "green", "yellow", "black", "white"], "white"),
    (["Three", "Two", "Three", "Four"], "Three"), (PLAIN, "Oranges"),
]


def gold_letter(options: list[str], answer_text: str) -> str:
    """senri's letter for an MLVU answer text: the last candidate with that text (ML7), "" when none."""
    hits = [i for i, c in enumerate(options) if c == answer_text]
    return "ABCDEF"[hits[-1]] if hits else ""


# --- loading the tools' code ---------------------------------------------------------------------------------------

def stub(name: str, **attributes: Any) -> types.ModuleType:
    """A stand-in module for an import the computation does not use."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def load_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def quiet(function: Callable, *args: Any) -> tuple[Any, str]:
    """Call ``function``; return its value and what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        value = function(*args)
    return value, buffer.getvalue()


def attempt(function: Callable, *args: Any) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, exception type name)``."""
    try:
        return quiet(function, *args)[0], None
    except Exception as error:  # the tool's own exception is the recorded outcome
        return None, type(error).__name__


class LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def lmms_logger() -> tuple[Any, LogCapture]:
    logger = logging.getLogger("lmms_eval_stand_in")
    logger.handlers.clear()
    capture = LogCapture()
    logger.addHandler(capture)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, capture


class Tools:
    """Each tool's functions, loaded from ``src``."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.commits = {p.name: (p / "COMMIT").read_text().strip() for p in src.iterdir() if (p / "COMMIT").exists()}
        self.logger, self.log = lmms_logger()
        stub("cv2")
        stub("datasets", Dataset=object)
        stub("loguru", logger=self.logger)
        stub("torch")
        stub("torchvision", transforms=None)
        stub("torch.utils")
        stub("torch.utils.data", Dataset=object)
        stub("tqdm", tqdm=lambda x, **k: x)
        self.vm_official = load_file(src / "videomme_official" / "eval_your_results.py", "vm_official")
        self.vm_old = load_file(src / "videomme_old" / "evaluation" / "eval_your_results.py", "vm_old")
        sys.path.insert(0, str(src / "lvbench"))
        from lvbench.metrics.compute_accuracy import compute_accuracy
        from lvbench.utils.answer_util import polish_answer
        sys.path.pop(0)
        self.compute_accuracy, self.polish_answer = compute_accuracy, polish_answer
        self.mlvu = load_file(src / "mlvu" / "evaluation" / "multiple_choice_evaluation" / "choice_bench.py", "mlvu_cb")
        self.lmms = {}
        for folder in ("lmms_2025_aug", "lmms_2025_sep", "lmms_9596", "lmms_2026"):
            for task in ("videomme", "lvbench", "mlvu"):
                path = src / folder / "lmms_eval" / "tasks" / task / "utils.py"
                if path.exists():
                    self._lmms_package(src / folder)
                    self.lmms[folder, task] = load_file(path, f"{folder}_{task}")
        self._vlmevalkit(src / "vlmevalkit")
        self.videolucy = load_file(src / "videolucy" / "utils.py", "videolucy_utils")

    def _lmms_package(self, root: Path) -> None:
        """lmms-eval's own package for the 2026 extractor (``lmms_eval.tasks._task_utils.mcq_extract``); the
        submission-file helper the 2025 Video-MME task imports is never called by the scoring."""
        for name in [m for m in sys.modules if m == "lmms_eval" or m.startswith("lmms_eval.")]:
            del sys.modules[name]
        stub("lmms_eval", __path__=[])
        stub("lmms_eval.tasks", __path__=[])
        stub("lmms_eval.tasks._task_utils", __path__=[])
        stub("lmms_eval.tasks._task_utils.file_utils", generate_submission_file=None)
        extractor = root / "lmms_eval" / "tasks" / "_task_utils" / "mcq_extract.py"
        if extractor.exists():
            load_file(extractor, "lmms_eval.tasks._task_utils.mcq_extract")

    def _vlmevalkit(self, root: Path) -> None:
        """VLMEvalKit's scoring modules: ``vlmeval.utils.matching_util`` (``can_infer``), ``vlmeval.smp``'s
        ``cn_string`` and ``build_option_str`` from their own files; logging, file and judge helpers stand in."""
        stub("vlmeval", __path__=[])
        stub("vlmeval.smp", __path__=[])
        stub("vlmeval.smp.log", get_logger=lambda name: logging.getLogger(name))
        smp = sys.modules["vlmeval.smp"]
        smp.cn_string = _function_from(root / "vlmeval" / "smp" / "misc.py", "cn_string")
        smp.build_option_str = _function_from(root / "vlmeval" / "smp" / "vlm.py", "build_option_str",
                                              {"pd": __import__("pandas")})
        for name in ("d2df", "dump", "get_logger", "get_pred_file_format", "istype", "load", "timestr"):
            setattr(smp, name, getattr(smp, name, None) or (lambda *a, **k: None))
        smp.get_logger = lambda name: logging.getLogger(name)
        stub("vlmeval.smp.vlm", build_option_str=smp.build_option_str)
        stub("vlmeval.smp.file", load=None)  # the ratings' file reader; the generator hands them its rows
        stub("vlmeval.utils", __path__=[])
        matching = load_file(root / "vlmeval" / "utils" / "matching_util.py", "vlmeval.utils.matching_util")
        sys.modules["vlmeval.utils"].can_infer = matching.can_infer
        sys.modules["vlmeval.utils"].can_infer_lego = matching.can_infer_lego
        sys.modules["vlmeval.utils"].track_progress_rich = None
        stub("vlmeval.dataset", __path__=[])
        stub("vlmeval.dataset.utils", __path__=[])
        self.mc = load_file(root / "vlmeval" / "dataset" / "utils" / "multiple_choice.py",
                            "vlmeval.dataset.utils.multiple_choice")
        self.vlmek_videomme = load_file(root / "vlmeval" / "dataset" / "utils" / "videomme.py", "vlmek_videomme")
        self.vlmek_mlvu = load_file(root / "vlmeval" / "dataset" / "utils" / "mlvu.py", "vlmeval.dataset.utils.mlvu")


def _function_from(path: Path, name: str, extra: dict | None = None) -> Callable:
    """One top-level function of a module whose other imports are not needed (VLMEvalKit's smp helpers)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace: dict = dict(extra or {})
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


# --- pandas' reading of a VLMEvalKit prediction file --------------------------------------------------------------

def xlsx_roundtrip(replies: list[str | None]) -> list[Any]:
    """The predictions as VLMEvalKit reads them back: its default prediction file is xlsx (``PRED_FORMAT``
    unset), written with xlsxwriter and read with ``pd.read_excel``, so an empty reply or one pandas takes for a
    missing value ("NA", "nan", "None", …) comes back as NaN."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pred.xlsx"
        frame = pd.DataFrame({"index": range(len(replies)), "prediction": replies})
        with pd.ExcelWriter(path, engine="xlsxwriter",
                            engine_kwargs={"options": {"strings_to_formulas": False}}) as writer:
            frame.to_excel(writer, index=False)
        back = pd.read_excel(path)
    return [None if (isinstance(v, float) and math.isnan(v)) else v for v in back["prediction"].tolist()]


# --- per-tool reply cases ------------------------------------------------------------------------------------------

def case(reply: str | None, options: list[str], answer: str, letter: Any, verdict: str, raised: str | None,
         **extra: Any) -> dict:
    return {"reply": reply, "options": options, "answer": answer, "letter": letter, "verdict": verdict,
            "raised": raised, **extra}


def videomme_cases(module: types.ModuleType, replies: list) -> list[dict]:
    """VM9–VM10: the scorer's loop — ``extract_characters_regex(response)``; an empty extraction is in neither
    count. A question without a prediction makes the function raise (``None.strip``); the scorer's own way
    around it is ``skip_missing``, which leaves the video out: skipped."""
    out = []
    for i, reply in enumerate(replies):
        answer = "ABCD"[i % 4]
        letter, raised = attempt(module.extract_characters_regex, reply)
        if raised:
            out.append(case(reply, LETTERED, answer, None, "skipped", raised))
        elif letter == "":
            out.append(case(reply, LETTERED, answer, None, "skipped", None))
        else:
            out.append(case(reply, LETTERED, answer, letter, "correct" if letter == answer else "wrong", None))
    return out


def lmms_cases(tools: Tools, folder: str, task: str, replies: list, options: list[str]) -> list[dict]:
    """lmms-eval's ``<task>_process_results(doc, [reply])``: every question counted; ``pred_answer`` (or the
    returned score) compared with the doc's letter. A reply the function cannot take (None) raises; lmms-eval
    hands every question a string, so senri counts an absent prediction wrong."""
    module = tools.lmms[folder, task]
    out = []
    for i, reply in enumerate(replies):
        answer = "ABCDEF"[i % len(options)] if len(options) > 4 else "ABCD"[i % 4]
        doc = {"question_id": f"q{i}", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
               "task_type": "Counting Problem", "answer": answer, "videoID": "v", "question": "q"}
        if task == "mlvu":
            doc["task_type"] = "count"
        process = getattr(module, f"{task}_process_results")
        result, raised = attempt(process, doc, [reply])
        if raised:
            out.append(case(reply, options, answer, None, "wrong", raised))
            continue
        value = next(iter(result.values()))
        if isinstance(value, dict):
            letter = value["pred_answer"]
            correct = value["pred_answer"] == value["answer"]
        else:  # lvbench_score: the bool itself; the letter from the same extraction
            letter = module.extract_characters_regex(reply)
            correct = bool(value)
        out.append(case(reply, options, answer, letter if letter != "" else None, "correct" if correct else "wrong",
                        None))
    return out


def lvbench_official_cases(tools: Tools, replies: list) -> list[dict]:
    """LV8–LV9 through ``compute_accuracy`` itself, one question per call: the reply is the prediction file's
    value for the uid (None = the uid absent: not scored)."""
    import jsonlines  # noqa: F401  (compute_accuracy reads the meta file with it)

    out = []
    with tempfile.TemporaryDirectory() as folder:
        meta, answers = Path(folder) / "meta.jsonl", Path(folder) / "answers.json"
        for i, reply in enumerate(replies):
            answer = "ABCD"[i % 4]
            meta.write_text(json.dumps({"key": "k", "type": "tv", "qa": [
                {"uid": 7, "question": "q", "answer": answer, "question_type": ["reasoning"],
                 "time_reference": "00:01-00:02"}]}) + "\n")
            answers.write_text(json.dumps({} if reply is None else {"7": reply}))
            result, raised = attempt(tools.compute_accuracy, str(answers), str(meta))
            if raised == "ZeroDivisionError":  # nothing scored: the uid was absent
                out.append(case(reply, LETTERED, answer, None, "skipped", None))
            else:
                out.append(case(reply, LETTERED, answer, reply, "correct" if result["acc"] == 1.0 else "wrong",
                                raised))
    return out


def lvbench_polish_cases(tools: Tools, replies: list) -> list[dict]:
    """LV11: ``polish_answer(reply)`` then the official exact comparison. None raises (``None.strip``): such a
    question has no prediction, which the official scorer does not score."""
    out = []
    for i, reply in enumerate(replies):
        answer = "ABCD"[i % 4]
        letter, raised = attempt(tools.polish_answer, reply)
        if raised:
            out.append(case(reply, LETTERED, answer, None, "skipped", raised))
        else:
            out.append(case(reply, LETTERED, answer, letter, "correct" if letter == answer else "wrong", None))
    return out


def mlvu_official_cases(tools: Tools, replies: list) -> list[dict]:
    """ML10 through ``MLVU.qa_template`` (the gold "(X) text", X the last matching candidate or "@") and
    ``check_ans``; the letter recorded is what ``check_ans`` compares. None raises (``")" in None``): an
    unanswered question is wrong (ML11)."""
    out = []
    template = tools.mlvu.MLVU.qa_template
    for i, reply in enumerate(replies):
        for candidates, answer_text in (MLVU_QUESTIONS[i % len(MLVU_QUESTIONS)],):
            _, gt = template(None, {"question": "q", "candidates": candidates, "answer": answer_text})
            flag, raised = attempt(tools.mlvu.check_ans, reply, gt)
            letter = None
            if reply is not None:
                letter = reply[reply.index(")") - 1:reply.index(")")] if ")" in reply else reply
            out.append(case(reply, candidates, gold_letter(candidates, answer_text), letter,
                            "wrong" if raised else ("correct" if flag else "wrong"), raised, answer_text=answer_text,
                            gold=gt))
    return out


def vlmevalkit_videomme_cases(tools: Tools, replies: list) -> list[dict]:
    """VLMEvalKit ``VideoMME.evaluate`` under ``exact_matching``: the prediction read back from the xlsx file,
    ``str()``-ed, ``extract_characters_regex``; when it yields "" ``extract_option`` (``can_infer`` on the option
    lines of ``question`` — a Video-MME question has none — then 'Z'). Score 0/1 for every question."""
    out = []
    stored = xlsx_roundtrip(replies)
    module = tools.vlmek_videomme
    for i, (reply, value) in enumerate(zip(replies, stored)):
        answer = "ABCD"[i % 4]
        pred = str(float("nan") if value is None else value)
        letter = module.extract_characters_regex(pred)
        if letter == "":
            item = {"index": i, "question": "What is shown?", "answer": answer,
                    "prediction": float("nan") if value is None else value, "candidates": str(LETTERED)}
            option, raised = attempt(module.extract_option, None, item, "Video-MME")
            score = int(option == answer) if not raised else 0
            out.append(case(reply, LETTERED, answer, None, "correct" if score else "wrong", raised,
                            fallback=option, stored=value))
        else:
            out.append(case(reply, LETTERED, answer, letter, "correct" if letter == answer else "wrong", None,
                            stored=value))
    return out


def vlmevalkit_mlvu_cases(tools: Tools, replies: list) -> list[dict]:
    """VLMEvalKit ``MLVU_MCQ.evaluate`` under ``exact_matching``: the gold "(X) text" (last matching candidate,
    "@" for none), the item's A–F set to the candidates and its ``answer`` to the letter, then
    ``check_ans_with_model(pred, gold, None, item)`` — the ML10 rule, else ``can_infer`` on the prediction. A
    prediction read back as NaN (empty, "NA", …) makes ``FAIL_MSG in pred`` raise; counted wrong, flagged."""
    out = []
    stored = xlsx_roundtrip(replies)
    fail = "Failed to obtain answer via API."
    for i, (reply, value) in enumerate(zip(replies, stored)):
        candidates, answer_text = MLVU_QUESTIONS[i % len(MLVU_QUESTIONS)]
        pred = float("nan") if value is None else value
        answer_idx = -1
        for index, c in enumerate(candidates):
            if c == answer_text:
                answer_idx = index
        gold = f"({chr(ord('A') + answer_idx)}) {answer_text}"
        item = {"index": i, "question": "What is shown?", "answer": answer_text, "prediction": pred,
                "candidates": str(candidates), "task_type": "count"}
        for index, content in enumerate(candidates):
            item[chr(ord("A") + index)] = content
            if content == item["answer"]:
                item["answer"] = chr(ord("A") + index)
        try:
            if fail in pred:  # score -1, which the rating adds to the task's correct count (senri: 0, wrong)
                verdict, raised, letter = "wrong", None, None
            else:
                ok = tools.vlmek_mlvu.check_ans_with_model(pred, gold, None, dict(item), "MLVU_MCQ")
                first = pred[pred.index(")") - 1:pred.index(")")] if ")" in pred else pred
                letter = first if first == gold[gold.index("(") + 1:gold.index(")")] else \
                    tools.mc.extract_answer_from_item(None, dict(item), "MLVU_MCQ")["opt"]
                verdict, raised = ("correct" if ok else "wrong"), None
        except Exception as error:
            verdict, raised, letter = "wrong", type(error).__name__, None
        out.append(case(reply, candidates, gold_letter(candidates, answer_text), letter, verdict, raised,
                        answer_text=answer_text, stored=value, tool_score=-1 if fail in str(pred) else None))
    return out


def videolucy_cases(tools: Tools, replies: list) -> list[dict]:
    """VideoLucy's ``parse_answer`` (EM9): the dict it returns, None, or its exception."""
    out = []
    for reply in replies:
        value, raised = attempt(tools.videolucy.parse_answer, reply)
        out.append({"reply": reply, "parsed": value if isinstance(value, dict) else None,
                    "parsed_type": type(value).__name__, "raised": raised})
    return out


# --- aggregation -------------------------------------------------------------------------------------------------

def aggregate_cases(tools: Tools) -> list[dict]:
    """Sets of questions through each tool's own aggregation: the returned numbers and the printed text."""
    out: list[dict] = []
    splits = ("short", "medium", "long")
    # Video-MME official / old: eval_your_results on a nested file, skip_missing with a missing video.
    for name, module, keys in (("videomme_official", tools.vm_official, ("duration", "domain", "sub_category")),
                               ("videomme_old", tools.vm_old, ("duration_category", "video_category",
                                                                "video_subcategory"))):
        for label, patterns in (("1_of_16", {0: "A"}), ("5_of_16", {i: "A" for i in range(5)}),
                                ("skips_and_missing", {0: "A", 1: "I have no idea at all about what happens here"
                                                       " in this video", 2: "B"})):
            videos = []
            questions = []
            for v in range(7):  # 21 questions: video 006 marked missing, two replies unreadable -> 16 answered
                qs = []
                for k in range(3):
                    n = v * 3 + k
                    reply = patterns.get(n, "B") if n < 16 else ("no capital letter in this long reply of more than"
                                                                 " ten words at all" if n < 18 else "B")
                    qs.append({"question_id": f"{v:03d}-{k + 1}", "task_type": "Counting Problem",
                               "question": "q", "options": LETTERED, "answer": "A", "response": reply})
                    questions.append({"qid": f"{v:03d}-{k + 1}", "split": splits[v % 3], "reply": reply,
                                      "answer": "A", "video": f"{v:03d}", "missing": v == 6})
                videos.append({keys[0]: splits[v % 3], keys[1]: "Knowledge", keys[2]: "Astronomy",
                               "video_id": f"{v:03d}", "missing": v == 6, "questions": qs})
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "results.json"
                path.write_text(json.dumps(videos))
                _, printed = quiet(module.eval_your_results, str(path), "short,medium,long", True, True)
            overall = [line for line in printed.splitlines() if line.startswith("Overall:")]
            out.append({"scorer": name, "case": label, "questions": questions, "printed_overall": overall[-1],
                        "printed_splits": overall[:-1]})
        # A question without a response in a video not marked missing, and the file without skip_missing: the
        # scorer raises instead of counting anything.
        videos[0]["questions"][0]["response"] = None
        for label, skip in (("response_none", True), ("not_300_videos", False)):
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "results.json"
                path.write_text(json.dumps(videos))
                _, raised = attempt(module.eval_your_results, str(path), "short,medium,long", skip, True)
            out.append({"scorer": name, "case": label, "questions": [], "raised": raised})
    # lmms-eval Video-MME (2025 and 2026): process_results on each reply, then the task's aggregation.
    for name, folder in (("lmms_eval_2025", "lmms_2025_aug"), ("lmms_eval_2026", "lmms_2026")):
        module = tools.lmms[folder, "videomme"]
        for label, correct in (("1_of_16", 1), ("5_of_16", 5)):
            questions, results = [], []
            for n in range(16):
                reply = "A" if n < correct else "B"
                doc = {"question_id": f"q{n}", "duration": splits[n % 3], "domain": "Knowledge",
                       "sub_category": "Astronomy", "task_type": "Counting Problem", "answer": "A", "videoID": "v"}
                results.append(module.videomme_process_results(doc, [reply])["videomme_perception_score"])
                questions.append({"qid": f"q{n}", "split": splits[n % 3], "reply": reply, "answer": "A"})
            tools.log.lines.clear()
            value = module.videomme_aggregate_results(results)
            out.append({"scorer": name, "case": f"videomme_{label}", "questions": questions, "value": value,
                        "printed_overall": tools.log.lines[-1]})
    # lmms-eval MLVU dev: the mean over all seven task types, on a subset run too.
    for name, folder in (("lmms_eval_2025_mlvu", "lmms_9596"), ("lmms_eval_2026", "lmms_2026")):
        module = tools.lmms[folder, "mlvu"]
        for label, tasks in (("two_tasks_of_seven", ("count", "ego")), ("all_seven", (
                "plotQA", "needle", "ego", "count", "order", "anomaly_reco", "topic_reasoning"))):
            questions, results = [], []
            for t, task in enumerate(tasks):
                for n in range(4):
                    reply = "A" if n <= t % 3 else "B"
                    results.append(module.mlvu_process_results({"question": f"{task}{n}", "task_type": task,
                                                                "answer": "A"}, [reply])["mlvu_percetion_score"])
                    questions.append({"qid": f"{task}{n}", "category": task, "reply": reply, "answer": "A"})
            tools.log.lines.clear()
            value = module.mlvu_aggregate_results_dev(results)
            out.append({"scorer": name, "case": f"mlvu_{label}", "questions": questions, "value": value,
                        "printed_overall": tools.log.lines[-1]})
    # MLVU official: choice_bench's main() counts per task as tasks appear, Avg over the tasks it saw.
    for label, tasks in (("two_tasks", ("count", "ego")), ("three_tasks", ("plotQA", "count", "order"))):
        questions, acc_dict = [], {}
        for t, task in enumerate(tasks):
            for n in range(3 + t):
                reply = "(A) x" if n == 0 else "B"
                gt = "(A) x"
                acc_dict.setdefault(task, [0, 0])
                acc_dict[task][1] += 1
                acc_dict[task][0] += bool(tools.mlvu.check_ans(pred=reply, gt=gt))
                questions.append({"qid": f"{task}{n}", "category": task, "reply": reply, "answer": "A",
                                  "options": ["x", "y", "z", "w"]})
        final_res, total, idx = {}, 0, 0  # choice_bench.main()'s closing lines (its loop runs a model inline)
        for k, v in acc_dict.items():
            idx += 1
            final_res[k] = v[0] / v[1] * 100
            total += final_res[k]
        final_res["Avg"] = total / idx
        out.append({"scorer": "mlvu_official", "case": label, "questions": questions, "value": final_res["Avg"],
                    "printed_overall": repr(final_res)})
    # VLMEvalKit MLVU: get_dimension_rating per task, then the concat dataset's acc and M-Avg (micro).
    import pandas as pd

    for label, scores in (("micro_vs_macro", {"count": [1, 0, 0, 0], "ego": [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]}),):
        rows = [{"task_type": task, "score": s} for task, values in scores.items() for s in values]
        tools.vlmek_mlvu.load = lambda path: pd.DataFrame(rows)
        rating = tools.vlmek_mlvu.get_dimension_rating("unused")
        result = pd.DataFrame(rating, index=["success", "overall"]).T
        for idx, item in result.iterrows():  # ConcatVideoDataset.evaluate
            result.loc[idx, "acc"] = round(item["success"] / item["overall"] * 100, 1)
        success, overall = result["success"].sum(), result["overall"].sum()  # MLVU.evaluate's M-Avg
        out.append({"scorer": "vlmevalkit_mlvu", "case": label,
                    "questions": [{"category": r["task_type"], "score": r["score"]} for r in rows],
                    "value": round(float(success) / float(overall) * 100, 1),
                    "per_task": {k: float(v) for k, v in result["acc"].items()}})
    # VLMEvalKit Video-MME: get_dimension_rating's overall (mean score, ".3f" of the fraction).
    for label, scores in (("1_of_16", [1] + [0] * 15), ("5_of_16", [1] * 5 + [0] * 11)):
        rows = [{"domain": "Knowledge", "sub_category": "Astronomy", "task_type": "Counting Problem",
                 "duration": splits[n % 3], "score": s} for n, s in enumerate(scores)]
        tools.vlmek_videomme.load = lambda path: pd.DataFrame(rows)
        rating = tools.vlmek_videomme.get_dimension_rating("unused")
        out.append({"scorer": "vlmevalkit_videomme", "case": label, "questions": rows,
                    "printed_overall": rating["overall"]["overall"]})
    # LVBench official: compute_accuracy's fractions (multi-label categories, absent uid not scored).
    with tempfile.TemporaryDirectory() as folder:
        meta, answers = Path(folder) / "meta.jsonl", Path(folder) / "answers.json"
        qa = [{"uid": n, "question": "q", "answer": "A", "time_reference": "00:01-00:02",
               "question_type": ["reasoning", "summarization"] if n % 2 else ["reasoning"]} for n in range(17)]
        replies = {str(n): ("A" if n < 5 else "B") for n in range(16)}  # uid 16 absent
        meta.write_text(json.dumps({"key": "k", "type": "tv", "qa": qa}) + "\n")
        answers.write_text(json.dumps(replies))
        result = tools.compute_accuracy(str(answers), str(meta))
        out.append({"scorer": "lvbench_official", "case": "5_of_16_one_absent",
                    "questions": [{"qid": str(q["uid"]), "categories": q["question_type"],
                                   "reply": replies.get(str(q["uid"])), "answer": "A"} for q in qa],
                    "value": dict(result)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path("/work/wt/_src"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    tools = Tools(args.src)
    replies = HAND_REPLIES + hypothesis_replies()
    four = LETTERED
    six = ["A. red", "B. blue", "C. green", "D. yellow", "E. black", "F. white"]
    sets = {
        "videomme_official": videomme_cases(tools.vm_official, replies),
        "videomme_old": videomme_cases(tools.vm_old, replies),
        "lmms_eval_2025": lmms_cases(tools, "lmms_2025_aug", "videomme", replies, four)
        + lmms_cases(tools, "lmms_2025_sep", "lvbench", replies, four),
        "lmms_eval_2025_mlvu": lmms_cases(tools, "lmms_9596", "mlvu", replies, four)
        + lmms_cases(tools, "lmms_9596", "mlvu", replies, six),
        "lmms_eval_2026": lmms_cases(tools, "lmms_2026", "videomme", replies, four)
        + lmms_cases(tools, "lmms_2026", "mlvu", replies, six)
        + lmms_cases(tools, "lmms_2026", "lvbench", replies, four),
        "lvbench_official": lvbench_official_cases(tools, replies),
        "lvbench_polish": lvbench_polish_cases(tools, replies),
        "mlvu_official": mlvu_official_cases(tools, replies),
        "vlmevalkit_videomme": vlmevalkit_videomme_cases(tools, replies),
        "vlmevalkit_mlvu": vlmevalkit_mlvu_cases(tools, replies),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, cases in sets.items():
        write_jsonl(args.out / f"{name}.jsonl", cases)
    write_jsonl(args.out / "videolucy_parse.jsonl", videolucy_cases(tools, replies))
    write_jsonl(args.out / "aggregates.jsonl", aggregate_cases(tools))
    (args.out / "commits.json").write_text(json.dumps(tools.commits, indent=1, sort_keys=True) + "\n")
    for name, cases in sets.items():
        print(f"{name}: {len(cases)} cases, {sum(c['raised'] is not None for c in cases)} raised")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


if __name__ == "__main__":
    main()
