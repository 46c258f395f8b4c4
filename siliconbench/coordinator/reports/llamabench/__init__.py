"""llama-bench interop: its JSON, JSONL, CSV and SQL output into the results store, and ours out in its JSON shape.

One llama-bench record is one test: prompt processing (``n_prompt`` > 0, ``n_gen`` = 0; its ``samples_ts``
become ``prefill_tps`` samples) or text generation (``n_prompt`` = 0; ``decode_tps``), at context depth
``n_depth``. Through ``siliconbench.coordinator.history.points``'s per-metric lengths, ``pp512`` joins the prefill series of
siliconbench jobs with a 512-token prompt at depth 0, and ``tg128 @ d512`` the decode series of jobs that
generate 128 tokens after 512 (prompt + depth). Combined tests (``-pg``: both > 0) time prompt and
generation together, which no siliconbench metric does; they are skipped and counted.

JSON and JSONL carry the raw repetitions (``samples_ts``); CSV and SQL only ``avg_ts`` / ``stddev_ts``:
those import without raw samples (their average is kept, and shown in histories) and ``compare`` calls
such rows insufficient data rather than inventing samples. An import is one sweep whose id is a digest of
the file, so importing the same file twice stores it once.

llama-bench records no host name: ``--host`` names the machine (default: this one). With ``--model`` the
records are matched to a model of the models folder by quantization (or file name), so they join that
model's series; otherwise the model is named after the file and identified by its size and parameters.
"""

from siliconbench.coordinator.reports.llamabench.exports import dumps, export_records
from siliconbench.coordinator.reports.llamabench.imports import import_file, import_records, to_results
from siliconbench.coordinator.reports.llamabench.records import FIELDS, import_level, parse, quant_of

__all__ = [
    "FIELDS",
    "dumps",
    "export_records",
    "import_file",
    "import_level",
    "import_records",
    "parse",
    "quant_of",
    "to_results",
]
