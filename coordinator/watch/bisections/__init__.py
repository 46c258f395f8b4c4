"""A regression the watch confirmed between two llama.cpp tags, bisected to its commit on the fleet.

When a campaign on llama.cpp's tags (``llama_cpp: {source: DIR}``) ends with a regression of what a build's
llama-bench measures (decode_tps, prefill_tps of a generate series), ``start`` records a bisection on a host that
confirmed it: the finding's series as a sweep, the commits between the two tags (``llama_tags.commits_between``,
first-parent line). The scheduler's tick then steps it (``advance``), as it steps campaigns:

- **measuring** a step: one sweep per look of the sequential design (5, 8, 11, 15 processes a side), pinned to
  the host, every side through its build's llama-bench (``coordinator.history.bisect_sweeps``). The first step is
  the two tags themselves (the campaign measured them through the binding; a search starts only when their
  llama-bench agrees there is a regression). Each later step is a midpoint between both current ends, decided by
  ``coordinator.stats.bisection``'s rules, the ones ``siliconbench regressions bisect`` applies on one machine.
  Each sweep rotates the sides round by round (``version_order: rotate``: A B C, B C A, C A B), as the embedded
  bisection does, so drift and a round's position fall on every side alike.
- **building** a midpoint: the campaign's prepare task (``TASK_PREPARE_ENV`` with the commit's sha) goes to the
  host, which builds it from its checkout and reports on the campaign's ``campaign_hosts`` row, with the build's
  version label. A report whose label is not this commit's (a redelivered older task) is not taken for it. A
  commit that does not build is skipped, as ``git bisect skip`` does, and named.

It ends **done** with an outcome: *found* (the first bad commit: sha, subject, build number, and the effect last
good → first bad with its interval), *no regression* (the tags' llama-bench did not confirm it), or *undecided*
(a step undecided at the last look: nothing is guessed); or **failed** with why. Every step's evidence is kept
(``steps``), and each step's sweeps are stored as any sweep is, so ``compare`` and the dashboard see them.

Modules: ``start`` (a campaign's end starts one), ``steps`` (building, measuring, deciding, announcing, one tick at
a time), ``reads`` (as the CLI and the Regressions page show them).
"""

from .reads import bisection_dict, list_bisections
from .start import KEY, start
from .steps import ACTIVE, advance, advance_all, announce

__all__ = ["ACTIVE", "KEY", "advance", "advance_all", "announce", "bisection_dict", "list_bisections", "start"]
