"""A user's own model and its quantizations: models add, quantize, KL-divergence, SmolLM2 on both engines."""
