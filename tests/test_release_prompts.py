"""prompts_from_release (issue 38 item 4): the exact strings read from a release checkout the user provides, by
the spec's file and line citations, parsed with ast (never imported), as senri templates; the run records which
prompts it used and the report marks runs of release-trained models on senri's restatement.

The checkouts here are hand-written: each cited file holds, at the cited lines, a string of our own bound to the
release's name, with the release's field names, so what is checked is senri's map and reader, not the text."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from senri.release_prompts import (ENDS_HERE, JOINS_PREVIOUS, RELEASES, Release, ReleasePromptError, ReleaseString,
                                   extract, load_release_texts, prompt_source)


def _write_at(path: Path, line: int, source: str) -> None:
    """``source`` placed so that its first line is ``line`` of ``path`` (earlier lines: comments), appended to
    what the file already holds when that ends before ``line``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    have = path.read_text().splitlines() if path.exists() else []
    assert len(have) < line, f"{path}: line {line} is already taken"
    have += ["# filler"] * (line - 1 - len(have))
    path.write_text("\n".join(have + textwrap.dedent(source).strip("\n").splitlines()) + "\n")


def _fake_checkout(root: Path, release: Release) -> Path:
    """A checkout of ``release`` whose every cited string is ours, bound to the release's name at the cited lines:
    the role's name, a dollar, literal braces and a field for each mapped one (a format template's by name, an
    f-string's by position: ids joined by commas, a trailing value the template ends before), any further
    strings the release concatenates, and json.dumps of a literal for a JSON field."""
    writes: list[tuple[str, int, str]] = []
    for item in release.strings:
        if item.template:
            fields = " ".join("{" + f + "}" for f in (*item.fields, *item.json_fields))
            literal = repr(f"our words for {item.role}: $5 {{{{braces}}}} {fields}")
        elif item.positions:
            body, joined = "", False
            for i, target in enumerate(item.positions):
                if target == JOINS_PREVIOUS:
                    body += ",{v%d}" % i
                else:
                    body += (" " if body else "") + "{v%d}" % i
            literal = "f" + repr(f"our words for {item.role}: $5 {{{{braces}}}} {body}")
        else:
            literal = repr(f"our words for {item.role}: $5 {{braces}}")
        writes.append((item.path, item.lines[0], f"{item.name} = {literal}"))
        writes += [(item.path, lines[0], f"{name} = {' then more'!r}") for lines, name in item.more]
        writes += [(item.path, lines[0], f'{name} = json.dumps({{"type": "function", "n": [1, 2]}})')
                   for lines, name in item.json_fields.values()]
    for path, line, source in sorted(writes):
        _write_at(root / path, line, source)
    return root


def test_a_constant_an_f_string_and_a_format_template_become_senri_templates(tmp_path):
    source = tmp_path / "rel" / "agent.py"
    _write_at(source, 3, 'SYSTEM = "cost $5 {not a field}"')
    _write_at(source, 5, 'def observe(n, s):\n    return f"{len(n)} frames from {s:.1f}s ({{x}})"')
    _write_at(source, 9, 'TEMPLATE = ("Describe {num_frame} frames "\n            "in {num_word} words.")')
    _write_at(source, 12, 'PROMPTS = {"mcq": "Answer with " + LETTER, "open": "free"}')
    _write_at(source, 13, 'CAPTION = f"Caption (({h},{m})) from {t[0]}:{data[h * w]}"')
    _write_at(source, 14, 'SCHEMA = json.dumps({"a": [1, "x"]})\nSYSTEM2 = "Tools: {schema}\\n"')
    system = ReleaseString("system", "agent.py", (3, 3), "SYSTEM", "P1")
    observe = ReleaseString("crop_result", "agent.py", (5, 7), "observe", "P3", positions=("frames", "start"))
    caption = ReleaseString("caption", "agent.py", (9, 10), "TEMPLATE", "R7",
                            fields={"num_frame": "num_frame", "num_word": "num_words"}, template=True)
    forced = ReleaseString("forced", "agent.py", (12, 12), "mcq", "P4", positions=("letters",))
    node = ReleaseString("medium", "agent.py", (13, 13), "CAPTION", "R3a",
                         positions=("ids", JOINS_PREVIOUS, "start", ENDS_HERE))
    tools = ReleaseString("tools", "agent.py", (15, 15), "SYSTEM2", "P1", template=True,
                          json_fields={"schema": ((14, 14), "SCHEMA")})
    root = tmp_path / "rel"
    assert extract(root, system) == "cost $$5 {not a field}"
    assert extract(root, observe) == "${frames} frames from ${start}s ({x})"
    assert extract(root, caption) == "Describe ${num_frame} frames in ${num_words} words."
    assert extract(root, forced) == "Answer with ${letters}"
    assert extract(root, node) == "Caption ((${ids})) from ${start}:"
    assert extract(root, tools) == 'Tools: {"a": [1, "x"]}\n'
    # a field the map does not know, a name not bound at the lines, a binding that is not a string
    with pytest.raises(ReleasePromptError, match=r"f-string field 2 \(\{s\}\) has no senri placeholder"):
        extract(root, ReleaseString("crop_result", "agent.py", (5, 7), "observe", "P3", positions=("frames",)))
    with pytest.raises(ReleasePromptError, match=r"has 2 f-string field\(s\), the map expects 3"):
        extract(root, ReleaseString("crop_result", "agent.py", (5, 7), "observe", "P3", positions=("a", "b", "c")))
    with pytest.raises(ReleasePromptError, match=r"field \{num_word\} .* no senri placeholder"):
        extract(root, ReleaseString("caption", "agent.py", (9, 10), "TEMPLATE", "R7",
                                    fields={"num_frame": "num_frame"}, template=True))
    with pytest.raises(ReleasePromptError, match=r"agent.py:4-4 .*no expression bound to 'SYSTEM'"):
        extract(root, ReleaseString("system", "agent.py", (4, 4), "SYSTEM", "P1"))
    with pytest.raises(ReleasePromptError, match="no such file"):
        extract(root, ReleaseString("system", "nope.py", (3, 3), "SYSTEM", "P1"))
    _write_at(source, 17, "BAD = compute(1)")
    with pytest.raises(ReleasePromptError, match="not a string the release wrote down"):
        extract(root, ReleaseString("bad", "agent.py", (17, 17), "BAD", "P9"))


def test_the_checkout_is_parsed_never_run(tmp_path):
    marker = tmp_path / "ran"
    source = tmp_path / "rel" / "agent.py"
    _write_at(source, 1, f'open({str(marker)!r}, "w").write("x")\nSYSTEM = "words"')
    assert extract(tmp_path / "rel", ReleaseString("system", "agent.py", (2, 2), "SYSTEM", "P1")) == "words"
    assert not marker.exists()


@pytest.mark.parametrize("family", sorted(RELEASES))
def test_every_mapped_role_reads_from_a_checkout_laid_out_as_cited_and_renders(tmp_path, family):
    """Each family's map against a hand-written checkout with the spec's layout: every mapped role is read,
    is a role senri has a file for, and renders with the placeholders senri's file uses (no field left over)."""
    from senri.prompts import PROMPTS_DIR, prompt_set

    release = RELEASES[family]
    checkout = _fake_checkout(tmp_path / family, release)
    texts = load_release_texts(family, checkout)
    assert set(texts.texts) == {i.role for i in release.strings}
    prompts = prompt_set(family, from_release=checkout)
    restated = prompt_set(family)
    for item in release.strings:
        assert (PROMPTS_DIR / family / f"{item.role}.txt").is_file(), item.role
        ours = restated[item.role].placeholders()
        theirs = prompts[item.role].placeholders()
        assert theirs <= ours, (item.role, theirs - ours)
        text = prompts.render(item.role, **{name: f"<{name}>" for name in ours})
        assert text.startswith(f"our words for {item.role}: $5"), text
        assert str(prompts.path(item.role)) == f"{checkout / item.path}:{item.lines[0]}-{item.lines[1]}"
    identity = prompts.identity()
    assert identity["release"]["from_release"] == sorted(texts.texts)
    assert identity["release"]["roles"][release.strings[0].role]["source"].startswith(release.strings[0].path)
    assert identity["files"] != restated.identity()["files"]
    # the roles that keep senri's restatement say why
    for role, why in release.restated.items():
        assert role not in texts.texts and why and (PROMPTS_DIR / family / f"{role}.txt").is_file()


def test_a_checkout_at_another_commit_or_missing_is_refused_naming_it(tmp_path):
    family = sorted(RELEASES)[0]
    release = RELEASES[family]
    checkout = _fake_checkout(tmp_path / "co", release)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    with pytest.raises(ReleasePromptError, match=rf"at commit [0-9a-f]{{12}}, the spec cites .*@{release.commit}"):
        load_release_texts(family, checkout)
    with pytest.raises(ReleasePromptError, match="is not a folder"):
        load_release_texts(family, tmp_path / "nowhere")
    with pytest.raises(ReleasePromptError, match="has no release map"):
        load_release_texts("videoarm", checkout)


def test_the_run_records_its_prompt_source_and_the_config_refuses_a_bad_checkout(tmp_path):
    from senri import config as cfgmod

    family = "paravt"
    checkout = _fake_checkout(tmp_path / "ParaVT", RELEASES[family])
    cfg = cfgmod.compose(f"method=[paravt,video_o3] model=[smollm2] method.paravt.prompts_from_release={checkout}")
    paravt, video_o3 = cfg["method"]["paravt"], cfg["method"]["video_o3"]
    assert paravt["prompt_identity"]["release"]["checkout"] == str(checkout.resolve())
    assert prompt_source(paravt) == "release" and prompt_source(video_o3) == "restated"
    assert prompt_source({"prompts": "videoarm"}) is None
    # the answer stage's slice carries it: a rerun on the release's strings is another run
    slice_ = cfgmod.stage_slice(cfg, "answer", method="paravt", model="smollm2")
    assert slice_["method"]["prompt_identity"]["release"]["from_release"]
    with pytest.raises(cfgmod.ConfigError, match=r"config.method.paravt.prompts: .*nowhere is not a folder"):
        cfgmod.compose(f"method=[paravt] model=[smollm2] method.paravt.prompts_from_release={tmp_path}/nowhere")
