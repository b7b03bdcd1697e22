"""The image-text embedder of a persistent memory's visual side (WorldMM W-C8 / W-R4, MAGIC-Video G-C5).

The papers embed clips with VLM2Vec-V2.0 (a Qwen2-VL LoRA, last-token pooling); senri runs any transformers
dual encoder with ``get_image_features`` / ``get_text_features`` (CLIP, SigLIP), named by an ``embedder`` model
config::

    backend: transformers
    kind: image_text
    path: <local model folder>      # tokenizer and image processor saved beside the weights
    short_side: 224                 # frames are decoded at this short side before the processor

A clip's vector is the L2-normalised mean of its frames' normalised image features (``nframes`` frames spread
evenly over the clip, the spec's 10); a query's vector is its normalised text feature. Nothing is downloaded:
the folder must hold the model (``local_files_only``). VLM2Vec itself is a recorded substitution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np


class DualEncoder:
    """A transformers image-text model on the CPU (or the GPU when torch sees one)."""

    def __init__(self, model_config: Mapping[str, Any]) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

        if model_config.get("kind") != "image_text":
            raise ValueError(f"embedder model config kind: {model_config.get('kind')!r}; an image-text embedder "
                             f"needs kind: image_text")
        path = model_config.get("path")
        if not path or not Path(str(path)).is_dir():
            raise ValueError(f"embedder model config path: {path!r} is not a local model folder")
        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval().to(self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.processor = AutoImageProcessor.from_pretrained(str(path), local_files_only=True)
        self.max_length = int(model_config.get("max_text_tokens", 64))

    def _normalised(self, features) -> np.ndarray:  # noqa: ANN001 - a torch tensor or a model output
        if not hasattr(features, "norm"):  # transformers 5 returns an output whose pooler_output is projected
            pooled = getattr(features, "pooler_output", None)
            features = pooled if pooled is not None else features[0]
        features = features / features.norm(dim=-1, keepdim=True).clamp(min=1e-12)
        return features.float().cpu().numpy()

    def images(self, images: Sequence[np.ndarray]) -> np.ndarray:
        with self.torch.inference_mode():
            inputs = self.processor(images=list(images), return_tensors="pt").to(self.device)
            return self._normalised(self.model.get_image_features(**inputs))

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        with self.torch.inference_mode():
            inputs = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                                    return_tensors="pt").to(self.device)
            inputs.pop("token_type_ids", None)
            return self._normalised(self.model.get_text_features(**inputs))


def clip_vector(encoder: DualEncoder, frames: Sequence[np.ndarray]) -> np.ndarray:
    """The clip's vector: the normalised mean of its frames' normalised image vectors."""
    mean = encoder.images(frames).mean(axis=0)
    return mean / (np.linalg.norm(mean) or 1.0)


def embed_clips(model_config: Mapping[str, Any], media: Any, spans: Sequence[tuple[float, float]],
                visual_config: Mapping[str, Any]) -> np.ndarray:
    """One vector per ``(start_s, end_s)`` span of ``media.video``: ``nframes`` frames spread over the span.
    A span none of whose frames decodes raises ValueError naming it (a visual memory with holes would rank
    clips it never saw)."""
    from senri.decode import read_frames, uniform

    encoder = DualEncoder(model_config)
    nframes = int(visual_config.get("nframes", 10))
    short_side = int(model_config.get("short_side", 224))
    targets = [t for start, end in spans for t in uniform(nframes, start, end)]
    frames = list(read_frames(media.video, targets, short_side=short_side))
    vectors = []
    for n, (start, end) in enumerate(spans):
        images = [f.image for f in frames[n * nframes:(n + 1) * nframes] if f.image is not None]
        if not images:
            raise ValueError(f"{media.video}: no frame of the clip {start:g}–{end:g} s could be decoded")
        vectors.append(clip_vector(encoder, images))
    return np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, 1), dtype=np.float32)


def open_text_tower(model_config: Mapping[str, Any] | None) -> Callable[[Sequence[str]], np.ndarray]:
    """The query side of the embedder a visual memory was built with (W-R4's text→clip similarity)."""
    if not model_config:
        raise ValueError("the visual memory records no embedder model config to encode queries with")
    return DualEncoder(model_config).texts
