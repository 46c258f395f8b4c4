"""Quality of a quantization: how far its next-token distributions are from full precision's.

``kld`` is the arithmetic (llama-perplexity --kl-divergence's, in numpy, so one figure means the same whichever
engine produced the logits); ``bases`` keeps a full-precision model's distributions on disk, once per model,
engine and token set, so no job recomputes them; ``base_maker`` computes one in a fresh process of its engine.
Imports the contract and the engines; no database, no broker.
"""
