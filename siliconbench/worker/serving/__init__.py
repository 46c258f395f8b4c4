"""The engines' own OpenAI-compatible servers, run as subprocesses on 127.0.0.1 and always torn down
(``server``), and a streaming client that times each chunk (``client``). May import: engines, platform.
"""
