"""Light-Omni's worker-side adapter: the release's own patched Qwen2.5-Omni, run from the user's checkout in its
own pinned environment (standard library only at import; the release's modules are imported from the checkout).

senri sends the FIELDS of each call (times, image/audio files, STM text, profile lines, retrieved texts); this
adapter fills the release's own prompt templates (``scripts/prompts.py``: LP1–LP5) with ``str.replace`` exactly as
``scripts/lightomni.py`` does, splits them at the media tags with the release's ``prepare_input``, and calls the
release's ``QwenOmni2_5Model`` (``scripts/model.py``): ``send_message`` with mode memory/response,
``get_response_state_parallel`` for the reaction, ``get_texts_embedding`` for documents. So the prompts and the
model code are the release's, never copied into senri (spec U-5/U-8; docs/protocol.md "Light-Omni").

Ops (the worker protocol's request ``op``; ``senri/workers/worker_main.py`` hands every request to ``generate``):
``log``, ``merge``, ``profiles``, ``respond`` → ``{"text"}``; ``react`` → ``{"is_response", "is_retrieve",
"query_vector"}``; ``embed`` → ``{"vectors"}``; ``end_message`` clears the media and feature caches (ag 474, 481).
Options: ``model`` (the checkpoint folder), ``base_model`` (the processor's, default Qwen/Qwen2.5-Omni-7B),
``device_map``, ``client`` (``module:Class`` of the model class, default ``scripts.model:QwenOmni2_5Model``;
tests point it at a scripted stand-in), ``prompts_module`` (default ``scripts.prompts``), ``feature_cache``.
"""

from __future__ import annotations

import importlib

PROMPTS = {"log": "OMNI_MEMORY_LOG_GENERATE_PROMPT_INF", "merge": "OMNI_MEMORY_LOG_MERGE_PROMPT_INF",
           "profiles": "OMNI_MEMORY_PROFILE_UPDATE_PROMPT_INF", "react": "OMNI_MEMORY_STAGE_1_PROMPT_INF",
           "respond": "OMNI_MEMORY_STAGE_2_PROMPT_INF"}


def _load(spec: str):
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def fill_turn(template: str, fields: dict) -> tuple[str, list[str]]:
    """ag 160-178 / 294-305 / 214-228: the placeholders in the release's order, and the files in tag order."""
    images = list(fields.get("images") or [])
    own = list(fields.get("own_images") or [])
    audio = fields.get("audio") or ""
    prompt = template.replace("{START_TIME}", fields["start_time"])
    prompt = prompt.replace("{END_TIME}", fields["end_time"])
    prompt = prompt.replace("{INPUT_IMAGE_SEQUENCE}", "<img>" * len(own))
    prompt = prompt.replace("{INPUT_AUDIO_STREAM}", "<audio>" if audio else "null")
    prompt = prompt.replace("{INPUT_TEXT_STREAM}", fields.get("text", "null"))
    prompt = prompt.replace("{INPUT_FACES}", fields.get("faces", ""))
    prompt = prompt.replace("{SHORT_TERM_MEMORY}", fields.get("short_term_memory", ""))
    if fields.get("retrieved_semantic") is not None:
        prompt = prompt.replace("{RETRIEVED_SEMANTIC_MEMORY}", fields["retrieved_semantic"])
        prompt = prompt.replace("{RETRIEVED_EPISODIC_MEMORY}", fields["retrieved_episodic"])
    files = images + own + ([audio] if audio else [])
    return prompt, files


class LightOmniAdapter:
    def __init__(self, options: dict) -> None:
        self.options = options
        self.prompts = importlib.import_module(options.get("prompts_module") or "scripts.prompts")
        client = _load(options.get("client") or "scripts.model:QwenOmni2_5Model")
        kwargs = {"model_path": options["model"]} if options.get("model") else {}
        if options.get("base_model"):
            kwargs["base_model"] = options["base_model"]
        if options.get("device_map"):
            kwargs["device_map"] = options["device_map"]
        self.client = client(**kwargs)
        if options.get("feature_cache", True) and hasattr(self.client, "start_feature_cache"):
            self.client.start_feature_cache()

    def info(self) -> dict:
        return {"client": type(self.client).__module__ + ":" + type(self.client).__name__,
                "prompts": getattr(self.prompts, "__file__", None), "model": self.options.get("model")}

    def _template(self, op: str) -> str:
        return getattr(self.prompts, PROMPTS[op])

    def generate(self, request: dict) -> dict:
        op, fields = request.get("op"), request.get("fields") or {}
        client = self.client
        if op == "end_message":
            client.clear_media_files()
            if hasattr(client, "clear_feature_cache"):
                client.clear_feature_cache()
            return {"text": ""}
        if op == "embed":
            vectors = client.get_texts_embedding(list(fields["texts"]))
            if hasattr(vectors, "cpu"):  # a torch tensor (the release's): bf16 → float32 numpy
                vectors = vectors.float().cpu().numpy()
            return {"vectors": [[float(x) for x in row] for row in vectors]}
        if op == "merge":
            prompt = self._template(op).replace("{MEMORY_LOG_SEQUENCE}", fields["memory_sequence"])
            return {"text": client.send_message(client.prepare_input(prompt, []), mode="memory")}
        if op == "profiles":
            prompt = self._template(op).replace("{CURRENT_PROFILES}", fields["current_profiles"])
            prompt = prompt.replace("{MEMORY_LOG_SEQUENCE}", fields["memory_sequence"])
            return {"text": client.send_message(client.prepare_input(prompt, []), mode="memory")}
        if op in ("log", "respond", "react"):
            prompt, files = fill_turn(self._template(op), fields)
            conv = client.prepare_input(prompt, files)
            if op == "react":
                raw = {"audio_path": fields.get("audio") or "", "text": fields.get("text", "null")}
                state = client.get_response_state_parallel(conv, raw, None)
                vector = state.get("retrieve_embedding")
                if vector is not None and hasattr(vector, "reshape"):  # the release's (1, 1024) numpy array
                    vector = vector.reshape(-1)
                return {"is_response": bool(state.get("is_response", False)),
                        "is_retrieve": bool(state.get("is_retrieve", False)),
                        "query_vector": None if vector is None else [float(x) for x in vector]}
            return {"text": client.send_message(conv, mode="response" if op == "respond" else "memory")}
        raise ValueError(f"Light-Omni worker: unknown op {op!r}")
