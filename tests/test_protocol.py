"""``docs/protocol.md``, checked row by row: every instruction row points at a prompt line that carries its
phrase, and (for the families whose episodes run here) the request of that role sent to the model contains it;
every instruction id of the spec (``shared/spec/prompts.md``) is mapped; every test a row names exists; every
statement names code that exists. Rows added by other methods' sections (VideoLucy) are checked the same way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO
from reference import reference_file
from test_agent import run_agent, shop  # noqa: F401 — ``shop`` is the generated clip fixture the episodes use

PROTOCOL = REPO / "docs" / "protocol.md"
SPEC = reference_file("spec/prompts.md")


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells; ``\\|`` is a literal bar inside a cell."""
    inner = line.strip()[1:-1]
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", inner)]


def protocol_rows() -> list[dict[str, str]]:
    """Every row of every table, with its header's column names and the section (## heading) it sits in."""
    rows, section, header = [], "", None
    lines = PROTOCOL.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:].strip()
        if not line.strip().startswith("|"):
            header = None
            continue
        if header is None:
            if i + 1 < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1].strip()):
                header = [c.lower() for c in _cells(line)]
            continue
        if re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()):
            continue
        cells = _cells(line)
        rows.append({"section": section, "line": str(i + 1), **dict(zip(header, cells))})
    return rows


ROWS = protocol_rows()
INSTRUCTIONS = [r for r in ROWS if {"id", "carried by", "phrase", "test"} <= set(r)]
STATEMENTS = [r for r in ROWS if {"statement", "code", "test"} <= set(r)]


def _strip(text: str) -> str:
    return text.strip().strip("`").strip()


def _row_id(row: dict[str, str]) -> str:
    return f"protocol.md:{row['line']}:{row.get('id') or row.get('statement', '')[:40]}"


def spec_ids() -> list[str]:
    return re.findall(r"^([A-Z]{1,2}\d+)\.\s", SPEC.read_text(encoding="utf-8"), re.MULTILINE)


def test_the_protocol_map_has_its_sections_and_tables():
    text = PROTOCOL.read_text(encoding="utf-8")
    for heading in ("## SENRI-Agent, memory search and direct perception", "## VideoLucy", "## Deviations"):
        assert heading in text
    assert len(INSTRUCTIONS) >= 24 and len(STATEMENTS) >= 20
    assert len(spec_ids()) >= 35


def test_every_instruction_id_of_the_spec_is_mapped():
    mapped = {_strip(r["id"]) for r in INSTRUCTIONS}
    missing = [i for i in spec_ids() if i not in mapped]
    assert not missing, f"instruction ids without a row in docs/protocol.md: {missing}"


def test_every_benchmark_statement_of_the_spec_is_mapped_to_code_and_a_test():
    """Issue 51: each numbered statement of ``benchmarks.md`` (VM, LV, ML, EM) is named by a statement row of the
    two "Benchmarks" sections, which gives its code and its test (checked for existence by the tests below)."""
    spec = reference_file("spec/benchmarks.md").read_text(encoding="utf-8")
    ids = re.findall(r"^- \*\*((?:VM|LV|ML|EM)\d+)\*\*", spec, re.MULTILINE)
    assert len(ids) == 15 + 12 + 14 + 9
    rows = [r for r in STATEMENTS if r["section"].startswith("Benchmarks") and _strip(r.get("test", ""))]
    named = {i for r in rows for i in re.findall(r"\b(?:VM|LV|ML|EM)\d+\b", r["statement"] + r.get("source", ""))}
    missing = [i for i in ids if i not in named]
    assert not missing, f"benchmarks.md statements without a row (code and test) in docs/protocol.md: {missing}"


@pytest.mark.parametrize("row", INSTRUCTIONS, ids=_row_id)
def test_each_instruction_row_points_at_a_line_that_carries_its_phrase(row):
    where = _strip(row["carried by"])
    path, _, number = where.rpartition(":")
    assert path and number.isdigit(), f"carried by {where!r} is not path:line"
    lines = (REPO / path).read_text(encoding="utf-8").splitlines()
    assert 1 <= int(number) <= len(lines), f"{where}: the file has {len(lines)} lines"
    phrase = _strip(row["phrase"])
    assert phrase and phrase in lines[int(number) - 1], f"{where} does not contain {phrase!r}"


def _named_tests(cell: str) -> list[str]:
    return [_strip(t) for t in cell.split(",") if _strip(t)]


@pytest.mark.parametrize("row", [r for r in ROWS if r.get("test")], ids=_row_id)
def test_every_test_a_row_names_exists(row):
    for name in _named_tests(row["test"]):
        path, _, function = name.partition("::")
        assert function, f"{name!r} is not path::test_name"
        source = (REPO / path).read_text(encoding="utf-8")
        assert re.search(rf"^\s*def {re.escape(function.split('[')[0])}\(", source, re.MULTILINE), name


def code_references(cell: str) -> list[tuple[str, list[str]]]:
    """(path or glob, symbols) named by a ``code`` cell: ``path::symbol``, or ``path `symbol`, `other```, several
    separated by ``;``. Parts that are not file paths (a CLI command in backticks) name nothing to check."""
    refs = []
    for part in (p.strip() for p in cell.split(";") if p.strip()):
        if "::" in part:
            path, _, symbol = _strip(part).partition("::")
            refs.append((path, [symbol]))
            continue
        match = re.match(r"`?([\w./*-]+\.\w+)`?(.*)", part)
        if match:
            refs.append((match.group(1), re.findall(r"`([^`]+)`", match.group(2))))
    return refs


@pytest.mark.parametrize("row", STATEMENTS, ids=_row_id)
def test_every_statement_names_code_that_exists(row):
    for path, symbols in code_references(row["code"]):
        files = sorted(REPO.glob(path))
        assert files, f"{row['code']!r}: no file {path}"
        sources = "\n".join(f.read_text(encoding="utf-8") for f in files)
        for symbol in symbols:
            name = symbol.split(".")[-1].strip("`() ")
            assert re.search(rf"^\s*(def|class) {re.escape(name)}\b|^\s*{re.escape(name)}\s*[:=]", sources,
                             re.MULTILINE), f"{path} defines no {name}"


# --- the rendered requests: the phrase reaches the model in the role's request -----------------------------
#: prompt file → (purpose of the request, message role) it is rendered into.
ROLE_OF = {"controller_system": ("control", "system"), "controller": ("control", "user"),
           "actions": ("control", "user"), "actions_forced": ("control:forced", "user"),
           "verifier_system": ("verify", "system"), "verifier": ("verify", "user"),
           "verifier_reply": ("verify", "user"), "verifier_general": ("verify", "user"),
           "verifier_images": ("verify", "user"), "verifier_system_general": ("verify", "system"),
           "updater_system": ("update", "system"), "updater": ("update", "user")}
#: prompt family → the method whose scripted episode renders it (families of other sections test their own).
EPISODES = {"senri_agent": ("senri_agent", "senri_agent_no_tg"), "memory_search": ("memory_search",)}


@pytest.fixture(scope="module")
def rendered(shop, tmp_path_factory):  # noqa: F811
    """Text of every (method, purpose, role) the scripted episodes sent."""
    texts: dict[tuple[str, str, str], str] = {}
    for method in {m for methods in EPISODES.values() for m in methods}:
        _, calls = run_agent(shop, tmp_path_factory.mktemp(method), method)
        for call in calls:
            for message in call["payload"]["messages"]:
                key = (method, call["purpose"], message["role"])
                texts[key] = texts.get(key, "") + "\n".join(p for p in message["content"] if isinstance(p, str))
    return texts


RENDERABLE = [r for r in INSTRUCTIONS if Path(_strip(r["carried by"]).rpartition(":")[0]).parent.name in EPISODES]


@pytest.mark.parametrize("row", RENDERABLE, ids=_row_id)
def test_each_instruction_reaches_its_role_request(row, rendered):
    path = Path(_strip(row["carried by"]).rpartition(":")[0])
    purpose, role = ROLE_OF[path.stem]
    methods = EPISODES[path.parent.name]
    sent = "\n".join(rendered.get((m, purpose, role), "") for m in methods)
    assert sent, f"no {purpose} {role} message was sent by {methods}"
    assert _strip(row["phrase"]) in sent, f"{row['id']}: {row['phrase']!r} not in the {purpose} {role} message"


def test_a_prompt_edit_changes_exactly_the_slices_that_read_it(tmp_path):
    from senri.config import compose, stage_slice

    mine = tmp_path / "published"
    mine.mkdir()
    (mine / "controller_system.txt").write_text("Our lab's planner wording.\n")
    overrides = "method=[senri_agent,senri_agent_no_wm,memory_search,blind] model=[smollm2]"
    before = compose(overrides)
    after = compose(f"{overrides} method.senri_agent.prompts_dir={mine}")
    changed = {m for m in before["method"]
               if stage_slice(before, "answer", method=m, model="smollm2")
               != stage_slice(after, "answer", method=m, model="smollm2")}
    assert changed == {"senri_agent"}
