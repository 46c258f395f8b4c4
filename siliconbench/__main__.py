"""`python -m siliconbench`: the `siliconbench` command."""

from siliconbench.cli.main import app

app(prog_name="siliconbench")
