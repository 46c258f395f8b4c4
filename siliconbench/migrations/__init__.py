"""Alembic migrations of the coordinator's database (located by siliconbench.storage.database.alembic_config)."""
