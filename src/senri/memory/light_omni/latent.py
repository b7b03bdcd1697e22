"""Light-Omni's tensor rules that need no weights: visual-token compression (L-C11, K-16), the reaction
call's latent read-out (L-R1, K-17) and the query vector's composition (L-R2, K-17).

These are the parts of the patched ``modeling_qwen2_5_omni.py`` whose arithmetic is fixed by the release and
does not depend on the trained weights; the engine that runs the model calls them, and the tests check them
on random tensors and on the release cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

#: L-C11: at least this many tokens kept per image, and what a near-duplicate keeps.
MIN_KEPT_TOKENS = 32
KEEP_RATIO = 0.25
#: L-C11: cosine of an image's mean feature to the last kept image's mean above which it is a near-duplicate.
NEAR_DUPLICATE_COSINE = 0.96
#: L-V1: three latent blocks of 32 vectors appended after the prompt, in this order.
LATENT_BLOCK = 32
LATENT_ORDER = ("is_response", "is_retrieve", "retrieval_vector")
#: L-R1: the token id read at the decision latents ("yes" in the Qwen2 vocabulary, DERIVED).
YES_TOKEN = 9693
#: L-R1: offsets from the end of the sequence of the last is_response and is_retrieve latents.
RESPONSE_OFFSET = -(2 * LATENT_BLOCK + 1)   # -65
RETRIEVE_OFFSET = -(LATENT_BLOCK + 1)       # -33


def image_keep_masks(features: Sequence[torch.Tensor], keep_ratio: float = KEEP_RATIO,
                     near_duplicate: float = NEAR_DUPLICATE_COSINE) -> list[torch.Tensor]:
    """One boolean mask per image (its ``L`` merged tokens, ``features[i]`` of shape ``(L, C)``) of the tokens
    kept: ``max(32, ⌊keep_ratio·L⌋)`` tokens, or 32 for a near-duplicate of the last KEPT image (whose mean
    then does not become the reference), capped at ``L``; the tokens farthest (1 − cos) from the image's mean
    feature, in their original order."""
    masks: list[torch.Tensor] = []
    reference: torch.Tensor | None = None
    for feat in features:
        length = feat.shape[0]
        mean = feat.mean(0)
        keep = max(MIN_KEPT_TOKENS, int(length * keep_ratio))
        duplicate = reference is not None and bool(
            F.cosine_similarity(mean.unsqueeze(0), reference.unsqueeze(0)) > near_duplicate)
        if duplicate:
            keep = MIN_KEPT_TOKENS
        else:
            reference = mean
        scores = 1.0 - (F.normalize(feat, p=2, dim=-1) @ F.normalize(mean, p=2, dim=-1))
        _, chosen = torch.topk(scores, min(keep, length))
        mask = torch.zeros(length, dtype=torch.bool)
        mask[chosen] = True
        masks.append(mask)
    return masks


def sequence_keep_mask(input_ids: torch.Tensor, image_features: torch.Tensor, grid_thw: torch.Tensor,
                       image_token_id: int, merge_size: int = 2) -> torch.Tensor:
    """The whole sequence's keep mask (L-C11): text and audio tokens always kept, each image's tokens by
    :func:`image_keep_masks`. ``image_features`` are the image tokens in sequence order, ``grid_thw`` the
    processor's (t, h, w) per image before the 2×2 merge. Positions (RoPE) are computed on the full sequence
    before this mask drops anything."""
    mask = torch.ones(input_ids.shape[-1], dtype=torch.bool)
    where = input_ids.reshape(-1) == image_token_id
    if grid_thw is None or len(grid_thw) == 0 or not bool(where.any()):
        return mask
    pieces, start = [], 0
    for t, h, w in grid_thw.tolist():
        length = (int(h) // merge_size) * (int(w) // merge_size)  # the release ignores t (one frame per image)
        pieces.append(image_features[start:start + length])
        start += length
    mask[where] = torch.cat(image_keep_masks(pieces))
    return mask


@dataclass(frozen=True)
class ReactionState:
    """What the reaction call (LP4 with the retrieve adapter) reads from its one forward pass (L-R1)."""

    is_response: bool
    is_retrieve: bool
    soft_prompt: torch.Tensor   # (32, 1024): hidden_to_emb of the retrieval latents


def read_latents(logits: torch.Tensor, retrieval_embeddings: torch.Tensor, yes_token: int = YES_TOKEN
                 ) -> ReactionState:
    """L-R1's read-out from a forward over ``prompt + 96 latents``: ``logits`` (seq, vocab) of that pass,
    ``retrieval_embeddings`` the 32 retrieval latents after hidden_to_emb. A decision is true when the argmax
    token at its last latent (offset −65 for is_response, −33 for is_retrieve) is ``yes_token``."""
    return ReactionState(
        is_response=int(logits[RESPONSE_OFFSET].argmax()) == yes_token,
        is_retrieve=int(logits[RETRIEVE_OFFSET].argmax()) == yes_token,
        soft_prompt=retrieval_embeddings)


def compose_embeddings(text_hidden: torch.Tensor, soft_prompt: torch.Tensor | None = None) -> torch.Tensor:
    """L-R2 on the embedder's last-token hidden states ``text_hidden`` (n, d): documents (and queries without
    a soft prompt) are L2-normalised; a query with a soft prompt (32, d) or (1|n, 32, d) is
    ``normalise(normalise(text) + normalise(mean of the soft prompt))`` — the double normalisation."""
    if soft_prompt is None:
        return F.normalize(text_hidden, p=2, dim=1)
    prompt = soft_prompt.to(dtype=text_hidden.dtype)
    if prompt.dim() == 2:
        prompt = prompt.unsqueeze(0)
    prompt_vec = prompt.mean(dim=1)
    if prompt_vec.shape[0] == 1 and text_hidden.shape[0] > 1:
        prompt_vec = prompt_vec.expand(text_hidden.shape[0], -1)
    combined = F.normalize(text_hidden, p=2, dim=1) + F.normalize(prompt_vec, p=2, dim=1)
    return F.normalize(combined, p=2, dim=1)
