"""Models on this machine, with no model hub. A user's own model arrives here: ``add`` (one model in several
forms, proven one by digest), its ``sources`` (a GGUF file, an MLX folder, a Hugging Face repo or cache, a
URL: ``download``, ``fetch``), what its files say (``facts``), its weights' digests (``digests``), and whether
both engines tokenize alike (``tokens``). ``quants/`` makes more forms of a model (``quantize``,
``imatrix``, ``convert``); ``make/`` writes the models the project makes (``tiny``, ``synthetic``,
``smollm2``, with ``formats`` and ``tokenizer``). May import: siliconbench only.
"""
