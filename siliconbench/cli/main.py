"""The `siliconbench` console command.

Each command's module is imported when that command runs (``LazyGroup``), not at start-up: a call imports what it
runs and no other command's dependencies. `--help` and shell completion list every command, so they import all.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

import click
import typer
import typer.core
import typer.main

# Command name -> "module:attribute", in the order `--help` lists them: a function is a command, a typer.Typer a group.
COMMANDS = {
    "run": "siliconbench.cli.run:run",
    "results": "siliconbench.cli.results:results",
    "dashboard": "siliconbench.cli.dashboard:dashboard",
    "worker": "siliconbench.cli.worker:worker_app",  # `worker` joins the fleet; `worker install|uninstall`
    "submit": "siliconbench.cli.fleet:submit",
    "status": "siliconbench.cli.fleet:status",
    "cancel": "siliconbench.cli.fleet:cancel",
    "workers": "siliconbench.cli.fleet:workers",
    "reconcile": "siliconbench.cli.fleet:reconcile",
    "models": "siliconbench.cli.models:app",
    "db": "siliconbench.cli.db:app",
    # Engine versions and regressions.
    "compare": "siliconbench.cli.compare:compare",
    "confirm": "siliconbench.cli.confirm:confirm",
    "export": "siliconbench.cli.llamabench:export",
    "regressions": "siliconbench.cli.bisect:regressions_app",
    "import-llama-bench": "siliconbench.cli.llamabench:import_llama_bench",
    "env": "siliconbench.cli.env:app",
    # What a worker here would see, and what to fix.
    "doctor": "siliconbench.cli.doctor:doctor",
    # The regression watch: its clock, and the watches.
    "scheduler": "siliconbench.cli.scheduler:scheduler",
    "watch": "siliconbench.cli.watch:app",
}


def _load(name: str, target: str) -> click.Command:
    module, attribute = target.split(":")
    obj = getattr(importlib.import_module(module), attribute)
    if isinstance(obj, typer.Typer):
        group = typer.main.get_group(obj)
        group.name = name
        return group
    one = typer.Typer(add_completion=False)
    one.command(name)(obj)
    return typer.main.get_command(one)


class _Commands(MutableMapping):
    """The group's commands by name: every name known at once, each command built on first access."""

    def __init__(self, targets: dict[str, str]) -> None:
        self._targets = dict(targets)
        self._built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            self._built[name] = _load(name, self._targets[name])  # KeyError for an unknown name, as a dict
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._targets.setdefault(name, "")
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._targets[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)


class LazyGroup(typer.core.TyperGroup):
    def __init__(self, **attrs) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(COMMANDS)


app = typer.Typer(
    cls=LazyGroup,
    help="Benchmark llama.cpp (Metal) against MLX on your models, quantizations and prompt lengths.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _root() -> None:  # a group needs a callback for typer to build it as one; the help is the Typer's
    pass


if __name__ == "__main__":
    app()
