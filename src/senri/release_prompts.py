"""The exact prompt strings of a release checkout the user provides (``prompts_from_release: <folder>``).

ParaVT, Video-o3 and LongVideo-R1 were fine-tuned on their own prompts, so the paper's setting needs those exact
strings, which senri may not ship (``config/prompts/<family>/`` holds senri's restatement). This module reads them
from a local checkout of the release: for each prompt role it knows the file, the lines the spec cites
(``shared/spec/evidence_seekers.md``) and the name the string is bound to there, parses the file with :mod:`ast`
(nothing of the checkout is imported or run) and turns the string into a senri template: the release's format
fields and f-string expressions become senri's ``$placeholders`` by a per-role map, a literal ``$`` becomes ``$$``.

A checkout at another commit may have moved or changed the strings: the cited lines must hold an expression bound
to the expected name, or loading stops naming the file, the lines and what was found there. A role whose release
text is built by code around several strings (no single expression) keeps senri's restatement; the prompt
identity lists which roles came from where, and the run's report labels runs on restated prompts.
"""

from __future__ import annotations

import ast
import hashlib
import json
import string
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping



class ReleasePromptError(ValueError):
    """A release checkout does not hold a role's string where the spec cites it; the message names the place."""


#: In ``ReleaseString.positions``: this f-string field joins the previous placeholder (the release writes
#: ``(({a},{b}))`` where senri passes ``ids="a,b"``; the text between them must be ``JOIN_GLUE``).
JOINS_PREVIOUS = "+"
JOIN_GLUE = ","
#: In ``ReleaseString.positions``: the template ends before this field (the release appends a value senri's code
#: appends too: a caption after its header).
ENDS_HERE = "|"


@dataclass(frozen=True)
class ReleaseString:
    """Where one role's exact string lives in a release, and how its fields map to senri's placeholders.

    ``name``: the variable, dict key, keyword or function the expression is bound to (``SYSTEM_PROMPT``,
    ``"text"``); the expression is the one bound to it whose first line lies in ``lines`` (1-based, inclusive).
    ``more``: further (lines, name) bindings of the same file whose strings follow (the release concatenates
    them before formatting). ``template``: the string is filled later by ``str.format``, its ``{field}`` names
    mapped by ``fields`` (``{{`` a literal brace); otherwise braces are text and only f-string fields are fields,
    mapped by position through ``positions`` (a placeholder name, :data:`JOINS_PREVIOUS` or :data:`ENDS_HERE`).
    ``json_fields``: format fields the release fills with ``json.dumps(<literal>)`` bound at (lines, name).
    A field the map does not name stops loading."""

    role: str
    path: str
    lines: tuple[int, int]
    name: str
    statement: str
    fields: Mapping[str, str] = field(default_factory=dict)
    template: bool = False
    positions: tuple[str, ...] = ()
    more: tuple[tuple[tuple[int, int], str], ...] = ()
    json_fields: Mapping[str, tuple[tuple[int, int], str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Release:
    """A release whose model was trained on its prompts: its repository, the commit the spec cites, and the roles
    whose strings senri reads from a checkout (the others keep senri's restatement: ``restated``)."""

    family: str
    repository: str
    commit: str
    strings: tuple[ReleaseString, ...]
    restated: Mapping[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- extraction
def _bound_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        return target.value
    if isinstance(target, ast.Subscript):  # data["conversations"][-1]["content"] += "…": bound to "content"
        return _bound_name(target.slice)
    return None


def _bindings(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """Every (name, expression) binding of the module: assignments, annotated assignments, dict entries,
    keyword arguments and ``return`` values of a function (bound to the function's name)."""
    found: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (name := _bound_name(target)) is not None:
                    found.append((name, node.value))
        elif isinstance(node, ast.AugAssign):  # text += "…": M3-Agent appends its notes so
            if (name := _bound_name(node.target)) is not None:
                found.append((name, node.value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if (name := _bound_name(node.target)) is not None:
                found.append((name, node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None and (name := _bound_name(key)) is not None:
                    found.append((name, value))
        elif isinstance(node, ast.keyword) and node.arg:
            found.append((node.arg, node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    found.append((node.name, inner.value))
    return found


def _literal_parts(expr: ast.expr, where: str) -> list[tuple[str, str]]:
    """The expression as ("text", s) / ("expr", source) parts: a str constant, an f-string, implicit or ``+``
    concatenation of those, or ``"…".format(…)`` / ``"".join([...])`` of them. Anything else is not a string the
    release wrote down, and stops loading."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [("text", expr.value)]
    if isinstance(expr, ast.JoinedStr):
        parts: list[tuple[str, str]] = []
        for value in expr.values:
            if isinstance(value, ast.Constant):
                parts.append(("text", str(value.value)))
            elif isinstance(value, ast.FormattedValue):
                parts.append(("expr", ast.unparse(value.value)))
        return parts
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _literal_parts(expr.left, where) + _literal_parts(expr.right, where)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "strip" and not expr.args:
            return _literal_parts(expr.func.value, where)
        if expr.func.attr == "join" and isinstance(expr.func.value, ast.Constant) and len(expr.args) == 1 \
                and isinstance(expr.args[0], (ast.List, ast.Tuple)):
            glue, out = str(expr.func.value.value), []
            for i, item in enumerate(expr.args[0].elts):
                out += ([("text", glue)] if i else []) + _literal_parts(item, where)
            return out
    if isinstance(expr, ast.Name):
        return [("expr", expr.id)]
    raise ReleasePromptError(f"{where}: the expression there is not a string the release wrote down "
                             f"({ast.unparse(expr)[:80]!r}…)")


def _escape(text: str) -> str:
    return text.replace("$", "$$")


def to_template(parts: list[tuple[str, str]], item: ReleaseString, where: str,
                json_values: Mapping[str, str] | None = None) -> str:
    """senri's ``string.Template`` text of the release's string: format fields renamed by ``item.fields`` (or
    filled from ``json_values``), f-string fields by ``item.positions``."""

    def named(name: str) -> str:
        if json_values and name in json_values:
            return _escape(json_values[name])
        if name not in item.fields:
            raise ReleasePromptError(f"{where}: field {{{name}}} of the release's string has no senri placeholder "
                                     f"(known: {', '.join(sorted(item.fields)) or 'none'}); the checkout differs "
                                     "from the cited commit")
        return "${" + item.fields[name] + "}"

    out: list[str] = []
    position, ended = 0, False
    for kind, value in parts:
        if kind == "expr":
            if position >= len(item.positions):
                raise ReleasePromptError(f"{where}: f-string field {position + 1} ({{{value}}}) has no senri "
                                         f"placeholder ({len(item.positions)} mapped); the checkout differs from "
                                         "the cited commit")
            target = item.positions[position]
            position += 1
            if target == ENDS_HERE:
                ended = True
                break
            if target == JOINS_PREVIOUS:
                if not out or out[-1] != JOIN_GLUE or len(out) < 2 or not out[-2].startswith("${"):
                    raise ReleasePromptError(f"{where}: f-string field {position} ({{{value}}}) should follow "
                                             f"another field and {JOIN_GLUE!r}")
                out.pop()
                continue
            out.append("${" + target + "}")
        elif not item.template:
            out.append(_escape(value))
        else:
            try:
                parsed = list(string.Formatter().parse(value))
            except ValueError as exc:
                raise ReleasePromptError(f"{where}: not a format template ({exc})") from exc
            for literal, name, _spec, _conversion in parsed:
                out.append(_escape(literal))
                if name is not None:
                    out.append(named(name))
    if not ended and position != len(item.positions):
        raise ReleasePromptError(f"{where}: the release's string has {position} f-string field(s), the map "
                                 f"expects {len(item.positions)}; the checkout differs from the cited commit")
    return "".join(out)


def _bound(tree: ast.AST, path: Path, lines: tuple[int, int], name: str, statement: str) -> ast.expr:
    first, last = lines
    where = f"{path}:{first}-{last} ({statement}, {name})"
    bound = [expr for bound_name, expr in _bindings(tree) if bound_name == name and first <= expr.lineno <= last]
    if not bound:
        near = sorted({n for n, expr in _bindings(tree) if first <= expr.lineno <= last})
        raise ReleasePromptError(f"{where}: no expression bound to {name!r} starts there (names bound there: "
                                 f"{', '.join(near) or 'none'}); is the checkout at the cited commit?")
    if len(bound) > 1:
        raise ReleasePromptError(f"{where}: {len(bound)} expressions bound to {name!r} start there")
    return bound[0]


def _json_value(expr: ast.expr, where: str) -> str:
    """``json.dumps(<literal>)`` as the release computes it (no keyword arguments: the default separators)."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "dumps"
            and len(expr.args) == 1 and not expr.keywords):
        raise ReleasePromptError(f"{where}: expected json.dumps(<literal>), found {ast.unparse(expr)[:60]!r}…")
    try:
        return json.dumps(ast.literal_eval(expr.args[0]))
    except ValueError as exc:
        raise ReleasePromptError(f"{where}: the json.dumps argument is not a literal ({exc})") from exc


def extract(checkout: Path, item: ReleaseString) -> str:
    """One role's template from ``checkout``: the string bound to ``item.name`` starting within ``item.lines``
    (and the ``more`` strings after it), read from the parsed file."""
    path = checkout / item.path
    where = f"{path}:{item.lines[0]}-{item.lines[1]} ({item.statement}, {item.name})"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except FileNotFoundError as exc:
        raise ReleasePromptError(f"{where}: no such file in the release checkout") from exc
    except SyntaxError as exc:
        raise ReleasePromptError(f"{where}: the file does not parse ({exc.msg}, line {exc.lineno})") from exc
    parts: list[tuple[str, str]] = []
    for lines, name in ((item.lines, item.name), *item.more):
        parts += _literal_parts(_bound(tree, path, lines, name, item.statement), where)
    json_values = {key: _json_value(_bound(tree, path, lines, name, item.statement), where)
                   for key, (lines, name) in item.json_fields.items()}
    return to_template(parts, item, where, json_values)


def checkout_commit(checkout: Path) -> str | None:
    """The checkout's HEAD commit, or None when it is not a git work tree (a downloaded archive)."""
    try:
        done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


@dataclass(frozen=True)
class ReleaseTexts:
    """The templates read from one checkout, by role, and the record a run keeps of them."""

    family: str
    checkout: Path
    commit: str | None
    texts: Mapping[str, str]
    sources: Mapping[str, str]

    def identity(self) -> dict[str, Any]:
        return {"checkout": str(self.checkout), "commit": self.commit,
                "roles": {role: {"source": self.sources[role],
                                 "sha256": hashlib.sha256(text.encode()).hexdigest()[:16]}
                          for role, text in sorted(self.texts.items())}}


def load_release_texts(family: str, checkout: str | Path) -> ReleaseTexts:
    """Every role of ``family`` that the release writes as one string, read from ``checkout``."""
    release = RELEASES.get(family)
    if release is None:
        raise ReleasePromptError(f"prompts_from_release: prompt family {family!r} has no release map (families "
                                 f"with one: {', '.join(sorted(RELEASES))})")
    root = Path(checkout).expanduser()
    if not root.is_dir():
        raise ReleasePromptError(f"prompts_from_release: {root} is not a folder (a checkout of "
                                 f"{release.repository} at {release.commit})")
    commit = checkout_commit(root)
    if commit is not None and not commit.startswith(release.commit):
        raise ReleasePromptError(f"prompts_from_release: {root} is at commit {commit[:12]}, the spec cites "
                                 f"{release.repository} @{release.commit}; check out that commit")
    texts = {item.role: extract(root, item) for item in release.strings}
    sources = {item.role: f"{item.path}:{item.lines[0]}-{item.lines[1]}" for item in release.strings}
    return ReleaseTexts(family, root.resolve(), commit, texts, sources)


# ------------------------------------------------------------------------------------------------ the maps
#: Filled from the spec's citations (shared/spec/evidence_seekers.md), one entry per role that the release
#: writes as one string; see each Release's ``restated`` for the roles that keep senri's wording, and why.
_D, _PR, _M = "paravt/eval/driver.py", "Eval/vlmeval/vlm/video_o3/prompt.py", "Eval/vlmeval/vlm/video_o3/model.py"
_EV, _EU, _EC = "eval/evaluation.py", "eval/utils.py", "eval/constant.py"
_DC, _DG = "data/constant.py", "data/videocaption_generation.py"
_O_HEADER = {"action_turn": "step", "observation_turn": "step", "sample_fps": "fps", "total_frames": "n_frames",
             "start_time": "start", "end_time": "end"}

_MP, _CTL = "mmagent/prompts.py", "m3_agent/control.py"

RELEASES: dict[str, Release] = {
    # M3-Agent (shared/spec/omni_memory.md MP1..MP6): both fine-tuned models were trained on these strings.
    "m3_agent": Release("m3_agent", "ByteDance-Seed/m3-agent", "0e3e419", (
        ReleaseString("diarize", _MP, (14, 37), "prompt_audio_segmentation", "MP1"),
        ReleaseString("memorize", _MP, (308, 330), "prompt_generate_memory_with_ids_sft", "MP2"),
        ReleaseString("system", _CTL, (79, 79), "system_prompt", "MP3", template=True,
                      fields={"question": "question"}),
        ReleaseString("instruction", _CTL, (80, 89), "instruction", "MP4"),
        ReleaseString("last_round", _CTL, (175, 175), "content", "MP5"),
        ReleaseString("empty_note", _CTL, (130, 130), "search_result", "MP6"),
    )),
    "paravt": Release("paravt", "EvolvingLMMs-Lab/ParaVT", "cf55249", (
        ReleaseString("system", _D, (124, 143), "GENERAL_AGENTIC_SYSTEM", "P1", template=True,
                      json_fields={"tool_schema": ((86, 103), "TOOL_SCHEMA")}),
        ReleaseString("crop_result", _D, (504, 505), "text", "P3", positions=("n", "start", "end")),
        ReleaseString("crop_error", _D, (515, 515), "content", "P3b", positions=("start", "end")),
        ReleaseString("forced", _D, (522, 522), "force", "P4"),
    ), restated={"question": "P2/P-I4: built in code from several pieces in two files (utils.py load_samples: "
                             "the per-dataset question block and its instruction; driver.py: the path suffix), "
                             "no one string to read"}),
    "video_o3": Release("video_o3", "ZZQ987/Video-o3-Qwen3VL", "a6e0973", (
        ReleaseString("system", _M, (242, 249), "SYSTEM_PROMPT_MULTI_ROUND_MC", "O1"),
        ReleaseString("question", _PR, (13, 14), "VIDEO_INSERT_PROMPT", "O3", template=True,
                      more=(((16, 23), "QUESTION_TEMPLATE_MULTI_ROUND_MC"),),
                      fields={"sample_fps": "fps", "total_frames": "n_frames", "max_duration": "duration",
                              "question": "question", "options": "options"}),
        ReleaseString("observation", _M, (282, 285), "TOOL_CALL_CROP_VIDEO_MULTI_TRUN_PROMPT_MC", "O4",
                      template=True, fields=_O_HEADER),
        ReleaseString("error", _M, (288, 288), "ERROR_INFO_MULTI_TURN_PROMPT", "O5", template=True,
                      fields={"error_info": "error"}),
        ReleaseString("forced", _M, (290, 292), "FORCE_FINAL_ANSWER_PROMPT", "O6", template=True,
                      fields=_O_HEADER),
        ReleaseString("forced_error", _M, (295, 296), "FORCE_FINAL_ANSWER_PROMPT_ERROR_INFO", "O6b", template=True,
                      fields={"error_info": "error"}),
    )),
    "longvideo_r1": Release("longvideo_r1", "qiujihao19/LongVideo-R1", "77c87ec", (
        ReleaseString("system", _EC, (23, 67), "SYSTEM_PROMPT", "R1", template=True, fields={"width": "width"}),
        ReleaseString("question", _EV, (191, 191), "user_prompt", "R2", positions=("question", "options")),
        ReleaseString("duration", _EU, (78, 78), "text", "R2", positions=("duration",)),
        ReleaseString("high_caption", _EU, (85, 85), "text", "R2", positions=("index", "start", "end", ENDS_HERE)),
        ReleaseString("medium_caption", _EV, (118, 118), "text", "R3a",
                      positions=("ids", JOINS_PREVIOUS, "start", "end", ENDS_HERE)),
        ReleaseString("low_caption", _EV, (128, 128), "text", "R3b",
                      positions=("ids", JOINS_PREVIOUS, JOINS_PREVIOUS, "start", "end", ENDS_HERE)),
        ReleaseString("information", _EV, (158, 158), "text", "R3c", positions=("answer",)),
        ReleaseString("nudge", _EV, (94, 94), "content", "R4"),
        ReleaseString("last_round", _EV, (54, 54), "text", "R5"),
        ReleaseString("video_qa_system", _EC, (71, 75), "VIDEO_QA_SYSTEM_PROMPT", "R6"),
        ReleaseString("video_qa_frame", _EU, (146, 146), "text", "R-T2", positions=("time",)),
        ReleaseString("caption_high", _DC, (26, 42), "CAPTION_SYSTEM_PROMPT", "R7", template=True,
                      fields={"num_frame": "num_frame", "num_word": "num_words"}),
        ReleaseString("caption_low", _DC, (44, 61), "CAPTION_SYSTEM_PROMPT_LOW", "R7", template=True,
                      fields={"num_frame": "num_frame", "num_word": "num_words"}),
        ReleaseString("caption_frame", _DG, (28, 28), "text", "R7", positions=("time",)),
    )),
    # shared/spec/direct_specialists.md I-P1: the Video-MME-v2 script's MCQ string (the benchmark path's task prompt
    # lives in an unpublished submodule). Cambrian-S's and VideoChat3's texts are built by code around several
    # strings, so they have no map and keep senri's restatement (config/prompts/{cambrian_s,videochat3}/).
    "internvideo3": Release("internvideo3", "OpenGVLab/InternVideo", "3965eef", (
        ReleaseString("mcq", "InternVideo3/InternVideo3_eval/scripts/eval_videommev2.py", (18, 22), "MCQ_PROMPT",
                      "I-P1", template=True, fields={"question": "question", "options": "options"}),
    )),
}


def prompt_source(method_config: Mapping[str, Any]) -> str | None:
    """For a method whose model was trained on its release's prompts: ``"release"`` when the run read them from a
    checkout (``prompts_from_release``), ``"restated"`` when it ran on senri's restatement; None for any other
    method (its prompts are the paper's intents, written in senri's words by design)."""
    family = method_config.get("prompts")
    if family not in RELEASES:
        return None
    release = (method_config.get("prompt_identity") or {}).get("release") or {}
    return "release" if release.get("from_release") else "restated"
