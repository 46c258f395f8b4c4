"""The house itself: the import rules, the README's commands, compose.yaml."""
