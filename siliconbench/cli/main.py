"""The `siliconbench` console command."""

from __future__ import annotations

import typer

from . import db, fleet, models, worker
from .dashboard import dashboard
from .results import results
from .run import run

app = typer.Typer(
    help="Benchmark llama.cpp (Metal) against MLX on your models, quantizations and prompt lengths.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.command()(run)
app.command()(results)
app.command()(dashboard)
app.add_typer(worker.worker_app, name="worker")  # `worker` joins the fleet; `worker install|uninstall`
for verb in (fleet.submit, fleet.status, fleet.cancel, fleet.workers, fleet.reconcile):
    app.command()(verb)
app.add_typer(models.app, name="models")
app.add_typer(db.app, name="db")
# Engine versions and regressions.
from . import compare as _compare, confirm as _confirm, env as _env, llamabench as _llamabench  # noqa: E402

for verb in (_compare.compare, _confirm.confirm, _llamabench.export):
    app.command()(verb)
from . import bisect as _bisect  # noqa: E402

regressions_app = typer.Typer(no_args_is_help=False)
regressions_app.callback(invoke_without_command=True)(_compare.regressions)
regressions_app.command("bisect")(_bisect.bisect)
regressions_app.command("bisections")(_bisect.bisections)
app.add_typer(regressions_app, name="regressions")
app.command("import-llama-bench")(_llamabench.import_llama_bench)
app.add_typer(_env.app, name="env")
# What a worker here would see, and what to fix.
from .doctor import doctor as _doctor  # noqa: E402

app.command()(_doctor)
# The regression watch's clock.
from .scheduler import scheduler as _scheduler  # noqa: E402

app.command()(_scheduler)
# The regression watch.
from . import watch as _watch  # noqa: E402

app.add_typer(_watch.app, name="watch")

if __name__ == "__main__":
    app()
