"""Tiny RANDOM checkpoints built from a release's own model classes, for bench/worker_envs.py (spec T7). Run by a
worker environment's interpreter with the release checkout on its path, never by senri's:

    <env>/bin/python bench/worker_tiny_models.py cambrian OUT_DIR [--lfp]

``cambrian``: a CambrianQwenForCausalLM (the release's class, model_type cambrian_qwen) with a 2-layer Qwen2 of
width 64, the release's own SigLIP tower class at 2 layers (width 1152 stays: the release's tower reports the
so400m width from its default config whatever it loads, so the projector and the LFP head are built for 1152),
an mlp2x_gelu projector, the LFP head (``--lfp``), and a byte-level slow Qwen2 tokenizer with the ChatML specials.
The weights are random (seed 0): answers are noise; what is checked is that the release's loading path, the
adapter and senri's requests fit together.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def byte_level_tokenizer(out: Path, specials: list[str]) -> None:
    """vocab.json / merges.txt of a Qwen2-style byte-level BPE with no merges (one token per byte) and the
    special tokens after the 256 bytes."""
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "merges.txt").write_text("#version: 0.2\n")
    from transformers import AddedToken, Qwen2Tokenizer

    tokenizer = Qwen2Tokenizer(str(out / "vocab.json"), str(out / "merges.txt"), unk_token=None, bos_token=None,
                               eos_token=AddedToken("<|im_end|>", special=True),
                               pad_token=AddedToken("<|endoftext|>", special=True))
    tokenizer.add_special_tokens({"additional_special_tokens": [s for s in specials
                                                                if s not in ("<|im_end|>", "<|endoftext|>")]})
    tokenizer.save_pretrained(str(out))


def cambrian(out: Path, lfp: bool) -> None:
    import torch
    from cambrian.model.language_model.cambrian_qwen2 import CambrianQwenConfig, CambrianQwenForCausalLM
    from cambrian.model.multimodal_encoder.llava_next_siglip_encoder import SigLipVisionConfig, SigLipVisionModel

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    tower_dir = out / "google-siglip-tiny"  # "google" + "siglip" in the name picks the release's SigLIP class
    tower = SigLipVisionModel(SigLipVisionConfig(hidden_size=1152, intermediate_size=64, num_hidden_layers=2,
                                                 num_attention_heads=16, image_size=384, patch_size=14))
    tower.save_pretrained(str(tower_dir))
    byte_level_tokenizer(out, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    config = CambrianQwenConfig(
        vocab_size=259, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0, tie_word_embeddings=False,
        use_sliding_window=False, sliding_window=None, bos_token_id=256, eos_token_id=258, pad_token_id=256,
        architectures=["CambrianQwenForCausalLM"], mm_vision_tower_aux_list=[str(tower_dir)],
        mm_vision_tower_aux_token_len_list=[729], mm_projector_type="mlp2x_gelu", mm_use_im_start_end=False,
        mm_use_im_patch_token=False, miv_token_len=64, image_aspect_ratio="anyres", tune_mm_mlp_adapter=False,
        # training-time keys a released config carries and the inference path reads (found by loading)
        connector_only=True, unfreeze_mm_vision_tower=False, vision_hidden_size=1152, mm_vision_select_layer=-1,
        mm_vision_select_feature="patch")
    if lfp:
        config.nfp_head = True
    model = CambrianQwenForCausalLM(config)
    with torch.no_grad():
        model.get_model().image_newline.normal_(0, 0.02)
    model.generation_config.eos_token_id = 258
    model.generation_config.bos_token_id = 256  # generate() on embeddings starts from it (Qwen2.5 ships one)
    model.generation_config.pad_token_id = 256
    model.save_pretrained(str(out))
    print(json.dumps({"built": str(out), "class": type(model).__name__, "lfp_head": lfp,
                      "parameters": sum(p.numel() for p in model.parameters())}))


STANDIN_MODELING = """# A stand-in for a checkpoint's remote code (bench/worker_tiny_models.py): transformers' own Qwen3-VL class
# registered for AutoModelForCausalLM, as the InternVideo3 / VideoChat3 checkpoints register theirs.
from transformers import Qwen3VLForConditionalGeneration


class StandInForCausalLM(Qwen3VLForConditionalGeneration):
    pass
"""

#: The ChatML turns with Qwen-VL's vision markers for image and video parts (a stand-in for a checkpoint's own).
STANDIN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen3vl(out: Path, patch: int = 16) -> None:
    """A tiny random Qwen3-VL (transformers 4.57's class, 2 layers of width 64, a 2-block vision tower of width
    32) saved with a remote-code stand-in, a processor (16-px patches, 2×2 merge, 2-frame temporal patches) and a
    byte-level tokenizer. NOT InternVideo3's nor VideoChat3's class: their remote code is on the hub only.
    ``patch``: 16 as InternVideo3's Qwen3-VL tower (factor 32), 14 as VideoChat3's I3D-ViT (factor 28)."""
    import torch
    from transformers import (AddedToken, Qwen2TokenizerFast, Qwen2VLImageProcessorFast, Qwen3VLConfig,
                              Qwen3VLProcessor, Qwen3VLVideoProcessor)
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = Qwen2TokenizerFast(vocab_file=str(out / "vocab.json"), merges_file=str(out / "merges.txt"),
                                   eos_token=AddedToken("<|im_end|>", special=True),
                                   pad_token=AddedToken("<|endoftext|>", special=True), unk_token=None)
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:2] + specials[3:]})
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in specials}
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessorFast(patch_size=patch, merge_size=2, temporal_patch_size=2),
        video_processor=Qwen3VLVideoProcessor(patch_size=patch, merge_size=2, temporal_patch_size=2),
        tokenizer=tokenizer, chat_template=STANDIN_TEMPLATE)
    processor.save_pretrained(str(out))
    config = Qwen3VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                     "max_position_embeddings": 32768, "rope_theta": 5000000.0,
                     "rope_scaling": {"rope_type": "default", "mrope_section": [4, 2, 2], "mrope_interleaved": True},
                     "tie_word_embeddings": False},
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": patch,
                       "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 64,
                       "num_position_embeddings": 2304, "deepstack_visual_indexes": [1]},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False)
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(str(out))
    (out / "modeling_standin.py").write_text(STANDIN_MODELING)
    saved = json.loads((out / "config.json").read_text())
    saved["auto_map"] = {"AutoModelForCausalLM": "modeling_standin.StandInForCausalLM"}
    (out / "config.json").write_text(json.dumps(saved, indent=1))
    print(json.dumps({"built": str(out), "class": "Qwen3VLForConditionalGeneration (stand-in)",
                      "parameters": sum(p.numel() for p in model.parameters())}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("family", choices=["cambrian", "qwen3vl"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lfp", action="store_true")
    parser.add_argument("--patch", type=int, default=16)
    args = parser.parse_args()
    if args.family == "qwen3vl":
        qwen3vl(args.out, args.patch)
    else:
        cambrian(args.out, args.lfp)


if __name__ == "__main__":
    main()
