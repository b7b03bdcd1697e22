"""Stand-in modules for the imports a release's module makes but the computation we record does not use
(model clients, LangChain/LangGraph plumbing, an embedding model). Installed into ``sys.modules`` before the
release's own module is imported from its local checkout; nothing here replaces a function whose output is
recorded. Used only by the generators in this folder (never by senri)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


class _Anything:
    """A client or handler object: any constructor arguments, any attribute, calls return another one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.usage_metadata = {"model": {"total_tokens": 0}}

    def __getattr__(self, name: str) -> Any:
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Anything()


class ScriptedStructured:
    """``llm.with_structured_output(Cls)``: each ``invoke`` pops the next scripted reply and returns
    ``Cls.model_validate(reply)``, so the release's own pydantic class decides what is accepted."""

    replies: list[Any] = []

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def invoke(self, inputs: Any, config: Any = None) -> Any:
        ScriptedStructured.seen.append(inputs)
        return self.cls.model_validate(ScriptedStructured.replies.pop(0))

    seen: list[Any] = []


class _Llm(_Anything):
    def with_structured_output(self, cls: type) -> ScriptedStructured:
        return ScriptedStructured(cls)


class _Prompt:
    @classmethod
    def from_messages(cls, messages: Any) -> "_Prompt":
        return cls()

    def __or__(self, other: Any) -> Any:
        return other


class _Tool:
    """langchain's ``@tool``: ``.invoke(dict)`` calls the function with the dict as keyword arguments."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def invoke(self, kwargs: dict) -> Any:
        return self.fn(**kwargs)


def install_langchain() -> None:
    _module("langchain_core")
    _module("langchain_core.callbacks", UsageMetadataCallbackHandler=_Anything)
    _module("langchain_core.messages", SystemMessage=_Anything, HumanMessage=_Anything)
    _module("langchain_core.messages.utils", count_tokens_approximately=lambda messages: 0)
    _module("langchain_core.prompts", ChatPromptTemplate=_Prompt)
    _module("langchain_core.runnables", RunnableConfig=dict)
    _module("langchain_core.tools", tool=_Tool)
    _module("langchain_core.documents", Document=_Anything)
    _module("langgraph")
    _module("langgraph.graph", END="__end__", START="__start__", StateGraph=_Anything)
    _module("langchain_openai", ChatOpenAI=_Llm)
    _module("langchain_google_genai", ChatGoogleGenerativeAI=_Llm)
    _module("langchain_experimental")
    _module("langchain_experimental.graph_transformers", LLMGraphTransformer=_Anything)


def install_paths(root: Path) -> None:
    """The release's ``paths`` module with every root under ``root`` (its key paths name empty files)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("google.txt", "openai.txt"):
        (root / name).write_text("unused\n")
    _module("paths", EGAGENT_ROOT=root, EGOLIFE_ROOT=str(root / "EgoLife"), VIDEO_MME_ROOT=str(root / "VideoMME"),
            MODEL_ROOT=root, GOOGLE_GENAI_KEY_PATH=str(root / "google.txt"),
            OPENAI_API_KEY_PATH=str(root / "openai.txt"), CAPTION_ROOT=root / "captions",
            VMME_ASR_DIR=str(root / "VideoMMEsubtitle"), VMME_EMBS_PATH=str(root / "embs"),
            RESULTS_ROOT=root / "results", DB_ROOT=root / "dbs", ENTITYGRAPH_DB_ROOT=root / "entitygraph_db",
            TIMESTAMP_EPISODES_ROOT=root / "timestamp_episodes")


def install_retrieval_model(vectors: dict[str, Any]) -> None:
    """SigLIP 2 stand-in: each text query's fixed vector (``vectors``)."""
    import numpy as np

    def embed_texts_batch(texts: list, device: Any = None, batch_size: int = 128) -> Any:
        return np.stack([np.asarray(vectors[t], dtype=np.float32) for t in texts])

    _module("retrieval_model", device="cpu", embed_texts_batch=embed_texts_batch,
            embed_frames_batch=lambda *a, **k: None)
