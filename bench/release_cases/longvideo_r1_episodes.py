"""LongVideo-R1's episodes kind (issue 60): the release's own evaluation loop, ``eval/evaluation.py``
``process_one_entry`` → ``run_multistep_vqa``, on a drawn caption tree with scripted MAIN_CLIENT and VIDEO_CLIENT.
Used by bench/release_cases/longvideo_r1.py (``--kinds episodes``).

The caption JSON is the release's own ``caption_generation`` (data/videocaption_generation.py, the caption_tree
kind's run: the decord stand-in, one placeholder per frame) with node k of its call order captioned
``<caption>c{k}</caption>``. The controller's replies and the video-QA replies are drawn by Hypothesis (valid,
malformed, repeated and out-of-range tool calls, answers with and without <think>, null content, unicode, no
answer by the turn limit).

Every message the release sends is stored as data, labelled by the release template it was built from — never
its text: the labels are read off the release's own source (the f-strings and string constants of
``run_multistep_vqa`` and ``format_message`` in source order) and each message is matched against them, keeping
only the values the template was filled with (ids, times, captions, answers). R1 the system prompt (its width),
R2 the first user turn (duration, high captions), R3 a caption observation, R3c a video-QA observation, R4 the
"think first" nudge, R5 the last-round notice; an assistant message is stored as the index of the scripted
reply it holds."""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import json
import re
import sys
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from common import examples, outcome
from release_import import Anything, load_file, stub
from reply_strategies import TEXT

#: The labels of run_multistep_vqa's distinct templates in source order (the last-round notice, the nudge, the
#: medium and low caption observations, the video-QA observation); a release whose templates differ fails here.
LOOP_LABELS = ["R5", "R4", "R3", "R3", "R3c"]
#: format_message's first two f-strings: the duration line and a high-level caption line (R2's parts).
FIRST_TURN_LABELS = ["R2_duration", "R2_high"]


def _template_regex(node: ast.AST) -> str:
    """A full-match regex for a string constant or an f-string: its constant parts literal, each value a group."""
    if isinstance(node, ast.Constant):
        return re.escape(node.value)
    parts = []
    for value in node.values:
        parts.append(re.escape(value.value) if isinstance(value, ast.Constant) else "(.*?)")
    if parts and parts[-1] == "(.*?)":
        parts[-1] = "(.*)"
    return "".join(parts)


def templates(path: Path, function: str) -> list[str]:
    """The distinct message templates of ``function`` in ``path`` in source order: every dict value under a
    ``"text"`` or ``"content"`` key that is a string or an f-string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(body):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in ("text", "content") and \
                        isinstance(value, (ast.JoinedStr, ast.Constant)) and \
                        (not isinstance(value, ast.Constant) or isinstance(value.value, str)):
                    found.append((value.lineno, value.col_offset, _template_regex(value)))
    out: list[str] = []
    for _, _, regex in sorted(found):
        if regex not in out:
            out.append(regex)
    return out


class Labeller:
    """Labels the release's messages by the template they match (see the module docstring)."""

    def __init__(self, src: Path, system_prompt: str) -> None:
        loop = templates(src / "eval" / "evaluation.py", "run_multistep_vqa")
        if len(loop) != len(LOOP_LABELS):
            raise SystemExit(f"run_multistep_vqa has {len(loop)} message templates, expected {len(LOOP_LABELS)}")
        self.loop = list(zip(LOOP_LABELS, loop))
        first = templates(src / "eval" / "utils.py", "format_message")[:2]
        self.first = dict(zip(FIRST_TURN_LABELS, first))
        self.frame = templates(src / "eval" / "utils.py", "video_qa_format_message")[0]  # a frame's time line
        self.system_prompt = system_prompt

    def _match(self, text: str) -> list:
        for label, regex in self.loop:
            m = re.fullmatch(regex, text, re.DOTALL)
            if m:
                return [label, *m.groups()]
        return ["?"]

    def message(self, message: dict, width: int, replies: list) -> list:
        role, content = message["role"], message["content"]
        if role == "system":
            return ["R1", width] if content == self.system_prompt.format(width=width) else ["?system"]
        if role == "assistant":
            text = content[0]["text"]
            return ["assistant", replies.index(text) if text in replies else "?"]
        if isinstance(content, str):
            return self._match(content)
        texts = [part["text"] for part in content]
        if len(texts) == 1:
            return self._match(texts[0])
        duration = re.fullmatch(self.first["R2_duration"], texts[1], re.DOTALL)
        highs = [re.fullmatch(self.first["R2_high"], t, re.DOTALL) for t in texts[2:]]
        if duration is None or not all(highs):
            return ["?R2"]
        return ["R2", {"duration": duration.group(1), "high": [list(m.groups()) for m in highs]}]


class Completions:
    """A scripted OpenAI client (``.chat.completions.create``): the k-th call gets ``replies[k]`` (None is a
    null content; none left raises, as a dead server would); every call's messages are kept (deep copies). A
    text part that is not a string is refused, as the API refuses it (HTTP 400)."""

    def __init__(self, replies: list, video=None) -> None:
        self.replies, self.calls, self.video, self.frames = list(replies), [], video, []
        self.chat = type("Chat", (), {})()
        self.chat.completions = self

    def create(self, *, model, messages, **kwargs):
        for message in messages:
            parts = message["content"] if isinstance(message["content"], list) else [{"text": message["content"]}]
            for part in parts:
                if "text" in part and not isinstance(part["text"], str):
                    raise TypeError(f"the API refuses a text part that is not a string: {part['text']!r}")
        self.calls.append(copy.deepcopy(messages))
        if self.video is not None:  # the frames the decord stand-in was last asked for
            self.frames.append(self.video.asked)
        if not self.replies:
            raise RuntimeError("scripted client: no reply left")
        message = type("Message", (), {"content": self.replies.pop(0)})()
        return type("Response", (), {"choices": [type("Choice", (), {"message": message})()]})()


class CountingCaptions:
    """The caption model for caption_generation: call k (high, medium, low order) is ``<caption>c{k}</caption>``."""

    def __init__(self) -> None:
        self.count = 0
        self.chat = type("Chat", (), {})()
        self.chat.completions = type("Completions", (), {"create": self.create})()

    def create(self, *, model, messages, max_tokens):
        text = f"<caption>c{self.count}</caption>"
        self.count += 1
        message = type("Message", (), {"content": text})()
        return type("Response", (), {"choices": [type("Choice", (), {"message": message})()]})()


def load_loop(src: Path, eval_utils):
    """eval/evaluation.py over eval's own constant and utils modules (its OpenAI clients are replaced per
    episode, tqdm is not used)."""
    stub("openai", OpenAI=Anything)
    stub("tqdm", tqdm=Anything)
    saved = {name: sys.modules.get(name) for name in ("utils",)}
    sys.modules["utils"] = eval_utils
    try:
        return load_file("lvr1_evaluation", src / "eval" / "evaluation.py")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def episode(loop, captions, labeller, video, n_frames: int, fps: float, replies: list, qa_replies: list,
            max_rounds: int, question: str) -> dict:
    """process_one_entry on one drawn episode: every controller call's labelled messages, the tool calls the
    release read, the video-QA calls (query, frame ids, time labels), the pred and the error it recorded."""
    video.n_frames, video.fps, video.side = n_frames, fps, 1
    encode = captions.sample_video_woid
    captions.sample_video_woid = lambda frames, scale_factor: ["jpeg"] * len(frames)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            levels, width = captions.caption_generation("v.mp4", None, CountingCaptions(), max_workers=1)
    finally:
        captions.sample_video_woid = encode
    main, qa = Completions(replies), Completions(qa_replies, video)
    loop.MAIN_CLIENT, loop.VIDEO_CLIENT = main, qa
    read: list[list] = []
    parse = loop.parse_function_call

    def reading(text):
        name, args, legal = parse(text)
        read.append([text, name, repr(args), legal])
        return name, args, legal

    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "v.json").write_text(json.dumps({"width": width, "captions": levels}), encoding="utf-8")
        loop.parse_function_call = reading
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                entry = loop.process_one_entry({"key": "v", "question": question}, "lvbench", folder, folder,
                                               max_rounds=max_rounds)
        finally:
            loop.parse_function_call = parse
    turns = [[labeller.message(m, width, replies) for m in call] for call in main.calls]
    first = next((label[1] for call in turns for label in call if label[0] == "R2"), None)
    for call in turns:  # the first turn is the same message in every call: its values are stored once
        for n, label in enumerate(call):
            if label[0] == "R2":
                call[n] = ["R2"] if label[1] == first else ["?R2 changed"]
    video_qa = []
    for call, frames in zip(qa.calls, qa.frames):
        texts = [p["text"] for p in call[1]["content"] if p["type"] == "text"]
        times = [re.fullmatch(labeller.frame, t, re.DOTALL) for t in texts[1:]]
        video_qa.append({"query": texts[0], "frame_ids": frames,
                         "time_labels": [m.group(1) if m else "?" for m in times],
                         "n_images": sum(p["type"] == "image_url" for p in call[1]["content"])})
    lost = entry["pred"] is None and isinstance(entry["output"], str)
    return {"width": width, "first_turn": first, "turns": turns, "tool_calls": read, "video_qa": video_qa, "pred": entry["pred"],
            "error": entry["output"][:200] if lost else None, "rounds": len(main.calls)}


def replies_strategy() -> st.SearchStrategy:
    """(controller replies, video-QA replies, turn limit): mostly valid tool calls on ids in [1, 4] (every
    width holds them), then ids out of range, malformed and unknown calls, arguments of odd types, answers with
    and without <think>, text with no block, null content; a drawn reply repeated; unicode throughout."""
    # an id in [1, 4] nine times in ten, else any of -1..9 (out of the tree's range on every side)
    ids = st.tuples(st.integers(0, 9), st.integers(1, 4), st.integers(-1, 9)).map(lambda t: t[2] if t[0] == 0 else t[1])
    query = st.one_of(TEXT, st.sampled_from(["what is on the table?", "どこ?", "a \"quoted\" q", ""]))
    think = st.one_of(st.just("<think>t</think>"), TEXT.map(lambda t: f"<think>{t}</think>"))
    valid = st.one_of(
        st.tuples(ids, ids).map(lambda t: f"get_caption(({t[0]},{t[1]}))"),
        st.tuples(ids, ids, ids).map(lambda t: f"get_caption(({t[0]},{t[1]},{t[2]}))"),
        st.tuples(st.tuples(ids, ids, ids), query).map(lambda t: f"video_qa(({t[0][0]},{t[0][1]},{t[0][2]}), {t[1]!r})"))
    odd = st.sampled_from([
        "get_caption((1,2)", "get_caption((1,))", "get_caption((1,2,3,4))", "get_caption(5)", "get_caption('12')",
        "get_caption((1.0,2.5))", "get_caption((True,1))", "video_qa((1,2), 'q')", "video_qa((1,2,3))",
        "video_qa((1.0,2,3), 'q')", "video_qa(('1',2,3), 'q')", "video_qa((True,2,3), 'q')", "video_qa((1,2,3), 5)",
        "video_qa((1,2,3), ['q'])", "video_qa((1,2,3), None)", "search((1,2))", "get_caption()",
        "get_caption(\n(1,2)\n)", "get_caption(((1,2)))", "video_qa({1: 0, 2: 0, 3: 0}, 'q')", "get caption((1,2))",
        "ビデオ((1,2))", "get_caption((1,2)) extra", "get_caption([2, 3])", "video_qa([1, 2, 3], 'q')",
        "get_caption({1, 2})", "get_caption(('1', '2'))", "get_caption((1, 2), (3,))"])
    call = st.one_of(valid, odd)
    letter = st.one_of(st.sampled_from(["A", "B", "C", "D", "b", " C ", "E", "", "B) kitchen"]), TEXT)
    tool = st.tuples(think, call).map(lambda t: f"{t[0]}<tool>{t[1]}</tool>")
    reply = st.one_of(
        tool, tool, tool, tool,
        st.tuples(think, letter).map(lambda t: f"{t[0]}<answer>{t[1]}</answer>"),
        letter.map(lambda a: f"<answer>{a}</answer>"),
        call.map(lambda c: f"<tool>{c}</tool>"),
        st.tuples(think, call, letter).map(lambda t: f"{t[0]}<tool>{t[1]}</tool><answer>{t[2]}</answer>"),
        TEXT, st.sampled_from(["", "<think>t</think>", "<think>t<tool>get_caption((1,1))</tool>", None,
                               "<THINK>t</THINK><ANSWER>B</ANSWER>", "<think>t</think>\n<tool>\nget_caption((1,1))\n</tool>"]))
    # an episode: valid tool turns, other replies put in between, an ending (an answer, any reply or none), the
    # last reply repeated 0-3 times (repeated calls)
    final = st.one_of(st.tuples(think, letter).map(lambda t: [f"{t[0]}<answer>{t[1]}</answer>"]),
                      reply.map(lambda r: [r]), st.just([]))

    def episode(parts):
        body, inserted, odd_calls, end, repeat = parts
        body = list(body)
        for at, extra in inserted + odd_calls:
            body.insert(min(at, len(body)), extra)
        body += end
        return (body + [body[-1]] * repeat) if body else [None]

    replies = st.tuples(st.lists(st.tuples(think, valid).map(lambda t: f"{t[0]}<tool>{t[1]}</tool>"), max_size=6),
                        st.lists(st.tuples(st.integers(0, 6), reply), max_size=3),
                        st.lists(st.tuples(st.integers(0, 6), st.tuples(think, odd).map(
                            lambda t: f"{t[0]}<tool>{t[1]}</tool>")), max_size=2), final,
                        st.integers(0, 3)).map(episode)
    qa_reply = st.one_of(TEXT.map(lambda a: f"<reasoning>r</reasoning><answer>{a}</answer>"),
                         st.just("<answer>a red cup</answer>"),
                         st.sampled_from(["no answer", "<answer></answer>", None, "<answer>x"]))
    return st.tuples(replies, st.lists(qa_reply, max_size=4),
                     st.one_of(st.integers(1, 3), st.integers(4, 12), st.integers(4, 12)))


def episode_cases(src: Path, captions, eval_utils, video, n: int) -> list[dict]:
    """``n`` drawn episodes: the tree shape (frames, rate: widths 4 to 8), the scripted replies, the turn limit;
    ``output`` the release's episode (or what it raised outside process_one_entry's own catch). ``video`` is
    the decord stand-in's state (longvideo_r1.Video of the running generator)."""
    loop = load_loop(src, eval_utils)
    labeller = Labeller(src, loop.SYSTEM_PROMPT)
    shape = st.tuples(st.one_of(st.integers(600, 20_000), st.integers(600, 400_000),
                                st.sampled_from([480, 1800, 108000, 324000])),
                      st.sampled_from([1.0, 4.0, 25.0, 30.0, 29.97002997002997]))
    question = st.sampled_from(["Which room is shown first?\n(A) hall\n(B) kitchen\n(C) garden\n(D) street",
                                "何が最初に映る?"])
    cases = []
    for (n_frames, fps), (replies, qa_replies, max_rounds), asked in examples(
            st.tuples(shape, replies_strategy(), question), n):
        given = {"n_frames": n_frames, "fps": fps, "replies": replies, "video_qa_replies": qa_replies,
                 "max_rounds": max_rounds, "question": asked}
        cases.append({"input": given, "output": outcome(lambda: episode(
            loop, captions, labeller, video, n_frames, fps, replies, qa_replies, max_rounds, asked))})
    return cases
