"""Shared storage, below both the worker and the coordinator: engines and sessions (``database``), the tables
(``tables``), the idempotent result store (``store``), job state and claims (``jobstate``) and the broker seam
(``broker``: jobs sent by task name). It imports only the contract.
"""
