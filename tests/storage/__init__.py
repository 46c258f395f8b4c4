"""Storage below worker and coordinator: migrations, the stores, summaries, retention, logins, claims, the broker seam, outages."""
