"""``videoarm``: evidence seeking with tools over a per-question hierarchical memory (VideoARM; spec
``videoarm.md``, statements A-*).

VideoARM builds no memory ahead of the question. Per question, a controller navigates the video with tools
and keeps what it saw in HM³ (``scene_snapshots``, ``audio_transcripts``, ``clip_analyses``), which is sent
again at every step:

- At most ``max_iterations`` (10) steps (A-L1). Each step's request is rebuilt from scratch (A-L2): the
  system prompt (A1, plus A3 when there is no audio), one user turn (A2: video info, the HM³ as JSON, the
  question and the multiple-choice instruction) and the mosaics of the latest ``scene_snapper`` call as
  images (A-T3, A-L6). Earlier replies and tool outputs are not re-sent; they live on only through HM³.
- Step 1 must call a tool (``tool_choice: required``); a later reply without a tool call is the answer
  (A-L3), unless it is error-like (empty, "none", an error text), which spends the step. Every tool call of
  a reply runs, in order, logged with that step's number (A-L2, P3).
- After the last step, one forced answer (A4, no tools; A-L4), booked as ``forced_answers``.
- Losses are counted on the prediction row (run health): steps spent without a tool or an answer
  (``spent_steps``), tool calls left unreadable in a reply's text (``unparsed_tool_calls``) or refused as
  invalid (``rejected_tool_calls``), replies cut at their token limit (``truncated_replies``) and frames sent
  black because they failed to decode (``black_frames``). The controller is told at its next step why a call
  was refused or could not be read (``tool_feedback``; the released code never tells it).

Tools (A-T*): ``scene_snapper`` (frames split over the ranges in proportion, 3×2 mosaics with each frame's
index drawn on, a one-sentence caption by the caption model), ``clip_analyzer`` (up to 50 frames and a
sub-question → answer and confidence, with the spec's parsing fallbacks), ``audio_transcriber`` (the frame
ranges' audio, 16 kHz mono PCM cut from the same video file, sent once to the ASR model ``tool_models.audio``
over the OpenAI-compatible transcription API; its segments come back as global frame ranges). The transcriber
is available only when the video has audio, the file the job reads still carries it, and an ASR model is
named; otherwise the controller is told not to call it (A3) and a call answers why. Frames come from
senri's exact decoder on the video the workflow gives the job (the anonymized one when anonymization is on);
every trace entry records its frame ranges in source seconds too (:class:`FrameClock`).

Tool calling (one mapping, ``tool_interface``): a backend that declares OpenAI-compatible function calling
(``Capabilities.tools``) gets the A7 schemas as ``tools`` and replies with ``tool_calls``; any other backend
is given the same schemas in the prompt (``actions_json.txt``) and replies ``{"tool": name, "arguments":
{...}}``; both become the same ``{"name", "arguments"}`` calls. A tool call written into a reply's text
(a ``<tool_call>`` block a server without a tool-call parser passes on, ``"name"`` for ``"tool"``, a Python
dict) is read as the call it is (``text_tool_calls: recover``), never as the answer; one that cannot be read
whole (invalid, or cut off) spends the step. Before the first question, an ``openai`` backend with function
calling is probed once (:meth:`VideoARM._probe_tools`): a server that refuses ``tool_choice: auto`` (vLLM
without ``--enable-auto-tool-choice --tool-call-parser``) or whose chat template leaves the tools out of the
prompt switches the run to the JSON action form, recorded in every trace (``interface_probe``), or, where
``tool_interface: function_calling`` was asked for, stops the job with a message naming the flags.

Questions of one batch advance together (:meth:`VideoARM.answer_many`): each episode is a generator of
model calls, and every round sends the pending calls of all questions to each model in one batch.

Models (A-M5, S1): the run's model is the controller; the caption and clip-analyzer models are named in
``tool_models`` (null: the run's model stands in, recorded in the trace's ``substitutions``); the ASR model is
``tool_models.audio`` (null: no transcriber; the run's model never stands in for it). The three chat roles must
take images: VideoARM reads pixels, so a text-only model is refused at start.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generator, Mapping, Sequence, TypeVar

from senri.answers import parse_answer, question_block, split_reasoning
from senri.backends.base import (DEFAULT_MAX_TOKENS, Backend, Capabilities, ChatRequest, ChatResponse, ImagePart,
                                 Message, estimate_text_tokens)
from senri.backends.budget import overflow, within_cap
from senri.backends.transcription import SAMPLE_RATE, Transcriber, wav_bytes
from senri.decode import encode_jpeg
from senri.methods.base import CallTally, Method, MethodAnswer, RoleModels, RunContext, caption_memory
from senri.methods.structured import call_record
from senri.methods.videoarm_tools import (ARGUMENT_PARSERS, CLIP_PARSERS, SNAPPER_COUNTS, FrameClock, TextCalls,
                                          audio_segments_to_frames, clip_frame_range, first_caption_line,
                                          is_error_like, mosaics, parse_clip_reply, read_arguments,
                                          read_indexed_frames, sample_indices, snapshot_counts, snapshot_summary,
                                          split_frames, text_tool_calls)
from senri.records import Question, letters_in_words

log = logging.getLogger(__name__)

TOOL_INTERFACES = ("auto", "function_calling", "json")
#: How a tool call written into a reply's text is read: ``recover`` (as the call, or a spent step when it
#: cannot be read whole) or ``answer`` (the released code's reading of a reply without ``tool_calls``).
TEXT_TOOL_CALLS = ("recover", "answer")
#: Which frames the controller is shown after a snapshot: ``release`` (re-sampled with the raw num_frames,
#: capped at total_frames_limit, as the released code does) or ``caption`` (the caption call's mosaics).
CONTROLLER_FRAMES = ("release", "caption")
#: When the no-audio note (A3) joins the controller's system prompt: ``after_failed_call`` (the released
#: code: once an audio_transcriber call found no audio) or ``always`` (from step 1 whenever no transcriber).
NO_AUDIO_NOTES = ("after_failed_call", "always")
VIEWPOINTS = ("general", "egocentric")
#: The controller's user turn lists the tools with a line each (``described``, the released code) or by name.
TOOL_LISTS = ("described", "names")
#: The vLLM server flags function calling with ``tool_choice: auto`` needs, named in the probe's messages.
VLLM_TOOL_FLAGS = ("--enable-auto-tool-choice --tool-call-parser <parser> (hermes for Qwen2.5/Qwen3), and a chat "
                   "template that renders the tools (--chat-template, e.g. vLLM's examples/tool_chat_template_*.jinja)")
#: The probe's share of the tool schemas' estimated tokens that must show in its prompt count for the chat
#: template to count as rendering them (a template without a tools section adds none).
PROBE_TOOL_SHARE = 0.25
FORCED_FALLBACK = "Maximum iterations reached without a conclusive answer."
TOOL_ROLES = ("caption", "clip")
#: A-T4: the transcription API's upload limit (the released code rejects audio over 25 MB before sending).
AUDIO_MAX_BYTES = 25 * 1000 * 1000
T = TypeVar("T")
#: A part of an episode that makes model calls: it yields ``(backend, request)``, is sent the response, and
#: returns its result (``yield from`` chains them; :meth:`VideoARM.answer_many` drives them in batches).
Steps = Generator[tuple[Backend, ChatRequest], ChatResponse, T]


def empty_hm3() -> dict[str, list]:
    """A-M1: the per-question memory, empty at the start of every question."""
    return {"scene_snapshots": [], "audio_transcripts": [], "clip_analyses": []}


@dataclass
class Episode:
    """One question's state: HM³, the latest snapshot's mosaics, the log and the costs."""

    question: Question
    tally: CallTally
    hm3: dict[str, list] = field(default_factory=empty_hm3)
    images: list[ImagePart] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    tool_log: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    frames_decoded: int = 0
    images_sent: int = 0
    #: What the controller is told at its next step (why a call was refused or could not be read); shown once.
    notes: list[str] = field(default_factory=list)
    black_frames: int = 0
    #: A3 shown from now on: an audio_transcriber call found no audio (``no_audio_note: after_failed_call``).
    audio_failed: bool = False
    #: Every model call of the question in order (controller steps, captions, clip analyses), with its prompt and
    #: reply: the trace's ``calls``, which the question browser shows.
    calls: list[dict[str, Any]] = field(default_factory=list)

    def book(self, role: str, request: ChatRequest, response: ChatResponse) -> None:
        self.tally.add(request, response)
        self.calls.append({**call_record(request, response), "role": role})
        entry = self.tokens.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "images": 0})
        entry["calls"] += 1
        entry["prompt_tokens"] += response.prompt_tokens
        entry["completion_tokens"] += response.completion_tokens
        entry["images"] += request.n_images()
        self.images_sent += request.n_images()


class VideoARM(Method):
    approach = "evidence_seeking"
    uses_model = True
    uses_pixels = True
    #: Whether the tools read frames (VideoARM) or the caption memory (the text-only variant), and the prompt
    #: files of the controller's system prompt and of the tool schemas.
    reads_frames: ClassVar[bool] = True
    system_role: ClassVar[str] = "system"
    tools_role: ClassVar[str] = "tools"
    tool_list_role: ClassVar[str] = "tool_list"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        config = context.method_config
        if context.pixels is None:
            raise ValueError(f"method {context.method_name!r} decodes the video itself; no video was given")
        if context.backend is None:
            raise ValueError(f"method {context.method_name!r} needs a model, but none is configured")
        self.max_iterations = int(config.get("max_iterations", 10))
        self.total_frames_limit = int(config.get("total_frames_limit", 240))
        self.clip_max_frames = int(config.get("clip_max_frames", 50))
        self.audio_max_frames = int(config.get("audio_max_frames", 15000))
        self.snapshot_short_side = int(config.get("snapshot_short_side", 256))
        self.clip_short_side = int(config.get("clip_short_side", 512))
        self.error_recalls = int(config.get("error_recalls", 0))
        self.text_calls = self._choice("text_tool_calls", TEXT_TOOL_CALLS)
        self.tool_feedback = bool(config.get("tool_feedback", True))
        self.clip_parser = self._choice("clip_reply_parser", CLIP_PARSERS)
        self.arguments_parser = self._choice("tool_arguments_parser", ARGUMENT_PARSERS)
        chars = config.get("error_check_chars")
        self.error_chars = None if chars is None else int(chars)
        self.controller_frames = self._choice("controller_frames", CONTROLLER_FRAMES)
        self.no_audio_note = self._choice("no_audio_note", NO_AUDIO_NOTES)
        self.viewpoint = self._choice("viewpoint", VIEWPOINTS)
        self.strategy_hint = bool(config.get("strategy_hint", False))
        self.tool_list = self._choice("tool_list", TOOL_LISTS)
        self.forced_letter = bool(config.get("forced_answer_letter", False))
        self.templates = self.prompts()
        self.clock = FrameClock.of(context.pixels)
        if self.clock.total_frames < 2:
            raise ValueError(f"{context.pixels}: VideoARM needs a video of at least 2 frames")
        self.tool_models: dict[str, tuple[str, Backend]] = {}
        self._role_models = RoleModels(context)
        self.substitutions: list[str] = []
        self.transcriber: Transcriber | None = None
        wanted = self._choice("tool_interface", TOOL_INTERFACES)
        native = context.backend.capabilities.tools
        self.interface = "function_calling" if wanted == "function_calling" or (wanted == "auto" and native) else "json"
        self.tools = json.loads(self.templates.render(self.tools_role, audio_max_frames=self.audio_max_frames,
                                                      clip_max_frames=self.clip_max_frames))
        self.tool_names = [t["function"]["name"] for t in self.tools]
        self.probe: dict[str, Any] | None = None
        try:
            for role in TOOL_ROLES:
                self.tool_models[role] = self._tool_backend(role)
            self._check_models()
            self.audio_model, self.audio_note = self._open_transcriber()
            if self.interface == "function_calling" and bool(config.get("tool_probe", True)):
                self.probe = self._probe_tools(wanted)
        except Exception:
            self.close()  # the answer stage closes only a method it has
            raise
        self.audio_available = self.audio_note is None

    def _choice(self, key: str, allowed: Sequence[str]) -> str:
        """A method option that names one of ``allowed`` (the first is the default)."""
        value = str(self.context.method_config.get(key) or allowed[0])
        if value not in allowed:
            raise ValueError(f"config.method.{self.context.method_name}.{key}: {value!r} is not one of "
                             f"{', '.join(allowed)}")
        return value

    def _probe_tools(self, wanted: str) -> dict[str, Any]:
        """Item 2 of issue 35: before the first question, one request to an OpenAI-compatible server (backend
        ``openai``) with the tool schemas and ``tool_choice: auto``, asking for a one-word reply. The server must
        accept it (vLLM refuses ``auto`` with 400 unless started with ``--enable-auto-tool-choice
        --tool-call-parser``), and its prompt count must show the schemas (a chat template without a tools
        section, as Qwen2.5-VL's, renders none of them: the model would never see a tool after step 1). A
        refusal or a template without tools switches the run to the JSON action form with a notice, or, where
        ``tool_interface: function_calling`` was asked for, raises with the flags to set. A server that does
        not answer or reports no token counts leaves function calling on, noted. Goes through the response
        cache like every call, so a rerun decides the same. Returns the probe's record (every trace's
        ``interface_probe``)."""
        backend = self.context.backend
        if backend.kind != "openai":
            return {"probed": False, "why": f"backend {backend.kind!r} is not an OpenAI-compatible server"}
        messages = (Message.text("system", self.templates.render("probe_system")),
                    Message.text("user", self.templates.render("probe")))
        bare = ChatRequest(messages, max_tokens=16, temperature=0.0, seed=self.context.seed, purpose="controller:probe")
        request = ChatRequest(messages, max_tokens=16, temperature=0.0, seed=self.context.seed,
                              purpose="controller:probe", tools=tuple(self.tools), tool_choice="auto")
        response = backend.complete(request)
        expected = backend.count_tokens(bare)
        tools_tokens = estimate_text_tokens(json.dumps(self.tools))
        record: dict[str, Any] = {"probed": True, "prompt_tokens": response.prompt_tokens,
                                  "prompt_tokens_without_tools_at_most": expected,
                                  "tool_schema_tokens_estimate": tools_tokens, "error": response.error}
        problem = None
        if response.error and re.match(r"HTTP 4\d\d", response.error):
            problem = f"the server refused tool_choice auto ({response.error[:200]})"
        elif response.error:
            record["outcome"] = "inconclusive: the probe failed; function calling kept"
        elif response.prompt_tokens <= 0:
            record["outcome"] = "inconclusive: the server reports no prompt tokens; function calling kept"
        elif response.prompt_tokens < expected + PROBE_TOOL_SHARE * tools_tokens:
            problem = (f"the chat template leaves the tools out of the prompt ({response.prompt_tokens} prompt "
                       f"tokens with {len(self.tools)} tool schemas of about {tools_tokens} tokens; at most "
                       f"{expected} without them)")
        if problem is None:
            record.setdefault("outcome", "function calling")
            return record
        hint = (f"start the server with {VLLM_TOOL_FLAGS}, or set method.{self.context.method_name}."
                f"tool_interface=json")
        if wanted == "function_calling":
            raise ValueError(f"method {self.context.method_name!r}, model {self.context.model_name!r}: "
                             f"tool_interface function_calling, but {problem}; {hint}")
        self.interface = "json"
        record["outcome"] = f"switched to the JSON action form: {problem}; for function calling, {hint}"
        log.warning("%s/%s: %s", self.context.method_name, self.context.model_name, record["outcome"])
        return record

    def _check_models(self) -> None:
        """The plan-time rule (:meth:`capability_problems`) on the backends the job opened for every role."""
        self.refuse_missing_capabilities({role: (name, backend.capabilities)
                                          for role, (name, backend) in self.tool_models.items()})

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str,
                            capabilities: Capabilities | None,
                            roles: Mapping[str, tuple[str, Capabilities | None]] | None = None) -> list[str]:
        """``tool_interface: function_calling`` needs a controller with function calling; VideoARM reads pixels,
        so every frame-reading role's model must take images (the text-only variant's need not; the audio
        transcriber reads sound). A tool role without a model of its own (``tool_models.<role>: null``) is the
        run's model, named once."""
        problems: list[str] = []
        if str(spec.get("tool_interface") or TOOL_INTERFACES[0]) == "function_calling" and not (
                capabilities is not None and capabilities.tools):
            problems.append(f"method {method!r}: tool_interface function_calling, but model {model!r} has no "
                            f"function-calling interface; use auto or json")
        if not cls.reads_frames:
            return problems
        named: set[str] = set()
        frame_roles = [(role, entry) for role, entry in (roles or {}).items() if role in TOOL_ROLES]
        for role, (name, role_capabilities) in [("controller", (model, capabilities)), *frame_roles]:
            if name in named or (role_capabilities is not None and role_capabilities.images):
                continue
            named.add(name)
            problems.append(f"method {method!r}: the {role} model {name!r} takes no images; VideoARM's tools read "
                            f"frames and its controller sees snapshot mosaics, so it needs a vision-language model "
                            f"for every role (method videoarm_text_only is a labelled text-only variant over the "
                            f"caption memory, never reported as VideoARM)")
        return problems

    def _tool_backend(self, role: str) -> tuple[str, Backend]:
        """A tool role's model: its own config (``tool_models``), or the run's model standing in for it (caption
        and clip naming one model share one backend, :class:`senri.methods.base.RoleModels`)."""
        spec = (self.context.method_config.get("tool_model_configs") or {}).get(role)
        if spec is None:
            self.substitutions.append(f"{role}: the run's model {self.context.model_name!r} (tool_models.{role} "
                                      f"is null)")
        return self._role_models.get(spec, f"config.method.{self.context.method_name}.tool_models.{role}")

    def _open_transcriber(self) -> tuple[str | None, str | None]:
        """A-T4/A-M5: the ASR model of ``tool_models.audio`` when the video has audio that the job's file still
        carries; returns (the model's name, why the transcriber is unavailable or None)."""
        from senri.media import ffprobe_json

        self.has_audio = bool(self.context.video.has_audio)
        spec = (self.context.method_config.get("tool_model_configs") or {}).get("audio")
        name = str(spec["name"]) if spec else None
        if not self.has_audio:
            return name, "the video has no audio track"
        if spec is None:
            return name, "no speech recognition model is configured (tool_models.audio is null)"
        streams = ffprobe_json(self.context.pixels, ["-show_streams", "-select_streams", "a"]).get("streams") or []
        if not streams:  # e.g. anonymization without keep_audio writes a silent copy
            return name, f"the video file read ({self.context.pixels}) has no audio track"
        try:
            self.transcriber = Transcriber(spec["config"])
        except Exception as exc:
            raise ValueError(f"config.method.{self.context.method_name}.tool_models.audio: model {name!r}: "
                             f"{exc}") from exc
        return name, None

    def close(self) -> None:
        self._role_models.close()
        if self.transcriber is not None:
            self.transcriber.close()

    # ------------------------------------------------------------------------------------ controller
    def _controller_messages(self, episode: Episode, step: int) -> list[Message]:
        """A-L1/A2/A-L6: what the controller sees at a step, rebuilt from HM³ and the latest mosaics (and what
        it is told about its previous step, ``tool_feedback``)."""
        video = self.templates.render("viewpoint_egocentric" if self.viewpoint == "egocentric" else
                                      "viewpoint_general")
        strategy = self.templates.render("strategy") if self.strategy_hint else ""
        system = re.sub(r"\n{3,}", "\n\n", self.templates.render(self.system_role, video=video, strategy=strategy))
        if self._no_audio_note_due(episode):
            system += "\n\n" + self.templates.render("no_audio")
        if self.interface == "json":
            system += "\n\n" + self.templates.render("actions_json", tool_specs=json.dumps(self.tools, indent=1))
        question = episode.question
        tools = (self.templates.render(self.tool_list_role) if self.tool_list == "described"
                 else "Tools: " + ", ".join(self.tool_names) + ".")
        feedback = (self.templates.render("feedback", notes="\n".join(f"- {n}" for n in episode.notes))
                    if episode.notes and self.tool_feedback else "")
        user = self.templates.render(
            "user", total_frames=self.clock.total_frames, last_frame=self.clock.total_frames - 1,
            duration=f"{self.clock.duration_s:.1f}", fps=f"{self.clock.fps:.2f}", tools=tools,
            hm3=json.dumps(episode.hm3, ensure_ascii=False, indent=1), feedback=feedback,
            question=question_block(question.question, question.options),
            instruction=self.templates.render("instruction", letters=letters_in_words(question.letters)))
        user = re.sub(r"\n{3,}", "\n\n", user)
        if self.interface == "json" and step == 1:
            user += "\n\n" + self.templates.render("actions_json_required")
        # The latest mosaics ride in the user turn, after its text: one user message keeps every chat template
        # happy (some insist on alternating roles), and the scripted backend matches on its text.
        return [Message.text("system", system), Message("user", (user, *episode.images))]

    def _no_audio_note_due(self, episode: Episode) -> bool:
        """A3: the no-audio note, once an audio_transcriber call of this question found no audio or no
        transcriber (the released code), or from step 1 whenever the transcriber is unavailable
        (``no_audio_note: always``)."""
        if self.no_audio_note == "always":
            return not self.audio_available
        return episode.audio_failed

    def _controller_request(self, messages: list[Message], tool_choice: str, purpose: str,
                            seed_offset: int = 0) -> ChatRequest:
        sampling = self.sampling()
        native = self.interface == "function_calling" and tool_choice != "none"
        return ChatRequest(tuple(messages), max_tokens=self.role_max_tokens("controller"),
                           temperature=sampling["temperature"], top_p=sampling["top_p"],
                           seed=sampling["seed"] + seed_offset, purpose=purpose,
                           tools=tuple(self.tools) if native else (), tool_choice=tool_choice if native else None)

    def _fit(self, backend: Backend, build, episode: Episode, trims: list[str]) -> ChatRequest:
        """The controller's trimming rule: while the request exceeds the model's limits, drop the oldest
        attached mosaic; then the oldest HM³ entry (scene snapshots first, then clip analyses). Each trim
        is recorded on the step and counted (``context_trims``). ``build`` makes the request from the
        episode's current images and memory, which this trims on a copy."""
        images, hm3 = list(episode.images), {k: list(v) for k, v in episode.hm3.items()}
        view = Episode(episode.question, episode.tally, hm3, images, notes=list(episode.notes),
                       audio_failed=episode.audio_failed)
        request = build(view)
        while (why := overflow(backend, request)) is not None:
            if view.images:
                view.images.pop(0)
                trims.append(f"dropped the oldest mosaic ({why})")
            elif any(view.hm3.values()):
                kind = next(k for k in ("scene_snapshots", "clip_analyses", "audio_transcripts") if view.hm3[k])
                view.hm3[kind].pop(0)
                trims.append(f"dropped the oldest {kind} entry ({why})")
            else:
                trims.append(f"nothing left to trim; sent as is ({why})")
                break
            episode.tally.count("context_trims")
            request = build(view)
        return request

    def _calls_of(self, response: ChatResponse) -> tuple[TextCalls, bool]:
        """The tool calls of a controller reply, and whether they were read from its text: the server's
        ``tool_calls`` under function calling, else (and in the JSON action form) the calls written into the
        text (:func:`text_tool_calls`; with ``text_tool_calls: answer`` a function-calling reply's text is
        never read for calls, as the released code reads it)."""
        if self.interface == "function_calling" and response.tool_calls:
            return TextCalls(list(response.tool_calls)), False
        if self.interface == "function_calling" and self.text_calls == "answer":
            return TextCalls([]), False
        found = text_tool_calls(split_reasoning(response.text)[0], self.tool_names, truncated=response.truncated)
        return found, self.interface == "function_calling" and bool(found.calls)

    def answer(self, question: Question) -> MethodAnswer:
        return self.answer_many([question])[0]

    def answer_many(self, questions: Sequence[Question]) -> list[MethodAnswer]:
        """The questions' episodes advance together: each round, every episode's next call goes to its model
        in one batch per model (the controller's steps of all questions, then their tool calls), so a GPU or
        remote backend overlaps them; each episode alone is exactly :meth:`_episode`."""
        episodes = {i: self._episode(q) for i, q in enumerate(questions)}
        results: dict[int, MethodAnswer] = {}
        pending: dict[int, tuple[Backend, ChatRequest]] = {}

        def advance(i: int, response: ChatResponse | None) -> None:
            try:
                pending[i] = episodes[i].send(response)
            except StopIteration as done:
                results[i] = done.value

        for i in episodes:
            advance(i, None)
        while pending:
            waiting = list(pending.items())
            pending.clear()
            for backend in {id(b): b for b, _ in (call for _, call in waiting)}.values():
                mine = [(i, request) for i, (b, request) in waiting if b is backend]
                for (i, _), response in zip(mine, backend.complete_many([r for _, r in mine])):
                    advance(i, response)
        return [results[i] for i in range(len(questions))]

    def _episode(self, question: Question) -> Steps[MethodAnswer]:
        """One question's control loop (A-L1…A-L4), as a generator that yields each model call ``(backend,
        request)`` and is sent its response."""
        episode = Episode(question, CallTally())
        answer_text: str | None = None
        forced = False
        backend = self.context.backend
        for step in range(1, self.max_iterations + 1):
            tool_choice = "required" if step == 1 else "auto"
            trims: list[str] = []
            record: dict[str, Any] = {"iteration": step, "tool_choice": tool_choice}
            response, found, from_text = None, TextCalls([]), False
            for attempt in range(self.error_recalls + 1):
                request = self._fit(backend, lambda view, s=step, a=attempt: self._controller_request(
                    self._controller_messages(view, s), tool_choice, f"controller:{s}", a), episode, trims)
                response = yield backend, request
                episode.book("controller", request, response)
                self._count_truncated(episode, response, record)
                found, from_text = self._calls_of(response)
                if response.error or found.calls or found.unreadable \
                        or not is_error_like(split_reasoning(response.text)[0], self.error_chars):
                    break
            record.update(images=request.n_images(), reply=response.text, trims=trims,
                          prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens)
            if episode.notes:
                record["told"] = list(episode.notes)
            episode.notes = []
            episode.steps.append(record)
            if response.error:
                record["error"] = response.error
                if "content" in response.error.lower() and "filter" in response.error.lower():
                    break  # A-L5: a content filter ends the search with a forced answer at once
                return self._finish(episode, None, forced=False)
            calls = found.calls
            if calls:
                record["tool_calls"] = [c["name"] for c in calls]
                if from_text:
                    record["tool_calls_from_text"] = True
                if found.unreadable:
                    record["unreadable_text"] = found.unreadable
                for call in calls:
                    yield from self._run_tool(episode, step, call)
                continue
            reply = split_reasoning(response.text)[0]
            if found.unreadable:
                record["outcome"] = f"unreadable tool call ({found.unreadable}): step spent"
                episode.tally.count("unparsed_tool_calls")
                episode.tally.count("spent_steps")
                episode.notes.append(f"Your last reply held a tool call that could not be read ({found.unreadable}); "
                                     f"nothing was run. Call the tool again with complete, valid JSON arguments.")
                continue
            if step == 1:
                record["outcome"] = "no tool call at step 1 (a tool call is required): step spent"
                episode.tally.count("spent_steps")
                continue
            if is_error_like(reply, self.error_chars):
                record["outcome"] = "error-like reply: step spent"
                episode.tally.count("spent_steps")
                continue
            answer_text = reply
            record["outcome"] = "answer"
            break
        if answer_text is None:
            forced = True
            answer_text = yield from self._forced_answer(episode)
        return self._finish(episode, answer_text, forced)

    @staticmethod
    def _count_truncated(episode: Episode, response: ChatResponse, record: dict[str, Any],
                         key: str = "truncated") -> None:
        """A reply cut at its token limit (``finish_reason: length``): marked on its record (how many under
        ``key``), counted ``truncated_replies``."""
        if response.truncated:
            record[key] = record.get(key, 0) + 1
            episode.tally.count("truncated_replies")

    def _forced_answer(self, episode: Episode) -> Steps[str]:
        """A-L4: the last step's view plus the forced-answer instruction (A4), no tools. ``forced_answers`` counts
        it only when it gives an answer (:meth:`_finish`), as every other method counts its forced answers."""
        trims: list[str] = []

        def build(view: Episode) -> ChatRequest:
            messages = self._controller_messages(view, self.max_iterations + 1)
            forced_text = self.templates.render("forced")
            if self.forced_letter:
                forced_text += " " + self.templates.render("forced_letter",
                                                           letters=letters_in_words(view.question.letters))
            messages.append(Message.text("system", forced_text))
            return self._controller_request(messages, "none", "controller:forced")

        request = self._fit(self.context.backend, build, episode, trims)
        response = yield self.context.backend, request
        episode.book("controller", request, response)
        record = {"iteration": "forced", "images": request.n_images(), "reply": response.text,
                  "trims": trims, "prompt_tokens": response.prompt_tokens,
                  "completion_tokens": response.completion_tokens,
                  **({"error": response.error} if response.error else {}),
                  **({"told": list(episode.notes)} if episode.notes else {})}
        self._count_truncated(episode, response, record)
        episode.steps.append(record)
        text = split_reasoning(response.text)[0].strip()
        if self.text_calls == "recover":
            found = text_tool_calls(text, self.tool_names, truncated=response.truncated)
            if found.calls or found.unreadable:  # no tool can run now, and a call is no answer (problem 1)
                record["outcome"] = "a tool call instead of an answer: no answer"
                episode.tally.count("unparsed_tool_calls")
                return FORCED_FALLBACK
        return text or FORCED_FALLBACK

    def _finish(self, episode: Episode, answer_text: str | None, forced: bool) -> MethodAnswer:
        parsed = parse_answer(answer_text, episode.question.options) if answer_text is not None else None
        by_tool: dict[str, int] = {}
        for entry in episode.tool_log:
            by_tool[entry["tool_name"]] = by_tool.get(entry["tool_name"], 0) + 1
        if forced and parsed is not None and parsed.ok:
            episode.tally.count("forced_answers")
        episode.tally.did("tool_calls", len(episode.tool_log))
        episode.tally.did("frames_seen", episode.frames_decoded)
        trace = {
            "interface": self.interface,
            "models": {"controller": self.context.model_name,
                       **{role: name for role, (name, _) in self.tool_models.items()}, "audio": self.audio_model},
            "substitutions": self.substitutions,
            "video_info": {"total_frames": self.clock.total_frames, "duration_s": round(self.clock.duration_s, 3),
                           "fps": round(self.clock.fps, 4), "has_audio": self.has_audio,
                           "audio_transcriber": self.audio_available,
                           **({"audio_transcriber_unavailable": self.audio_note} if self.audio_note else {})},
            "steps": episode.steps,
            "tool_calls_log": episode.tool_log,
            "calls": episode.calls,
            "tool_statistics": {"total_calls": len(episode.tool_log), "by_tool": by_tool,
                                "iterations_used": sum(isinstance(s["iteration"], int) for s in episode.steps)},
            "hm3": episode.hm3,
            "forced": forced,
            "answer_text": answer_text,
            "parse_rule": parsed.rule if parsed else None,
            "tokens": episode.tokens,
            "frames_decoded": episode.frames_decoded,
            "black_frames": episode.black_frames,
            "images_sent": episode.images_sent,
            "interface_probe": self.probe,
        }
        return MethodAnswer(parsed.letter if parsed else None, answer_text, bool(parsed and parsed.ok),
                            episode.tally, trace)

    # ----------------------------------------------------------------------------------------- tools
    def _run_tool(self, episode: Episode, step: int, call: Mapping[str, str]) -> Steps[None]:
        """Run one tool call and log it (A-F1's tool_calls_log, plus frames decoded, images sent and source
        seconds); a bad call returns ``{"error": …}`` and changes nothing (A-T6)."""
        started = time.perf_counter()
        entry: dict[str, Any] = {"iteration": step, "tool_name": call["name"], "arguments": call["arguments"]}
        images_before, frames_before, black_before = episode.images_sent, episode.frames_decoded, episode.black_frames
        try:
            arguments = read_arguments(call["arguments"], self.arguments_parser)
            entry["arguments"] = arguments
            tool = {"scene_snapper": self._scene_snapper, "clip_analyzer": self._clip_analyzer,
                    "audio_transcriber": self._audio_transcriber}.get(call["name"])
            if tool is None:
                raise ValueError(f"unknown tool {call['name']!r}")
            result = yield from tool(episode, step, arguments, entry)
        except (ValueError, TypeError, KeyError) as exc:
            result = {"error": str(exc)}
            entry["rejected"] = True
            episode.tally.count("rejected_tool_calls")
            episode.notes.append(f"Your {call['name']} call was rejected and changed nothing: {exc}")
        else:
            if "error" in result:
                episode.notes.append(f"Your {call['name']} call failed: {result['error']}")
        entry.update(result=result, execution_time=round(time.perf_counter() - started, 3),
                     frames_decoded=episode.frames_decoded - frames_before,
                     images_sent=episode.images_sent - images_before)
        if episode.black_frames > black_before:
            entry["black_frames"] = episode.black_frames - black_before
        episode.tool_log.append(entry)

    @staticmethod
    def _frames_of(value: Any) -> tuple[int, int]:
        """A ``{start_frame, end_frame}`` object's two frame indices as the model wrote them."""
        if not isinstance(value, Mapping) or "start_frame" not in value or "end_frame" not in value:
            raise ValueError(f"a frame range needs start_frame and end_frame, got {value!r}")
        return int(value["start_frame"]), int(value["end_frame"])

    def _range(self, value: Any) -> tuple[int, int]:
        """A frame range clamped to the video as the released code clamps it (``max(0, s)``, ``min(total − 1,
        e)``); one empty after clamping (the end before the start) is an error."""
        s, e = self._frames_of(value)
        start, end = max(0, s), min(self.clock.total_frames - 1, e)
        if end < start:
            raise ValueError(f"frame range {s}–{e}: no frame of the video (0–{self.clock.total_frames - 1}) in it")
        return start, end

    def _scene_snapper(self, episode: Episode, step: int, arguments: Mapping[str, Any],
                       entry: dict[str, Any]) -> Steps[dict[str, Any]]:
        """A-T2/A-T3/A-M2: sample frames over the ranges, make the mosaics, caption them, attach them.

        As the released code: the caption model gets ``num_frames`` of 30/60/90/150 (else 30) split over the
        ranges as written (:func:`split_frames`); the controller is shown the ranges re-sampled with the raw
        ``num_frames`` capped at ``total_frames_limit`` (the same frames unless num_frames was not one of the
        four; ``controller_frames: caption`` shows the caption call's mosaics instead); the result's
        ``total_duration`` is the ranges' ``(end − start) / fps`` as written."""
        raw = arguments.get("frame_ranges")
        if not isinstance(raw, list) or not raw:
            raise ValueError("scene_snapper needs frame_ranges: a non-empty list of {start_frame, end_frame}")
        if "reason" not in arguments:
            raise ValueError("scene_snapper needs a reason")
        written = [self._frames_of(r) for r in raw]
        ranges = [self._range(r) for r in raw]
        caption_count, controller_count = snapshot_counts(arguments.get("num_frames", SNAPPER_COUNTS[0]),
                                                          self.total_frames_limit)
        caption_count = min(caption_count, self.total_frames_limit)
        total = self.clock.total_frames
        indices = [i for part in split_frames(written, caption_count, total) for i in part]
        entry["intervals_s"] = [self.clock.interval_s(s, e) for s, e in ranges]
        entry["frame_indices"] = indices
        caption, caption_error, images = yield from self._look(episode, step, ranges, indices)
        if self.controller_frames == "release" and controller_count != caption_count:
            shown = [i for part in split_frames(written, controller_count, total) for i in part]
            entry["controller_frame_indices"] = shown
            images = self._attach(episode, shown)
        reason = str(arguments.get("reason", ""))
        for start, end in ranges:
            episode.hm3["scene_snapshots"].append({"iteration": step, "frame_interval": [start, end],
                                                   "reason": reason, "caption": caption})
        episode.images = images  # A-T3: the latest snapshot replaces the earlier mosaics
        summary = snapshot_summary(written, len(indices), self.clock.fps)
        return {**summary, "frame_ranges": [list(r) for r in ranges], "caption": caption, "reason": reason,
                "images_attached": len(images), **({"caption_error": caption_error} if caption_error else {})}

    def _read(self, episode: Episode, indices: list[int], short_side: int) -> list[Any]:
        """The frames at ``indices`` with their index drawn on; the ones that failed to decode are black,
        counted ``black_frames``."""
        frames, decoded = read_indexed_frames(self.context.pixels, self.clock, indices, short_side)
        episode.frames_decoded += decoded
        if len(frames) > decoded:
            episode.black_frames += len(frames) - decoded
            episode.tally.count("black_frames", len(frames) - decoded)
        return frames

    def _attach(self, episode: Episode, indices: list[int]) -> list[ImagePart]:
        """The controller's mosaics of the frames at ``indices`` (A-T3)."""
        return [ImagePart(encode_jpeg(m)) for m in mosaics(self._read(episode, indices, self.snapshot_short_side))]

    def _look(self, episode: Episode, step: int, ranges: list[tuple[int, int]],
              indices: list[int]) -> Steps[tuple[str, str | None, list[ImagePart]]]:
        """The snapshot itself: the frames as 3×2 mosaics, captioned by the caption model (A-T2); returns the
        caption, the caption error (or None) and the mosaics to attach."""
        grids = self._attach(episode, indices)
        caption, caption_error = yield from self._caption(episode, step, ranges[0], grids)
        return caption, caption_error, grids

    def _tool_request(self, role: str, system: str, user: str, images: list[ImagePart], episode: Episode,
                      purpose: str) -> tuple[ChatRequest, Backend, list[str]]:
        """A tool model's request, sized to its limits: too many images are thinned evenly (recorded)."""
        name, backend = self.tool_models[role]
        model = backend.config
        limits = self.context.method_config.get("max_tokens") or {}
        limit = within_cap(int(limits.get(role, model.get("max_tokens", DEFAULT_MAX_TOKENS))), model)
        trims: list[str] = []

        def build(parts: list[ImagePart]) -> ChatRequest:
            return ChatRequest((Message.text("system", system), Message("user", (*parts, user))), max_tokens=limit,
                               temperature=float(model.get("temperature", 0.0)), top_p=float(model.get("top_p", 1.0)),
                               seed=self.context.seed, purpose=purpose)

        request = build(images)
        while (why := overflow(backend, request)) is not None and len(images) > 1:
            keep = max(1, len(images) * 3 // 4)
            images = [images[round(k * (len(images) - 1) / max(1, keep - 1))] for k in range(keep)] if keep > 1 \
                else images[:1]
            trims.append(f"{role}: thinned to {len(images)} images ({why})")
            episode.tally.count("context_trims")
            request = build(images)
        return request, backend, trims

    def _caption(self, episode: Episode, step: int, first: tuple[int, int],
                 grids: list[ImagePart]) -> Steps[tuple[str, str | None]]:
        """A5: one sentence over all mosaics of the call (the prompt names the first range only, as A5 says)."""
        request, backend, trims = self._tool_request(
            "caption", self.templates.render("caption_system"),
            self.templates.render("caption_user", start_frame=first[0], end_frame=first[1]), grids, episode,
            f"caption:{step}")
        response = yield backend, request
        episode.book("caption", request, response)
        if trims:
            episode.steps[-1].setdefault("trims", []).extend(trims)
        self._count_truncated(episode, response, episode.steps[-1], "truncated_captions")
        if response.error:
            return "", response.error
        return first_caption_line(split_reasoning(response.text)[0]), None

    def _clip_analyzer(self, episode: Episode, step: int, arguments: Mapping[str, Any],
                       entry: dict[str, Any]) -> Steps[dict[str, Any]]:
        """A-T5/A-M4: up to 50 single frames of one range and a sub-question → answer and confidence."""
        for key in ("frame_range", "question", "reason"):
            if key not in arguments:
                raise ValueError(f"clip_analyzer needs {key}")
        start, end = clip_frame_range(arguments["frame_range"], self.clock.total_frames)
        indices = sample_indices(start, end, self.clip_max_frames)
        entry["intervals_s"] = [self.clock.interval_s(start, end)]
        entry["frame_indices"] = indices
        sub_question = str(arguments["question"])
        request, backend, trims = self._clip_request(episode, step, start, end, indices, sub_question)
        response = yield backend, request
        episode.book("clip", request, response)
        if trims:
            episode.steps[-1].setdefault("trims", []).extend(trims)
        self._count_truncated(episode, response, entry)
        if response.error:
            return {"error": f"clip analysis failed: {response.error}"}
        try:
            answer, confidence, rule = parse_clip_reply(split_reasoning(response.text)[0], self.clip_parser)
        except ValueError as exc:  # the lenient parser: no answer in the reply
            return {"error": f"clip analysis failed: {exc}"}
        reason = str(arguments["reason"])
        episode.hm3["clip_analyses"].append({"iteration": step, "frame_interval": [start, end],
                                             "question": sub_question, "answer": answer,
                                             "confidence": confidence, "reason": reason})
        return {"status": "success", "frame_range": [start, end], "sampled_frames": len(indices), "answer": answer,
                "confidence": confidence, "confidence_rule": rule, "question": sub_question, "reason": reason}

    def _clip_request(self, episode: Episode, step: int, start: int, end: int, indices: list[int],
                      sub_question: str) -> tuple[ChatRequest, Backend, list[str]]:
        """The clip analyzer's request: the range's frames as single images with the sub-question (A6)."""
        frames = self._read(episode, indices, self.clip_short_side)
        return self._tool_request(
            "clip", self.templates.render("clip_system", n_frames=len(frames), start_frame=start, end_frame=end),
            self.templates.render("clip_user", question=sub_question), [ImagePart(encode_jpeg(f)) for f in frames],
            episode, f"clip:{step}")

    def _audio_transcriber(self, episode: Episode, step: int, arguments: Mapping[str, Any],
                           entry: dict[str, Any]) -> Steps[dict[str, Any]]:
        """A-T4/A-M3: the ranges' audio (≤ ``audio_max_frames`` frames), cut from the video as 16 kHz mono PCM,
        concatenated and transcribed in one call; the segments come back as global frame ranges and go to HM³
        (nothing is added on no audio, an empty transcript or an error)."""
        yield from ()  # a tool like the others (a generator of model calls), but its one call is not a chat call
        if not self.has_audio or self.transcriber is None:
            episode.audio_failed = True  # A3 joins the system prompt from the next step on (the released code)
            if not self.has_audio:
                return {"status": "no_audio", "message": "the video has no audio track"}
            return {"status": "unavailable", "message": self.audio_note}
        raw = arguments.get("frame_ranges")
        if not isinstance(raw, list) or not raw:
            raise ValueError("audio_transcriber needs frame_ranges: a non-empty list of {start_frame, end_frame}")
        ranges = [self._range(r) for r in raw]
        frames = sum(e - s + 1 for s, e in ranges)
        if frames > self.audio_max_frames:
            raise ValueError(f"audio_transcriber: {frames} frames asked for, more than audio_max_frames="
                             f"{self.audio_max_frames}; ask for shorter ranges")
        spans = [(self.clock.seconds(s), self.clock.end_s(e)) for s, e in ranges]
        entry["intervals_s"] = [self.clock.interval_s(s, e) for s, e in ranges]
        samples = [round((b - a) * SAMPLE_RATE) for a, b in spans]
        if 2 * sum(samples) > AUDIO_MAX_BYTES:
            raise ValueError(f"audio_transcriber: {sum(samples) / SAMPLE_RATE:.0f} s of audio is over the "
                             f"{AUDIO_MAX_BYTES // 10**6} MB upload limit; ask for shorter ranges")
        from senri.media import MediaError

        try:
            pcm = b"".join(self._pcm(a, n) for (a, _), n in zip(spans, samples))
        except MediaError as exc:
            return {"error": f"audio extraction failed: {exc}"}
        entry["audio_s"] = round(len(pcm) / 2 / SAMPLE_RATE, 3)
        transcript = self.transcriber.transcribe(wav_bytes(pcm))
        entry["asr_model"], entry["asr_latency_s"] = self.audio_model, round(transcript.latency_s, 3)
        if transcript.error:
            return {"error": f"audio transcription failed: {transcript.error}"}
        segments = audio_segments_to_frames(transcript.segments, ranges, self.clock)
        reason = str(arguments.get("reason", ""))
        if not transcript.text and not any(seg["text"] for seg in segments):
            return {"status": "empty", "message": "no speech was recognised in these ranges", "reason": reason}
        episode.hm3["audio_transcripts"].append({
            "iteration": step, "segments": [{"frame_interval": [g["start_frame"], g["end_frame"]], "text": g["text"]}
                                            for g in segments],
            "reason": reason, "text": transcript.text})
        return {"status": "success", "segments": segments, "transcript_text": transcript.text, "reason": reason}

    def _pcm(self, start_s: float, samples: int) -> bytes:
        """``samples`` of 16 kHz mono 16-bit PCM from ``start_s`` (source seconds) of the job's video, padded
        with silence where the audio track ends early, so the cumulative durations match the frame ranges."""
        from senri.media import audio_pcm

        return audio_pcm(self.context.pixels, start_s, samples, SAMPLE_RATE, what="audio_transcriber")

    def summary(self) -> str:
        return (f"videoarm: {self.interface} tool interface; controller {self.context.model_name}, "
                + ", ".join(f"{role} {name}" for role, (name, _) in self.tool_models.items()))


class VideoARMTextOnly(VideoARM):
    """``videoarm_text_only``: VideoARM's control loop for a text-only model, labelled as such (never reported
    as VideoARM, whose tools read pixels). Its tools read the video's caption memory over the asked range in
    place of frames (the spec's CPU fallback, A-X2): ``scene_snapper`` returns the captions of the memory
    periods the ranges overlap (no model call, nothing attached), ``clip_analyzer`` gives the clip model those
    captions and the sub-question. Frame indices and their seconds are the video's, as in VideoARM."""

    uses_memory = True
    reads_frames = False
    system_role = "text_system"
    tools_role = "text_tools"
    tool_list_role = "text_tool_list"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        rows, self.captioner = caption_memory(context)
        self.captions = [(row["start_s"], row["end_s"], row["text"]) for row in rows]

    def memory_text(self, ranges: list[tuple[int, int]]) -> str:
        """The captions of every memory period that overlaps one of the frame ranges, once each, in time order,
        as ``[start–end s] text`` lines."""
        spans = [(self.clock.seconds(s), self.clock.seconds(e)) for s, e in ranges]
        def overlaps(a: float, b: float, start: float, end: float) -> bool:  # periods are half-open [a, b)
            return a < end and b > start if end > start else a <= start < b

        lines = [f"[{a:.1f}–{b:.1f} s] {text}" for a, b, text in self.captions
                 if any(overlaps(a, b, start, end) for start, end in spans)]
        return "\n".join(lines) or "(no caption covers this range)"

    def _look(self, episode: Episode, step: int, ranges: list[tuple[int, int]],
              indices: list[int]) -> Steps[tuple[str, str | None, list[ImagePart]]]:
        yield from ()  # no model call: the captions are the memory's
        return self.memory_text(ranges), None, []

    def _attach(self, episode: Episode, indices: list[int]) -> list[ImagePart]:
        return []  # nothing decoded, nothing attached

    def _clip_request(self, episode: Episode, step: int, start: int, end: int, indices: list[int],
                      sub_question: str) -> tuple[ChatRequest, Backend, list[str]]:
        return self._tool_request(
            "clip", self.templates.render("text_clip_system", start_frame=start, end_frame=end,
                                          captions=self.memory_text([(start, end)])),
            self.templates.render("clip_user", question=sub_question), [], episode, f"clip:{step}")

    def _finish(self, episode: Episode, answer_text: str | None, forced: bool) -> MethodAnswer:
        answer = super()._finish(episode, answer_text, forced)
        answer.trace.update(variant="text_only", memory_captioner=self.captioner)
        return answer
