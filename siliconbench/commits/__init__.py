"""A llama.cpp git checkout read with git, never checked out: commits, their build numbers and labels, the
first-parent line between two refs, release tags, a commit's files as a tar. One helper for both rooms that read
one — the worker's builds (``worker.builds.source``) and the coordinator's tags watch (``coordinator.watch.
llama_tags``) — each turning :class:`GitError` into its own error. Imports only the standard library.
"""
