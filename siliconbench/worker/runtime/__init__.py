"""The worker process around the jobs: its Celery app and the plain functions behind each task
(``celery_app`` → ``task.handle_job``, ``prepare_env.prepare_env``), the transport no queue item can crash
(``redis_transport``), its row in the hosts table and heartbeats (``registration``), results spooled to disk
while the database is away (``spool``), outage log lines (``outages``) and ``siliconbench doctor``
(``doctor``). May import every other worker room, siliconbench and storage.
"""
