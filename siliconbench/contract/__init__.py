"""siliconbench's shared contract (``siliconbench.contract``): job spec, result record, metric registry, settings.

Both the coordinator and the worker import this package; it imports only the standard
library, pydantic and PyYAML, so a worker host never pulls in a database or a dashboard.
"""
