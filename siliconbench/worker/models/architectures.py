"""The same network under two names: Hugging Face's ``model_type`` (config.json, what mlx-lm loads) and llama.cpp's
architecture (a GGUF's ``general.architecture``), for the families both engines run.

What makes two forms one model is their shape (``facts.FormFacts.shape``: layers, heads, KV heads, head size,
vocabulary, expert counts); the names are informational, read through this table so a model's family is recorded
under one name whichever form came first. Each entry is tested against the installed gguf package's architectures
and mlx-lm's model modules (tests/models/test_architectures.py). A ``model_type`` missing here keeps its own name.
"""

from __future__ import annotations

# HF model_type -> llama.cpp architecture (convert_hf_to_gguf.py's choice for that family)
LLAMA_CPP_ARCH = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",  # llama.cpp runs Mixtral as llama with experts (expert_count in the GGUF)
    "qwen2": "qwen2",
    "qwen2_moe": "qwen2moe",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3moe",
    "qwen3_next": "qwen3next",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "cohere": "command-r",
    "cohere2": "cohere2",
    "phi3": "phi3",
    "starcoder2": "starcoder2",
    "deepseek_v2": "deepseek2",
    "deepseek_v3": "deepseek2",
    "gpt_oss": "gpt-oss",
    "olmo2": "olmo2",
    "olmoe": "olmoe",
    "granite": "granite",
    "granitemoe": "granitemoe",
    "internlm2": "internlm2",
    "exaone": "exaone",
    "glm4": "glm4",
    "glm4_moe": "glm4moe",
    "smollm3": "smollm3",
    "minicpm": "minicpm",
    "stablelm": "stablelm",
    "ernie4_5": "ernie4_5",
    "ernie4_5_moe": "ernie4_5-moe",
    "bailing_moe": "bailingmoe",
    "lfm2": "lfm2",
    "dots1": "dots1",
    "llama4": "llama4",
}


def llama_cpp_arch(name: str) -> str:
    """The llama.cpp architecture of a model_type (or of a GGUF architecture: itself)."""
    return LLAMA_CPP_ARCH.get(name, name)
