"""llama.cpp as users run it: any commit of a llama.cpp source (``source``) built once per commit and build options
into a cache, incrementally (``compile``); whether llama-cpp-python's binding can drive a build's library, read
from the headers (``header``); and a build measured through its own llama-bench where it cannot (``tool``).
May import: platform, siliconbench.
"""
