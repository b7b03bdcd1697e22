"""A strict OpenAI-compatible chat-completions server for tests, on loopback HTTP.

senri's scripted backend records the *cache payload* of a request, not the body a server receives, and returns
tool calls whatever ``tool_choice`` says; so it cannot tell whether a request path would be refused by a real
server. This server checks every ``POST /v1/chat/completions`` body against the chat-completions format as
OpenAI documents it (``platform.openai.com/docs/api-reference/chat/create``), and refuses what a real server
refuses, with the status codes real servers use:

* 404 for an unknown model (OpenAI's ``model_not_found``), 401 for a missing or wrong bearer key;
* 400 for a malformed body: an unknown top-level field (servers such as vLLM accept named extras — passed as
  ``extras``), a message role outside system/developer/user/assistant/tool, content parts other than ``text``
  and ``image_url`` (``video_url`` only where the model takes video, as ``vllm serve`` with a Qwen-VL model),
  ``input_audio`` only where the model hears (``audio=True``: an omni model's ``vllm serve``, OpenAI's audio
  models), its ``data`` base64 of a RIFF/WAVE file and its ``format`` wav or mp3;
  an image URL that is not an ``http(s)`` URL or a ``data:image/...;base64`` URL whose bytes are a JPEG, PNG,
  GIF or WebP, an assistant ``tool_calls`` entry without id/type/function name/JSON-string arguments, a
  ``role: tool`` message whose ``tool_call_id`` no earlier assistant call carries, ``tools`` that are not
  ``{type: function, function: {name, description?, parameters?}}``, ``tool_choice`` without ``tools`` or
  outside none/auto/required/named, sampling fields of the wrong type or range, ``top_logprobs`` without
  ``logprobs``, a ``response_format`` that is not text/json_object/json_schema{name, schema};
* 400 for a ``stop`` that is not a string or an array of 1–4 strings; a reply is cut where its first stop
  string would begin, the string excluded, as servers do;
* the reasoning (o-series) family refuses ``max_tokens`` (it takes ``max_completion_tokens``), ``temperature``
  and ``top_p`` other than 1, penalties, ``logprobs``/``top_logprobs`` (OpenAI's reasoning-model guide);
* a ``vllm serve`` started without ``--enable-auto-tool-choice`` refuses ``tool_choice: auto`` (400), as vLLM
  does (``auto_tool_choice=False``).

It answers from rules like the scripted backend's (the first rule whose ``match`` — a string or a list of
strings, all required — occurs in the request's last user message; ``"in": "all"``: in any of its messages,
tool results included): ``text`` (the reply), ``tool_call`` (``{name,
arguments}``), ``finish_reason``, ``error`` (an HTTP status and message to return instead). ``tool_choice`` is
honoured: under ``none`` no tool call is returned (the rule's text instead), under ``required`` or a named
function a tool call must be (a rule without one is a 500: the test's script is wrong), under ``auto`` the
rule decides. ``tool_format="hermes"`` returns tool calls as ``<tool_call>{...}</tool_call>`` text in
``content`` — what a server without a tool-call parser sends back; ``template_tools=False`` is a chat template
without a tools section (the tools add nothing to ``prompt_tokens``). Every body is kept in :attr:`bodies` (with
its status) for the test to inspect.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping, Sequence

#: Top-level fields of the chat-completions request as OpenAI documents them.
OPENAI_FIELDS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "reasoning_effort", "response_format", "seed", "service_tier", "stop", "store", "stream",
    "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "web_search_options",
})
#: Extra fields ``vllm serve`` (and llama.cpp's server) take beside OpenAI's.
VLLM_EXTRAS = frozenset({"repetition_penalty", "chat_template_kwargs", "top_k", "min_p", "guided_json",
                         "cache_prompt", "id_slot", "repeat_penalty", "mm_processor_kwargs"})
#: What the reasoning (o-series) models refuse (OpenAI's reasoning guide: unsupported parameters).
REASONING_UNSUPPORTED = ("max_tokens", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
                         "logit_bias")
ROLES = ("system", "developer", "user", "assistant", "tool")
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
IMAGE_MAGIC = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF8", "gif"), (b"RIFF", "webp"))


class Refused(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def _number(body: Mapping[str, Any], name: str, low: float, high: float, integer: bool = False) -> None:
    if name not in body or body[name] is None:
        return
    value = body[name]
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        raise Refused(400, f"Invalid value for '{name}': {value!r} (expected a{'n integer' if integer else ' number'} "
                           f"in [{low}, {high}])", name)


def _check_image_url(url: Any, where: str) -> None:
    if not isinstance(url, str):
        raise Refused(400, f"{where}.url must be a string", where)
    if url.startswith(("http://", "https://")):
        return
    match = re.fullmatch(r"data:image/([a-z]+);base64,(.+)", url, re.DOTALL)
    if not match:
        raise Refused(400, f"{where}.url: invalid image URL (expected http(s) or data:image/<type>;base64,...)", where)
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise Refused(400, f"{where}.url: the base64 image data is invalid", where) from None
    if not any(data.startswith(magic) for magic, _ in IMAGE_MAGIC):
        raise Refused(400, f"{where}.url: the image data is not a JPEG, PNG, GIF or WebP image", where)


def _check_video_url(url: Any, where: str, video: bool | str = True) -> None:
    """``video``: True (vLLM's stock loader: MP4 bytes) or the name of the server's video loader; ``"senri"``
    (a ``vllm serve`` with senri's plugin and ``VLLM_VIDEO_LOADER_BACKEND=senri``) also reads senri carriers,
    with senri's own reader, and refuses one it cannot read."""
    from senri.backends.vllm_video import CARRIER_MEDIA_TYPE, read_carrier

    if not isinstance(url, str) or not (url.startswith(("http://", "https://"))
                                        or re.fullmatch(r"data:video/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]+", url)):
        raise Refused(400, f"{where}.url: invalid video URL", where)
    if url.startswith("data:"):
        data = base64.b64decode(url.split(",", 1)[1])
        if url.startswith(f"data:{CARRIER_MEDIA_TYPE};"):
            if video != "senri":
                raise Refused(400, f"{where}.url: this server's video loader cannot open {CARRIER_MEDIA_TYPE}", where)
            try:
                read_carrier(data)
            except ValueError as exc:
                raise Refused(400, f"{where}.url: {exc}", where) from None
        elif data[4:8] != b"ftyp":
            raise Refused(400, f"{where}.url: the video data is not an MP4 file", where)


def _check_input_audio(value: Any, where: str) -> None:
    """OpenAI's ``input_audio`` object: ``{data: base64, format: wav|mp3}``; a WAV must be a RIFF/WAVE file."""
    if not isinstance(value, dict) or set(value) != {"data", "format"}:
        raise Refused(400, f"{where} must be an object with exactly 'data' and 'format'", where)
    if value["format"] not in ("wav", "mp3"):
        raise Refused(400, f"{where}.format must be wav or mp3", where)
    try:
        data = base64.b64decode(value["data"], validate=True)
    except (ValueError, TypeError):
        raise Refused(400, f"{where}.data is not base64", where) from None
    if value["format"] == "wav" and not (data[:4] == b"RIFF" and data[8:12] == b"WAVE"):
        raise Refused(400, f"{where}.data is not a WAV file", where)


def _check_content(role: str, content: Any, where: str, video: bool | str, audio: bool = False) -> None:
    if isinstance(content, str):
        return
    if content is None and role == "assistant":
        return
    if not isinstance(content, list) or not content:
        raise Refused(400, f"{where}.content must be a string or a non-empty array of content parts", where)
    for n, part in enumerate(content):
        at = f"{where}.content[{n}]"
        if not isinstance(part, dict) or "type" not in part:
            raise Refused(400, f"{at}: a content part needs a 'type'", at)
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise Refused(400, f"{at}.text must be a string", at)
            continue
        if role not in ("user",):
            raise Refused(400, f"{at}: '{kind}' content parts are only allowed in user messages (role {role})", at)
        if kind == "image_url":
            if not isinstance(part.get("image_url"), dict):
                raise Refused(400, f"{at}.image_url must be an object with 'url'", at)
            _check_image_url(part["image_url"].get("url"), f"{at}.image_url")
        elif kind == "video_url" and video:
            if not isinstance(part.get("video_url"), dict):
                raise Refused(400, f"{at}.video_url must be an object with 'url'", at)
            _check_video_url(part["video_url"].get("url"), f"{at}.video_url", video)
        elif kind == "input_audio" and audio:
            _check_input_audio(part.get("input_audio"), f"{at}.input_audio")
        else:
            raise Refused(400, f"{at}: unsupported content part type {kind!r}", at)


def _check_tool_calls(calls: Any, where: str) -> list[str]:
    if not isinstance(calls, list) or not calls:
        raise Refused(400, f"{where}.tool_calls must be a non-empty array", where)
    ids = []
    for n, call in enumerate(calls):
        at = f"{where}.tool_calls[{n}]"
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or call.get("type") != "function":
            raise Refused(400, f"{at}: a tool call needs a string 'id' and type 'function'", at)
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not isinstance(function.get("arguments"), str):
            raise Refused(400, f"{at}.function needs a string 'name' and a JSON string 'arguments'", at)
        try:
            json.loads(function["arguments"])
        except ValueError:
            raise Refused(400, f"{at}.function.arguments is not valid JSON", at) from None
        ids.append(call["id"])
    return ids


def _check_messages(messages: Any, video: bool | str, audio: bool = False) -> None:
    if not isinstance(messages, list) or not messages:
        raise Refused(400, "'messages' must be a non-empty array", "messages")
    open_calls: set[str] = set()
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise Refused(400, f"{where}.role must be one of {', '.join(ROLES)}", where)
        role = message["role"]
        unknown = set(message) - {"role", "content", "name", "tool_calls", "tool_call_id", "refusal"}
        if unknown:
            raise Refused(400, f"{where}: unrecognized field(s) {sorted(unknown)}", where)
        if role == "assistant" and "tool_calls" in message:
            open_calls.update(_check_tool_calls(message["tool_calls"], where))
        elif "content" not in message:
            raise Refused(400, f"{where}: 'content' is required", where)
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                raise Refused(400, f"{where}.tool_call_id {message.get('tool_call_id')!r} answers no earlier "
                                   f"assistant tool call", where)
            if not isinstance(message.get("content"), (str, list)):
                raise Refused(400, f"{where}.content of a tool message must be text", where)
        elif "tool_call_id" in message:
            raise Refused(400, f"{where}: 'tool_call_id' is only allowed in tool messages", where)
        _check_content(role, message.get("content"), where, video, audio)


def _check_tools(body: Mapping[str, Any], auto_tool_choice: bool) -> None:
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise Refused(400, "'tools' must be a non-empty array", "tools")
        for n, tool in enumerate(tools):
            at = f"tools[{n}]"
            function = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
                raise Refused(400, f"{at}: a tool is {{type: function, function: {{...}}}}", at)
            if not isinstance(function.get("name"), str) or not NAME.match(function["name"]):
                raise Refused(400, f"{at}.function.name must match ^[a-zA-Z0-9_-]{{1,64}}$", at)
            if "parameters" in function and (not isinstance(function["parameters"], dict)
                                             or function["parameters"].get("type", "object") != "object"):
                raise Refused(400, f"{at}.function.parameters must be a JSON Schema object", at)
            if set(function) - {"name", "description", "parameters", "strict"}:
                raise Refused(400, f"{at}.function: unrecognized field(s)", at)
    if choice is None:
        return
    if tools is None:
        raise Refused(400, "'tool_choice' is only allowed when 'tools' are specified", "tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
        if name not in {t["function"]["name"] for t in tools}:
            raise Refused(400, "'tool_choice' names no function of 'tools'", "tool_choice")
    elif choice not in ("none", "auto", "required"):
        raise Refused(400, f"Invalid value for 'tool_choice': {choice!r}", "tool_choice")
    if choice == "auto" and not auto_tool_choice:
        raise Refused(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
                      "tool_choice")


def _check_response_format(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        raise Refused(400, "'response_format.type' must be text, json_object or json_schema", "response_format")
    if value["type"] == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not NAME.match(spec["name"]) \
                or not isinstance(spec.get("schema"), dict):
            raise Refused(400, "'response_format.json_schema' needs a 'name' and a 'schema' object",
                          "response_format")


def validate(body: Any, model: str, *, family: str = "chat", video: bool | str = False, extras: frozenset[str] = VLLM_EXTRAS,
             auto_tool_choice: bool = True, audio: bool = False) -> None:
    """Raise :class:`Refused` for what a real server would refuse in this request body."""
    if not isinstance(body, dict):
        raise Refused(400, "the request body must be a JSON object")
    if body.get("model") != model:
        raise Refused(404, f"The model `{body.get('model')}` does not exist", "model")
    unknown = set(body) - OPENAI_FIELDS - extras
    if unknown:
        raise Refused(400, f"Unrecognized request argument(s) supplied: {', '.join(sorted(unknown))}")
    if body.get("stream"):
        raise Refused(400, "this test server does not stream", "stream")
    _check_messages(body.get("messages"), video, audio)
    mm = body.get("mm_processor_kwargs")
    if mm is not None and (not isinstance(mm, dict) or (mm.get("use_audio_in_video") and not audio)):
        raise Refused(400, "'mm_processor_kwargs.use_audio_in_video' needs a model that hears", "mm_processor_kwargs")
    if family == "reasoning":
        for name in REASONING_UNSUPPORTED:
            if name in body:
                hint = " Use 'max_completion_tokens' instead." if name == "max_tokens" else ""
                raise Refused(400, f"Unsupported parameter: '{name}' is not supported with this model.{hint}", name)
        for name in ("temperature", "top_p"):
            if name in body and body[name] != 1:
                raise Refused(400, f"Unsupported value: '{name}' does not support {body[name]!r} with this model. "
                                   f"Only the default (1) value is supported.", name)
    _number(body, "max_tokens", 1, 10**7, integer=True)
    _number(body, "max_completion_tokens", 1, 10**7, integer=True)
    _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    _number(body, "frequency_penalty", -2, 2)
    _number(body, "presence_penalty", -2, 2)
    _number(body, "seed", -(2**63), 2**63 - 1, integer=True)
    _number(body, "n", 1, 128, integer=True)
    stop = body.get("stop")
    if stop is not None and not (isinstance(stop, str) or (
            isinstance(stop, list) and 1 <= len(stop) <= 4 and all(isinstance(x, str) and x for x in stop))):
        raise Refused(400, "'stop' must be a string or an array of 1 to 4 non-empty strings", "stop")
    if "logprobs" in body and not isinstance(body["logprobs"], bool):
        raise Refused(400, "'logprobs' must be a boolean", "logprobs")
    if "top_logprobs" in body:
        _number(body, "top_logprobs", 0, 20, integer=True)
        if not body.get("logprobs"):
            raise Refused(400, "'top_logprobs' requires 'logprobs' to be true", "top_logprobs")
    _check_tools(body, auto_tool_choice)
    _check_response_format(body.get("response_format"))


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the body's last user message: what the rules match, as the scripted backend's do."""
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return message_text(users[-1]) if users else ""


def request_text(body: Mapping[str, Any]) -> str:
    """Every text of the body's messages (and tool results), for the token count."""
    texts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(texts)


@dataclass
class StrictOpenAI:
    """The server (see the module docstring); a context manager: ``with StrictOpenAI(rules) as server:``,
    ``server.base_url`` is the ``.../v1`` address a model config's ``base_url`` takes."""

    rules: Sequence[Mapping[str, Any]]
    model: str = "strict-model"
    family: str = "chat"
    #: False: no video; True: video_url with vLLM's stock loader (MP4); "senri": senri's loader (carriers too)
    video: bool | str = False
    #: Whether the model hears (``input_audio`` parts, ``use_audio_in_video``): an omni model's server.
    audio: bool = False
    extras: frozenset[str] = VLLM_EXTRAS
    auto_tool_choice: bool = True
    tool_format: str = "openai"
    #: Whether the model's chat template renders the request's tools into the prompt (their schemas then count
    #: in ``prompt_tokens``, as with Qwen's templates); False: a template without a tools section.
    template_tools: bool = True
    api_key: str | None = None
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") in ("/health", "/v1/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path not in ("/v1/chat/completions", "/tokenize"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if self.path == "/tokenize":  # vLLM's prompt counter (a served vLLM model sizes requests by it)
                    self._send(*server.tokenize(raw))
                    return
                status, payload = server.handle(raw, self.headers.get("Authorization"))
                self._send(status, payload)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> "StrictOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()

    def model_config(self, **extra: Any) -> dict[str, Any]:
        """A senri ``openai`` model config for this server."""
        return {"backend": "openai", "base_url": self.base_url, "model": self.model, "concurrency": 4,
                "timeout_s": 30, "max_retries": 0, "images": True, "video": bool(self.video),
                **({"audio": True} if self.audio else {}), **extra}

    # ------------------------------------------------------------------------------------------- handling
    def tokenize(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """vLLM's ``POST /tokenize`` of a chat: ``{"count": n}`` (a test estimate: a token per four characters)."""
        try:
            body = json.loads(raw)
            _check_messages(body.get("messages"), self.video)
        except (ValueError, Refused) as exc:
            return 400, {"error": {"message": str(exc)}}
        count = max(1, len(request_text(body)) // 4)
        return 200, {"count": count, "max_model_len": 128000, "tokens": list(range(count))}

    def handle(self, raw: bytes, authorization: str | None) -> tuple[int, dict[str, Any]]:
        try:
            body = json.loads(raw)
        except ValueError:
            return self._record(None, 400, "We could not parse the JSON body of your request.")
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return self._record(body, 401, "Incorrect API key provided.")
        try:
            validate(body, self.model, family=self.family, video=self.video, extras=self.extras,
                     auto_tool_choice=self.auto_tool_choice, audio=self.audio)
            return self._answer(body)
        except Refused as refused:
            return self._record(body, refused.status, refused.message, refused.param)

    def _record(self, body: Any, status: int, message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.bodies.append({"status": status, "body": body, "error": message})
        error_type = "invalid_request_error" if status == 400 else "error"
        return status, {"error": {"message": message, "type": error_type, "param": param, "code": None}}

    def refused(self) -> list[dict[str, Any]]:
        """The requests this server refused (status and message), for a test to assert there are none."""
        return [b for b in self.bodies if b["status"] != 200]

    def _answer(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        text = request_text(body)
        asked = last_user_text(body)

        def matches(rule: Mapping[str, Any]) -> bool:
            where = text if rule.get("in") == "all" else asked
            wanted = [rule["match"]] if isinstance(rule.get("match"), str) else (rule.get("match") or [])
            return all(m in where for m in wanted)

        rule = next((r for r in self.rules if matches(r)), None)
        if rule is None:
            return self._record(body, 500, "test server: no rule matches this request")
        if "error" in rule:
            return self._record(body, int(rule.get("status", 500)), str(rule["error"]))
        choice = body.get("tool_choice")
        call = rule.get("tool_call") if body.get("tools") else None
        if choice == "none":
            call = None
        elif (choice == "required" or isinstance(choice, dict)) and call is None:
            return self._record(body, 500, "test server: tool_choice requires a tool call and the rule has none")
        message: dict[str, Any] = {"role": "assistant", "content": rule.get("text", "")}
        finish = rule.get("finish_reason", "stop")
        stops = [body["stop"]] if isinstance(body.get("stop"), str) else (body.get("stop") or [])
        cut = [at for at in (message["content"].find(x) for x in stops) if at >= 0]
        if cut:  # generation ends where the first stop string would begin; the string is not returned
            message["content"], finish = message["content"][:min(cut)], "stop"
        if call is not None:
            with self._lock:
                self._calls += 1
                call_id = f"call_{self._calls}"
            arguments = json.dumps(call.get("arguments", {}))
            if self.tool_format == "hermes":
                message["content"] = (rule.get("text", "") + "<tool_call>\n"
                                      + json.dumps({"name": call["name"], "arguments": call.get("arguments", {})})
                                      + "\n</tool_call>")
            else:
                message.update(content=rule.get("text") or None, tool_calls=[
                    {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": arguments}}])
                finish = rule.get("finish_reason", "tool_calls")
        choice_out: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs"):
            scores = rule.get("letter_logprobs") or {}
            top = [{"token": k, "logprob": float(v)} for k, v in scores.items()]
            choice_out["logprobs"] = {"content": [{"token": (message.get("content") or " ")[:1], "logprob": 0.0,
                                                   "top_logprobs": top}]}
        prompt_tokens = max(1, len(text) // 4)
        if self.template_tools and body.get("tools"):
            prompt_tokens += len(json.dumps(body["tools"])) // 4
        completion = str(message.get("content") or "")
        response = {"id": f"chatcmpl-{len(self.bodies)}", "object": "chat.completion", "model": self.model,
                    "choices": [choice_out],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max(1, len(completion) // 4),
                              "total_tokens": prompt_tokens + max(1, len(completion) // 4)}}
        with self._lock:
            self.bodies.append({"status": 200, "body": body, "response": response})
        return 200, response
