"""More forms of a model from its full precision: GGUF and MLX quantizations (``quantize``), importance
matrices for llama.cpp's lowest-bit types (``imatrix``), and an unquantized HF checkpoint as GGUF (``convert``).
"""
