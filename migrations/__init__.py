"""Alembic migrations of the coordinator's database (located by coordinator.database.alembic_config)."""
