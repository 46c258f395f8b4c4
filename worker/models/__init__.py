"""Models made or found locally, with no model hub: `tiny.make_tiny`, `smollm2.add_smollm2`."""
