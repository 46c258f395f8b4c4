"""The engines' own OpenAI-compatible servers, run as subprocesses, and a streaming client for them."""
