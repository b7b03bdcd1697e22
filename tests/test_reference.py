"""The vendored reference data (``tests/reference/``) is complete and, where the shared folder sits beside the
checkout (developers' machines and CI), still byte-identical to it: a change upstream shows up as a failure here
instead of tests silently comparing with stale numbers."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from reference import REFERENCE

SHARED = REPO.parent / "shared"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_vendored_reference_holds_every_conformance_file():
    for name in ("paper_table2.csv", "paper_table3.csv", "paper_table4.csv", "paper_table11.csv",
                 "benchmarks/videomme/output_test_template.json", "benchmarks/mlvu/4_count.json",
                 "spec/prompts.md", "spec/benchmarks.md", "videolucy/videolucy_table1_videomme.csv"):
        assert (REFERENCE / name).is_file(), name
    for system in ("worldmm", "magic_video", "videoarm", "egagent", "paravt", "video_o3", "longvideo_r1",
                   "cambrian_s", "internvideo3", "videochat3", "light_omni", "m3_agent"):
        assert (REFERENCE / "release_cases" / system / "cases.json").is_file(), system


def test_the_vendored_copy_equals_the_shared_folder_where_it_is_present():
    if not (SHARED / "reference").is_dir():
        return  # a clone without the shared folder: the vendored copy is all there is
    upstream = _files(SHARED / "reference") | {f"spec/{k}": v for k, v in _files(SHARED / "spec").items()}
    # scorers/ and generated/ are made here from the tools' and the releases' own code (bench/scorer_cases.py,
    # bench/release_cases/), not copied from the shared folder.
    vendored = {k: v for k, v in _files(REFERENCE).items()
                if k != "README.md" and not k.startswith(("scorers/", "generated/"))}
    assert sorted(vendored) == sorted(upstream)
    changed = [k for k in upstream if vendored[k] != upstream[k]]
    assert not changed, f"refresh tests/reference/ from the shared folder: {changed}"


def test_the_published_numbers_shipped_in_the_package_equal_the_vendored_reference():
    """The report reads papers' published numbers from the package (an installed senri has no tests/): each
    shipped copy must be the vendored file byte for byte."""
    from senri.report.published import PUBLISHED_DIR

    shipped = sorted(PUBLISHED_DIR.glob("*.csv"))
    assert shipped
    for path in shipped:  # VideoLucy's tables under videolucy/, SENRI's (paper_table2.csv) at the top
        vendored = next(p for p in (REFERENCE / "videolucy" / path.name, REFERENCE / path.name) if p.is_file())
        assert path.read_bytes() == vendored.read_bytes(), path.name


def test_the_generated_cases_readme_counts_what_the_case_files_hold():
    """tests/reference/generated/README.md's table (cases per system and kind, the commit) is the one
    ``bench/release_cases/summary.py`` derives from the case files' ``meta``: a regeneration that changes the
    counts shows up here until the README is refreshed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("summary", REPO / "bench" / "release_cases" / "summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    assert sorted(summary.SYSTEMS) == sorted(p.name for p in (REFERENCE / "generated").iterdir()
                                             if (p / "cases.json").is_file())
    readme = (REFERENCE / "generated" / "README.md").read_text(encoding="utf-8")
    assert summary.table() in readme, "refresh the table: python bench/release_cases/summary.py"
