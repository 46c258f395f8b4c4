"""Alembic migrations of the coordinator's database (located by storage.database.alembic_config)."""
