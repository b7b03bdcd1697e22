"""A stand-in for the user's Light-Omni release checkout (tests only): a tiny git repository whose
``scripts/prompts.py`` holds placeholder templates (the release's placeholders, none of its text) and whose
``scripts/model.py`` is a scripted ``QwenOmni2_5Model`` in pure Python (it runs in a worker environment with no
packages). Its replies are computed from what each call received, so a test can see the fields arrive whole:
a log names its frame and audio counts and its times, a response starts with "B. " and counts its images."""

from __future__ import annotations

import subprocess
from pathlib import Path

PROMPTS = '''
OMNI_MEMORY_LOG_GENERATE_PROMPT_INF = """LOG {START_TIME}|{END_TIME} faces[{INPUT_FACES}] stm[{SHORT_TERM_MEMORY}]
{INPUT_IMAGE_SEQUENCE} {INPUT_AUDIO_STREAM} {INPUT_TEXT_STREAM}""".strip()
OMNI_MEMORY_LOG_MERGE_PROMPT_INF = """MERGE {MEMORY_LOG_SEQUENCE}""".strip()
OMNI_MEMORY_PROFILE_UPDATE_PROMPT_INF = """PROFILES {CURRENT_PROFILES} {MEMORY_LOG_SEQUENCE}""".strip()
OMNI_MEMORY_STAGE_1_PROMPT_INF = """REACT {START_TIME} stm[{SHORT_TERM_MEMORY}] {INPUT_TEXT_STREAM}""".strip()
OMNI_MEMORY_STAGE_2_PROMPT_INF = """RESPOND sem[{RETRIEVED_SEMANTIC_MEMORY}] epi[{RETRIEVED_EPISODIC_MEMORY}]
stm[{SHORT_TERM_MEMORY}] {INPUT_TEXT_STREAM}""".strip()
'''

MODEL = '''
import json, re


class QwenOmni2_5Model:
    def __init__(self, model_path="x", base_model="y", device_map=None):
        self.model_path, self.cleared, self.segments = model_path, 0, 0

    def start_feature_cache(self):
        pass

    def clear_feature_cache(self):
        self.cleared += 1

    def clear_media_files(self):
        pass

    def prepare_input(self, prompt, files=[]):
        assert len(files) == prompt.count("<img>") + prompt.count("<audio>")
        parts, it = [], iter(files)
        for piece in re.split(r"(<img>|<audio>)", prompt):
            if piece == "<img>":
                parts.append({"type": "image", "image": next(it)})
            elif piece == "<audio>":
                parts.append({"type": "audio", "audio": next(it)})
            elif piece:
                parts.append({"type": "text", "text": piece})
        return {"role": "user", "content": parts}

    def send_message(self, message, mode="response"):
        text = "".join(p["text"] for p in message["content"] if p["type"] == "text")
        images = sum(p["type"] == "image" for p in message["content"])
        audios = sum(p["type"] == "audio" for p in message["content"])
        if text.startswith("LOG"):
            self.segments += 1
            times = text[4:text.index(" faces[")]
            return "```json\\n" + json.dumps({"visual": f"{images} frames {times}", "auditory": f"{audios} audio",
                    "semantic_memory": [f"fact {self.segments}", f"fact {self.segments}"]}) + "\\n```"
        if text.startswith("MERGE"):
            return json.dumps({"visual": "merged", "auditory": "merged", "assistant": "null"})
        if text.startswith("RESPOND"):
            assert mode == "response"
            return "B. " + str(images) + " images; cleared " + str(self.cleared)
        raise AssertionError(text[:40])

    def get_response_state_parallel(self, conv, raw, asr):
        return {"is_response": False, "is_retrieve": False, "retrieve_embedding": [0.0, 1.0] + [0.0] * 6}

    def get_texts_embedding(self, texts):
        return [[0.0, 1.0 if "fact 1" in t else 0.0, 0.0 if "fact 1" in t else 1.0] + [0.0] * 5 for t in texts]
'''


def make_checkout(root: Path) -> Path:
    """The stand-in checkout under ``root`` (created), committed so the worker can name its commit."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "scripts").mkdir(exist_ok=True)
    (root / "scripts" / "__init__.py").write_text("")
    (root / "scripts" / "prompts.py").write_text(PROMPTS)
    (root / "scripts" / "model.py").write_text(MODEL)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root
