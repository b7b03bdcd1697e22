"""The clip embedder of a persistent memory's visual side (WorldMM W-C8 / W-R4, MAGIC-Video G-C5 / G-R2).

Both papers embed clips and queries with VLM2Vec-V2.0 (a Qwen2-VL tuned for retrieval: the last token's final
hidden state, L2-normalised). An ``embedder`` model config names a local model folder and its ``kind``::

    backend: transformers
    kind: vlm_embedding     # or image_text
    path: <local model folder>
    short_side: 224         # WorldMM's frames are decoded at this short side (MAGIC-Video: visual_short_side)

- ``vlm_embedding`` (:class:`LastTokenEmbedder`): the papers' recipe for any image-text-to-text model
  transformers loads — the clip's frames go in as images with the instruction "Represent the given video.",
  a query as text; the vector is the last real token's final hidden state, L2-normalised;
- ``image_text`` (:class:`DualEncoder`): a dual encoder with ``get_image_features`` / ``get_text_features``
  (CLIP, SigLIP); a clip's vector is the L2-normalised mean of its frames' normalised image features, a
  query's its normalised text feature (a recorded substitution for VLM2Vec).

Both systems go through the same three calls: :func:`clip_frames` (the frames of each clip span, one
decoding pass), :func:`embed_clips` (one vector per span) and :func:`open_query_encoder` (texts → vectors in
the same space). Nothing is downloaded: the folder must hold the model (``local_files_only``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from senri.registry import Registry

CLIP_INSTRUCTION = "Represent the given video."
QUERY_INSTRUCTION = "Find a video that matches: "


class ClipEmbedder(Protocol):
    """What a kind of embedder provides: a clip's vector from its frames, and query vectors from texts."""

    def embed_clip(self, frames: Sequence[np.ndarray]) -> np.ndarray: ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...


#: ``kind`` of an embedder model config → its class (imported, with torch, only when a store needs it).
CLIP_EMBEDDERS = Registry("clip embedder kind")
CLIP_EMBEDDERS.register("image_text", "senri.memory.clip_embedding:DualEncoder")
CLIP_EMBEDDERS.register("vlm_embedding", "senri.memory.clip_embedding:LastTokenEmbedder")


def _local_folder(model_config: Mapping[str, Any]) -> str:
    path = model_config.get("path")
    if not path or not Path(str(path)).expanduser().is_dir():
        raise ValueError(f"embedder model config field 'path': {path!r} is not a local model folder")
    return str(Path(str(path)).expanduser())


def _device(torch: Any, model_config: Mapping[str, Any]) -> str:
    device = str(model_config.get("device", "auto"))
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _dtype(torch: Any, model_config: Mapping[str, Any]) -> Any:
    name = str(model_config.get("dtype", "auto"))
    return "auto" if name == "auto" else getattr(torch, name)


def _normalised(torch: Any, features: Any) -> np.ndarray:
    return torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy()


class DualEncoder:
    """``image_text``: a transformers image-text dual encoder (CLIP, SigLIP)."""

    def __init__(self, model_config: Mapping[str, Any]) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

        path = _local_folder(model_config)
        self.torch = torch
        self.device = _device(torch, model_config)
        self.model = AutoModel.from_pretrained(path, local_files_only=True, dtype=_dtype(torch, model_config)
                                               ).eval().to(self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.processor = AutoImageProcessor.from_pretrained(path, local_files_only=True)
        self.max_length = int(model_config.get("max_text_tokens", 64))

    def _features(self, output: Any) -> np.ndarray:
        if not hasattr(output, "norm"):  # transformers 5 returns an output whose pooler_output is projected
            pooled = getattr(output, "pooler_output", None)
            output = pooled if pooled is not None else output[0]
        return _normalised(self.torch, output)

    def embed_images(self, images: Sequence[np.ndarray]) -> np.ndarray:
        with self.torch.inference_mode():
            inputs = self.processor(images=list(images), return_tensors="pt").to(self.device)
            return self._features(self.model.get_image_features(**inputs))

    def embed_clip(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        """The normalised mean of the frames' normalised image vectors."""
        mean = self.embed_images(frames).mean(axis=0)
        return mean / (np.linalg.norm(mean) or 1.0)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        with self.torch.inference_mode():
            inputs = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                                    return_tensors="pt").to(self.device)
            inputs.pop("token_type_ids", None)
            return self._features(self.model.get_text_features(**inputs))


class LastTokenEmbedder:
    """``vlm_embedding``: VLM2Vec-style last-token embeddings of clips (frames + instruction) and queries
    (instruction + text) from one local image-text-to-text model."""

    def __init__(self, model_config: Mapping[str, Any]) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        path = _local_folder(model_config)
        self.torch = torch
        self.device = _device(torch, model_config)
        self.processor = AutoProcessor.from_pretrained(path, local_files_only=True)
        self.model = AutoModelForImageTextToText.from_pretrained(
            path, local_files_only=True, dtype=_dtype(torch, model_config)).to(self.device).eval()

    def _last_token(self, images: Sequence[Any], text: str) -> np.ndarray:
        content = [{"type": "image"} for _ in images] + [{"type": "text", "text": text}]
        prompt = self.processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                    add_generation_prompt=False)
        inputs = self.processor(text=[prompt], images=list(images) or None, return_tensors="pt").to(self.device)
        with self.torch.inference_mode():
            hidden = self.model(**inputs, output_hidden_states=True).hidden_states[-1]
        last = int(inputs["attention_mask"][0].nonzero().max())  # the prompt's last real token
        return _normalised(self.torch, hidden[0, last])

    def embed_clip(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        from PIL import Image

        return self._last_token([Image.fromarray(f) for f in frames], CLIP_INSTRUCTION)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._last_token([], QUERY_INSTRUCTION + t) for t in texts])


def open_clip_embedder(model_config: Mapping[str, Any] | None) -> ClipEmbedder:
    """The embedder an ``embedder`` model config's ``kind`` names; ValueError naming the field otherwise."""
    if not model_config:
        raise ValueError("no embedder model config (a visual memory needs one to embed clips and queries)")
    kind = model_config.get("kind")
    if kind not in CLIP_EMBEDDERS:
        raise ValueError(f"embedder model config field 'kind': {kind!r}; one of {', '.join(CLIP_EMBEDDERS)}")
    return CLIP_EMBEDDERS.load(str(kind))(model_config)


def clip_frames(video: str | Path, spans: Sequence[tuple[float, float]], nframes: int,
                short_side: int | None) -> list[list[np.ndarray]]:
    """Each span's ``nframes`` frames, spread evenly over it (each in the middle of its 1/n, as
    :func:`senri.decode.uniform`), decoded in one pass. A span none of whose frames decodes raises ValueError
    naming it (a visual memory with holes would rank clips it never saw)."""
    from senri.decode import read_frames, uniform

    targets = [t for start, end in spans for t in uniform(nframes, start, end)]
    frames = list(read_frames(video, targets, short_side=short_side))
    out = []
    for n, (start, end) in enumerate(spans):
        images = [f.image for f in frames[n * nframes:(n + 1) * nframes] if f.image is not None]
        if not images:
            raise ValueError(f"{video}: no frame of the clip {start:g}-{end:g} s could be decoded")
        out.append(images)
    return out


def embed_clips(model_config: Mapping[str, Any], video: str | Path, spans: Sequence[tuple[float, float]],
                nframes: int, short_side: int | None) -> np.ndarray:
    """One L2-normalised vector per ``(start_s, end_s)`` span of ``video`` (float32, spans × dim)."""
    frames = clip_frames(video, spans, nframes, short_side)
    if not frames:
        return np.zeros((0, 1), dtype=np.float32)
    embedder = open_clip_embedder(model_config)
    return np.stack([embedder.embed_clip(images) for images in frames]).astype(np.float32)


def open_query_encoder(model_config: Mapping[str, Any] | None) -> Callable[[Sequence[str]], np.ndarray]:
    """The query side of the embedder a visual memory was built with (texts → vectors in the clips' space)."""
    return open_clip_embedder(model_config).embed_texts
