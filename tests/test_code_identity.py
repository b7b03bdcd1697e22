"""A stage's code identity is derived from what its job imports (issue 59): edits rerun exactly the stages that
run the edited code. The demo DAG test (tests/test_workflow.py) checks the same against the modules each demo
job really imported."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from senri import code_identity, workflow
from senri.backends import BACKENDS
from senri.methods import METHODS

#: Every stage a rule's params hash, by the name the rules give it.
RULE_STAGES = sorted({m for path in (REPO / "rules").glob("*.smk")
                      for m in re.findall(r'stage_code\("(\w+)"\)', path.read_text())} | {"answer", "memory_system"})


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory) -> Path:
    """A copy of the package beside links to the repository's config and workflow folders: a checkout to edit."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(REPO / "src" / "senri", root / "src" / "senri", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("config", "workflow"):
        (root / folder).symlink_to(REPO / folder)
    return root / "src" / "senri"


def digests(package: Path) -> dict[tuple, str]:
    """Every stage's digest, and every registered method's answer digest on each registered backend."""
    sources = code_identity._PackageSources(package)  # a fresh parse: the copy was just edited

    stage = {}
    for name in RULE_STAGES:
        commands = code_identity.STAGE_COMMANDS.get(name, (name.replace("_", "-"),))
        stage[name] = sources.closure(tuple(sorted({m for c in commands for m in sources.command_imports(c)})))
    out = {("stage", name): sources.digest(mods) for name, mods in stage.items()}
    for method in METHODS.names():
        for backend in BACKENDS.names():
            roots = (METHODS.target(method).partition(":")[0], BACKENDS.target(backend).partition(":")[0])
            out[("answer", method, backend)] = sources.digest({*stage["answer"], *sources.closure(tuple(sorted(roots)))})
    return out


def changed_after(package: Path, rel: str, edit=lambda text: text + "\n# edited\n") -> set[tuple]:
    """The digests an edit of ``rel`` (a path under the package, or under the checkout's root) changes."""
    before = digests(package)
    target = package / rel if (package / rel).exists() else package.parents[1] / rel
    original = target.read_text()
    target.write_text(edit(original))
    try:
        after = digests(package)
    finally:
        target.write_text(original)
    return {key for key in before if before[key] != after[key]}


def test_editing_a_scorer_changes_the_tables_and_no_answer_job(package_copy):
    """The stages that score replies (the tables, the report, the richness analysis over VideoLucy's answers)
    and nothing upstream: no answer job, whatever its method or backend."""
    changed = changed_after(package_copy, "benchmarks/scoring.py")
    assert {("stage", "aggregate"), ("stage", "report")} <= changed
    assert changed <= {("stage", "aggregate"), ("stage", "report"), ("stage", "richness")}


def test_editing_probe_changes_the_stages_that_run_it_and_not_the_tables(package_copy):
    changed = {key[1] for key in changed_after(package_copy, "probe.py") if key[0] == "stage"}
    assert {"probe", "frames", "anonymize", "track", "memory"} <= changed
    assert not changed & {"aggregate", "ingest", "demo_data", "videos_table"}


def test_editing_one_backend_changes_only_the_answer_jobs_on_it(package_copy):
    changed = changed_after(package_copy, "backends/llamacpp.py")
    assert changed and {key[2] for key in changed} == {"llamacpp"} and {key[0] for key in changed} == {"answer"}


def test_editing_one_method_changes_only_its_own_answer_jobs(package_copy):
    changed = changed_after(package_copy, "methods/random.py")
    assert {key[1] for key in changed} == {"random"}


def test_data_files_a_stage_reads_are_part_of_its_code(package_copy):
    published = next((package_copy / "report" / "published").glob("*.csv")).relative_to(package_copy)
    assert ("stage", "report") in changed_after(package_copy, str(published))
    changed = {key[1] for key in changed_after(package_copy, "workflow/schemas/questions.schema.json")}
    assert "ingest" in changed


def test_what_is_not_stage_code_is_named_once_and_changes_nothing(package_copy):
    assert changed_after(package_copy, "cli.py", lambda text: text.replace(
        "def build_parser", "def unused_subcommand():\n    pass\n\n\ndef build_parser")) == set()
    assert changed_after(package_copy, "workflow/schemas/config.schema.json",
                         lambda text: text.rstrip() + "\n") == set()
    assert set(code_identity.NOT_STAGE_CODE) == {"senri.cli", "senri.__main__"}
    assert all(code_identity.module_path(name) for name in [*code_identity.NOT_STAGE_CODE,
                                                            *code_identity.PER_JOB_REGISTRIES])


def test_imports_under_type_checking_and_relative_imports(tmp_path):
    package = tmp_path / "src" / "senri"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import b\nif TYPE_CHECKING:\n    from senri import typed\n"
        "def f():\n    from ..lazy import x\n    return 'senri.registered:Thing'\n")
    for name in ("sub/b.py", "typed.py", "lazy.py", "registered.py"):
        (package / name).write_text("")
    sources = code_identity._PackageSources(package)
    assert sources.closure(("senri.sub.a",)) == ("senri", "senri.lazy", "senri.registered", "senri.sub",
                                                 "senri.sub.a", "senri.sub.b")


def test_every_rule_that_runs_senri_hashes_its_code():
    """The rerun promise holds for every stage: a rule whose shell runs ``senri <command>`` carries that
    stage's code digest in its params, and the digest resolves to the command's handler."""
    for path in sorted((REPO / "rules").glob("*.smk")):
        for name, body in re.findall(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", path.read_text(), re.M | re.S):
            if "python -m senri" in body:
                assert re.search(r"code=(stage_code\(\"\w+\"\)|\w+_code)", body), f"{path.name}: rule {name}"
    for stage in RULE_STAGES:
        assert workflow.code_digest(stage)


def test_scripts_a_job_runs_in_another_environment_are_part_of_its_code(package_copy):
    """The release worker's entry runs under the model's own interpreter, never imported by senri: it is named by
    the worker backend's folder constant, so an edit reruns the runs on that backend (and those of a method that
    starts a worker itself), and no stage or other run."""
    changed = changed_after(package_copy, "workers/worker_main.py")
    assert ("answer", "specialist", "release_worker") in changed and ("answer", "blind", "release_worker") in changed
    assert not {key for key in changed if key[0] != "answer"}
    assert ("answer", "blind", "llamacpp") not in changed and ("answer", "random", "openai") not in changed
