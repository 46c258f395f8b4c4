"""The project's small error tree; foreign exceptions are mapped onto it at the boundary."""

from __future__ import annotations


class SiliconbenchError(Exception):
    """Base of every error siliconbench raises on purpose."""


class UserError(SiliconbenchError):
    """Bad input from the user: printed as one paragraph, exit status 2, nothing written.

    ``field`` names the offending setting (dotted path into a sweep, a CLI option, an env var);
    ``choices`` lists the valid values where there is a finite set.
    """

    def __init__(self, field: str, message: str, choices: list[str] | None = None):
        self.field = field
        self.message = message
        self.choices = list(choices or [])
        text = f"{field}: {message}"
        if self.choices:
            text += f" Valid choices: {', '.join(self.choices)}."
        super().__init__(text)


class EngineError(SiliconbenchError):
    """An engine failed while loading or running a model."""


class WorkloadError(SiliconbenchError):
    """A job's setting turned out impossible at run time (a port in use, a server never ready, a text too
    short): the job is recorded as failed with this reason and the runner goes on."""
