"""A regression the watch confirmed between two llama.cpp tags, bisected to its commit on the fleet.

When a campaign on llama.cpp's tags (``llama_cpp: {source: DIR}``) ends with a regression of what a build's
llama-bench measures (decode_tps, prefill_tps of a generate series), ``start`` records a bisection on a host that
confirmed it: the finding's series as a sweep (every engine option of it), the commits between the two tags
(``llama_tags.commits_between``, first-parent line). The scheduler's tick then drives it (``steps.advance``):
the search itself is ``siliconbench.coordinator.bisection.search``, the state machine ``siliconbench regressions bisect``
runs on one machine, kept in the same ``bisections`` table (runner ``fleet``).

It ends **done** with the search's outcome — *found* (confirmed by a re-measurement of the last good and first bad
commits), *ambiguous* (the suspects listed), *equivalent* / *improvement* / *inconclusive* (with why; "not
reproduced through llama-bench" when the campaign's binding saw what the tags' llama-bench does not) — or
**failed** with why. Every step's evidence is kept, and each look's sweep is stored as any sweep is.

Modules: ``start`` (a campaign's end starts one), ``steps`` (building, measuring, announcing; a tick takes steps until
one sends work or waits).
Reads: ``siliconbench.coordinator.bisection.record.list_bisections``.
"""

from siliconbench.coordinator.bisection.record import bisection_dict, list_bisections

from .start import KEY, start
from .steps import ACTIVE, advance, advance_all, announce

__all__ = ["ACTIVE", "KEY", "advance", "advance_all", "announce", "bisection_dict", "list_bisections", "start"]
