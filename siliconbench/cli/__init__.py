"""The `siliconbench` command: thin verbs over the plain functions of the worker, the coordinator and the
embedded run; a composition above all of them (the contract in ``siliconbench/`` never imports it).

Each verb imports what it runs inside its own body: every verb's dependencies at module level would cost
every command, `--help` and shell completion included, ~0.7 s more at start-up (1.0 s -> 1.7 s to import
the command here, measured on the 2-core VM). Those local imports carry the tag ``# verb-local``.
"""
