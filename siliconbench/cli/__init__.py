"""The `siliconbench` command: thin verbs over the coordinator's and worker's plain functions.

This subpackage is the composition root; the contract modules beside it never import it.
"""
