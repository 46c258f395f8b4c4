"""What results become for people and other tools: tables shaped like published comparisons (``tables``),
one table per workload kind (``workload_tables``), the quantization matrix (``quant_matrix``), the export
record and its CSV (``export``), llama-bench's JSON/CSV/SQL in and out (``llamabench``).
May import: siliconbench, storage; never the broker.
"""
