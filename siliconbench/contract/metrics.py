"""The metric registry: the one written definition of every metric's timed region, unit and direction.

Every figure siliconbench records is named here. Reports, exports, comparisons and the dashboard look
metrics up by name instead of hard-coding units or which way is better.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: Literal["higher", "lower"]
    # One sample per measured repetition, or one value per job; the server and multi-process workloads also
    # keep one sample per request, per inter-token gap, per process or per text window (see Sample).
    scope: Literal["repetition", "job", "request", "gap", "process", "window"]
    region: str  # what the timed region contains, in one paragraph
    # How samples combine beyond mean/median/spread: "count" samples add up (failed requests over the restarts), so
    # their summary has a total; a rate, a share, a time or a size has none (a sum of percentages means nothing).
    kind: Literal["count", "measure"] = "measure"

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


_DEFS = [
    Metric(
        "prefill_tps",
        "tokens/s",
        "higher",
        "repetition",
        "n_prompt / prefill time. Prefill time runs from handing the engine the prompt's token ids (synthetic ids, "
        "no BOS: no tokenization exists to include) until the last prompt position's logits are computed and "
        "synchronized, after n_depth untimed tokens. llama.cpp: llama_decode of the prompt in n_batch chunks "
        "(llama_batch_get_one, logits of the last position only) + llama_synchronize — the region of llama-bench's "
        "test_prompt, so prefill_tps at pN dD = llama-bench ppN @ dD. MLX: the prompt but its last token through the "
        "model in prefill_step_size chunks with mx.eval of the KV cache, as mlx_lm's generate_step, then the last "
        "token with mx.eval of its logits. Excludes choosing the first token (see ttft_ms). A llama.cpp build measured "
        "through its own llama-bench (engine_options.driver 'llama-bench': its llama.h matches no binding) reports "
        "llama-bench's ppN @ dD itself, one value per repetition.",
    ),
    Metric(
        "decode_tps",
        "tokens/s",
        "higher",
        "repetition",
        "n_gen / decode time. Decode time covers n_gen single-token forward passes after the first token, each "
        "followed by a greedy argmax choosing the next token id; EOS is ignored, so exactly n_gen tokens are decoded; "
        "no detokenization. llama.cpp: llama-bench's test_gen loop (llama_decode of a preallocated one-token batch + "
        "llama_synchronize), each step choosing its token as engine_options.sampling (recorded) says: 'backend' (the "
        "default where the build can and the layers run on a GPU) — llama.cpp's greedy sampler attached to the context (llama_set_sampler), "
        "so the argmax runs in the step's own graph and only the id comes back, no logits copied (as MLX's argmax on "
        "the device, and llama-server --backend-sampling); 'host' (the default on a CPU, where the logits are in "
        "host memory already and numpy is cheaper than ggml's argmax in the graph) — numpy's argmax over the logits "
        "llama.cpp copies back. llama-bench copies the logits and samples nothing (random tokens), so decode_tps at pN gM dD "
        "= llama-bench tgM @ d(D+N) less the argmax, plus the logits copy that backend sampling skips "
        "(benchmarks/decode_overhead.py measures the time outside the engine; engine_decode_tps, beside it, is "
        "llama.cpp's own count of the same steps). MLX: mlx_lm's generate_step "
        "pipelining (step i+1 queued with mx.async_eval before step i is read), mx.argmax on the device; "
        "mlx_lm.benchmark's generation_tps divides G tokens by G - 1 decode steps, so decode_tps = generation_tps "
        "x (G-1)/G. A llama.cpp build measured through its own llama-bench (engine_options.driver 'llama-bench') "
        "reports llama-bench's tgM @ d(D+N) itself (random tokens, no argmax), one value per repetition. A "
        "mixture of experts reads only its routed experts per token, so its decode_tps is that of its active "
        "parameters (the roofline counts them: decode_bandwidth_pct), and which experts run depends on the tokens.",
    ),
    Metric(
        "decode_bandwidth_pct",
        "%",
        "higher",
        "repetition",
        "The roofline beside decode_tps: decode_tps x bytes per token / the host's memory bandwidth, in percent. "
        "Bytes per token = every weight tensor a decode step reads, from the files' tensor tables (an untied input "
        "embedding counts one row; a mixture of experts' routed expert tensors count experts_used / experts of their "
        "bytes, both counts read from the files and recorded in extra.roofline.experts: a token reads the shared "
        "weights, the router and only the experts it is routed to, so its bound is the active parameters', not the "
        "total's) + K and V of every layer at the mean decode position (depth + prompt + "
        "(gen-1)/2) in the KV cache's dtype. The bandwidth is the chip's published unified-memory figure where "
        "siliconbench/worker/measure/roofline.py's sourced table knows it, else a streaming-read probe on the engines' threads "
        "measured on the host (cached a day only if the machine was quiet while it ran, and not tried again for "
        "10 minutes after a busy one; with no quiet probe the metric is not recorded); the result's "
        "extra.roofline says which, with both figures. Over 100 % is flagged 'bound exceeded' "
        "(extra.roofline.exceeded: the weights fit a cache, or the probe is wrong) and the probe is taken again. "
        "No llama-bench or mlx-lm equivalent.",
    ),
    Metric(
        "ttft_ms",
        "ms",
        "lower",
        "repetition",
        "Time to first token: from handing the engine the prompt's token ids until the first generated token id is "
        "on the host (prefill time + one greedy choice: llama.cpp's, in the prefill's graph, where it samples on the "
        "backend; numpy's argmax over the copied logits where on the host). Tokenization is excluded (none exists). n_prompt / ttft is "
        "mlx_lm's prompt_tps less one thing: mlx_lm's generate_step queues the second decode step before it hands "
        "out the first token, and on an in-order stream (the CPU build) that step is computed inside its prompt "
        "time; ours ends at the first token, so n_prompt / ttft reads ~1 decode step faster (3-4% at p512 here).",
    ),
    Metric(
        "engine_prefill_tps",
        "tokens/s",
        "higher",
        "repetition",
        "llama.cpp's own perf counters for the same prefill: n_p_eval / t_p_eval_ms, read after "
        "llama_synchronize and reset before each repetition. Absent for MLX, which keeps no such counters.",
    ),
    Metric(
        "engine_decode_tps",
        "tokens/s",
        "higher",
        "repetition",
        "llama.cpp's own perf counters for the same decode steps: n_eval / t_eval_ms (synchronized, reset per "
        "repetition). It times llama_decode to llama_synchronize (the backend sampler's argmax included, where it "
        "samples there), not the validation before it nor the loop between steps that decode_tps includes.",
    ),
    Metric(
        "mlx_peak_memory_bytes",
        "bytes",
        "lower",
        "repetition",
        "MLX allocator peak (mx.get_peak_memory) during one repetition, reset before it. MLX only.",
    ),
    Metric(
        "mlx_active_memory_bytes",
        "bytes",
        "lower",
        "repetition",
        "MLX allocator memory in use (mx.get_active_memory) at the end of a repetition: the weights and the KV "
        "cache still held. On a Mac this is Metal memory in unified memory. MLX only.",
    ),
    Metric(
        "mlx_cache_memory_bytes",
        "bytes",
        "lower",
        "repetition",
        "MLX's buffer cache (mx.get_cache_memory) at the end of a repetition: freed buffers kept for reuse, held "
        "by the process but not in use. MLX only.",
    ),
    Metric(
        "load_s",
        "s",
        "lower",
        "job",
        "Model load: from the call that opens the model file until the weights are resident and the engine "
        "can evaluate (llama.cpp: Llama(...) incl. context creation; MLX: mlx_lm.load + mx.eval of every "
        "parameter, since MLX loads lazily). Process start-up and imports are excluded.",
    ),
    Metric(
        "peak_memory_bytes",
        "bytes",
        "lower",
        "job",
        "Peak resident set size of the job's own fresh child process over the whole job: interpreter, engine "
        "import, model load, warmup and all repetitions. Linux: VmHWM of the address space made at exec "
        "(getrusage's ru_maxrss would carry the parent's peak across fork and exec); macOS: ru_maxrss (not yet "
        "checked there for the same inheritance). A mixture of experts holds every expert, so its memory is its total "
        "parameters', though a token reads only the active ones. Not recorded for restart, concurrent, serve and "
        "multiprocess jobs, whose child only drives other processes (see their own metrics).",
    ),
    Metric(
        "baseline_memory_bytes",
        "bytes",
        "lower",
        "job",
        "Resident set size of the child process after importing the engine and before loading the model; "
        "peak_memory_bytes minus this is what the model and its runs added.",
    ),
    Metric(
        "peak_footprint_bytes",
        "bytes",
        "lower",
        "job",
        "macOS only: the lifetime peak of the child process's phys_footprint (proc_pid_rusage RUSAGE_INFO_V4, "
        "ri_lifetime_max_phys_footprint), the figure Activity Monitor and the memory-pressure killer use. Unlike "
        "RSS it counts Metal (IOAccelerator) allocations in unified memory and not clean mmapped model pages, "
        "so it is the one that compares llama.cpp and MLX on a Mac. Recorded beside peak_memory_bytes (RSS).",
    ),
    Metric(
        "baseline_footprint_bytes",
        "bytes",
        "lower",
        "job",
        "macOS only: phys_footprint of the child after importing the engine, before loading the model.",
    ),
]

WORKLOAD_DEFS = [
    # ---- swap: page-cache state of model B's files is requested per job (params.cache) and measured per swap.
    # "cold": before each swap, B's files are dropped from the OS page cache with posix_fadvise(POSIX_FADV_DONTNEED)
    # (Linux; on macOS no unprivileged call exists, so a "cold" swap there is whatever the cache holds);
    # "warm": B's files are read once in full just before. Either way, mincore() then measures which fraction of
    # B's file pages is resident, recorded as page_cache_resident_fraction: the state is measured, not assumed.
    Metric(
        "swap_unload_s",
        "s",
        "lower",
        "repetition",
        "Unload of model A, loaded and warm (one prefill + decode done): llama.cpp Llama.close(); MLX: the model "
        "and cache dropped, gc.collect(), mx.clear_cache(). Ends when the call returns.",
    ),
    Metric(
        "swap_load_s",
        "s",
        "lower",
        "repetition",
        "Load of model B right after the unload, the same region as load_s (file open to weights resident and the "
        "engine able to evaluate; llama.cpp incl. context creation with use_mmap = params.mmap).",
    ),
    Metric(
        "swap_first_token_ms",
        "ms",
        "lower",
        "repetition",
        "First token of B: its prompt_tokens synthetic ids prefilled and the greedy token on the host, right after "
        "B's load (the ttft_ms region, on a model that has not run yet).",
    ),
    Metric(
        "swap_total_s",
        "s",
        "lower",
        "repetition",
        "One wall clock over unload A + load B + first token of B (not the sum of the three rounded parts).",
    ),
    Metric(
        "page_cache_resident_fraction",
        "fraction",
        "higher",
        "repetition",
        "Measured condition, not a score: the fraction of model B's file pages in the OS page cache (mincore over "
        "a fresh read-only mapping of each file) just before the swap's timed region, after the cold/warm step.",
    ),
    Metric(
        "swap_rss_after_unload_bytes",
        "bytes",
        "lower",
        "repetition",
        "Resident set size of the job's process right after unloading A. MLX keeps freed memory in the process "
        "(its active-memory counter reads 0 while RSS stays high): this is the RSS, not the allocator's counter.",
    ),
    # ---- restart: the engine's own server process (python -m llama_cpp.server / mlx_lm.server) on 127.0.0.1.
    Metric(
        "restart_ready_s",
        "s",
        "lower",
        "repetition",
        "Process start (Popen returned) until the server answered a 1-token completion (POST /v1/completions, "
        "non-streaming, retried every 20 ms while the port refuses): the model is loaded. Every server loads it at "
        "start-up: llama-server and llama_cpp.server before they answer a completion; mlx_lm.server binds at once and loads in a thread, its "
        "/health answering 200 during the load (so /health is not the probe) and a completion waiting for it. "
        "Includes that one 1-token forward pass.",
    ),
    Metric(
        "restart_first_token_s",
        "s",
        "lower",
        "repetition",
        "Process start to the first streamed token of a full-size completion request (prompt_tokens, gen_tokens; "
        "the same body for both servers) sent as soon as the server was ready. "
        "With the background client on, that request can queue behind client requests that reached the server "
        "while it started (as in production); client_interval_ms: null measures start-up alone.",
    ),
    Metric(
        "restart_warm_ttft_ms",
        "ms",
        "lower",
        "repetition",
        "Time to first streamed token of the next request, right after the first: the same server, warm.",
    ),
    Metric(
        "restart_stop_s",
        "s",
        "lower",
        "repetition",
        "SIGTERM to the server's process group until no process of the group is left (SIGKILL after "
        "params.stop_timeout_s; such stops are counted in extra.unclean_stops). llama-server (the tree the pinned "
        "llama-cpp-python vendors) at times does not exit on SIGTERM while a request sent during the stop is in "
        "flight (its task loop ends, that request's handler waits and the HTTP server's join never returns): "
        "such a stop reads stop_timeout_s and is counted unclean.",
    ),
    Metric(
        "restart_failed_requests",
        "requests",
        "lower",
        "repetition",
        "Requests of the background client (one every params.client_interval_ms, streaming, 1 token) that failed "
        "(refused, reset, timed out, not HTTP 200, no token) among those sent from the previous server's stop "
        "signal (or this one's spawn, for the first start) until this server's first token.",
        kind="count",
    ),
    Metric(
        "restart_requests",
        "requests",
        "lower",
        "repetition",
        "Requests the background client sent in that window (failed ones included).",
        kind="count",
    ),
    # ---- concurrent: N streaming clients at once against one server, one burst per repetition.
    Metric(
        "request_ttft_ms",
        "ms",
        "lower",
        "request",
        "One request of a burst: from sending the HTTP request until its first streamed token chunk arrives. "
        "Includes waiting for the other clients: llama-server gives each client a slot (--parallel = clients) and "
        "decodes them in one continuous batch; llama_cpp.server runs one request at a time; mlx_lm.server "
        "batches (requests carry no seed) and adds new requests to the running batch; extra.batching says how "
        "the server was configured and extra.observed whether the streams overlapped.",
    ),
    Metric(
        "request_e2e_ms",
        "ms",
        "lower",
        "request",
        "One request: from sending it until its stream ends ([DONE]).",
    ),
    Metric(
        "request_itl_ms",
        "ms",
        "lower",
        "gap",
        "Inter-token latency: time between two consecutive streamed token chunks of one request; every gap of "
        "every request of the job is one sample, so its percentiles pool all requests (as vLLM's ITL does). "
        "Both servers hold back a token whose text ends in an incomplete UTF-8 sequence and send it with the "
        "next one: such a pair is one chunk, hence one gap fewer.",
    ),
    Metric(
        "aggregate_output_tps",
        "tokens/s",
        "higher",
        "repetition",
        "Output tokens of all of a burst's successful requests / (last stream end - first request sent). Tokens "
        "as the server counts them, not stream chunks: llama-server's and mlx_lm.server's usage report; llama_cpp.server sends none "
        "in a stream, and its finish_reason 'length' means exactly max_tokens (extra.token_count_source).",
    ),
    Metric(
        "request_errors",
        "requests",
        "lower",
        "repetition",
        "Requests of the burst that failed (connection error, not HTTP 200, timeout, or fewer tokens than asked, "
        "counted as in aggregate_output_tps).",
        kind="count",
    ),
    Metric(
        "server_peak_footprint_bytes",
        "bytes",
        "lower",
        "repetition",
        "macOS only: the peak of the server process tree's summed phys_footprint, sampled with "
        "server_peak_rss_bytes (Metal allocations in unified memory included, clean mapped GGUF pages not): "
        "what the server costs a Mac.",
    ),
    Metric(
        "server_peak_rss_bytes",
        "bytes",
        "lower",
        "repetition",
        "Peak over one burst (serve: one run) of the summed RSS of the server's process tree, sampled every "
        "params.memory_interval_ms (10 ms by default) from the burst's first request to its last stream end. "
        "That is enough: the KV cache and weights only grow during a burst and stay allocated until the requests "
        "end, and one decode step takes longer than the interval (>= ~5 ms even on the fastest backend), so a "
        "peak lasts several samples; server_hwm_rss_bytes cross-checks it where the OS keeps a high-water mark.",
    ),
    Metric(
        "server_hwm_rss_bytes",
        "bytes",
        "lower",
        "repetition",
        "Linux only: the kernel's own peak RSS (VmHWM) of each server process over the burst, reset at its start "
        "by writing 5 to /proc/PID/clear_refs, summed over the tree (an exact peak per process, not sampled).",
    ),
    # ---- serve: requests from a prompt source at a request rate, vLLM `bench serve`'s metrics and arithmetic
    # (vllm/benchmarks/serve.py calculate_metrics). One run per repetition: per-request samples and one run sample.
    Metric(
        "serve_steady_j_per_token",
        "J/token",
        "lower",
        "repetition",
        "GPU energy per output token in a serving run's steady state, ML.ENERGY's window: from the first moment as "
        "many requests are in flight as the server runs at once (its batch: llama-server's slots, mlx_lm.server's "
        "decode_concurrency, within max_concurrency and num_requests) until, after the last request was sent, fewer "
        "are; ramp-up and drain left out. The board's energy counter (NVML) is sampled every 20 ms through the run "
        "and read at the window's edges by interpolation; tokens are the text chunks that arrived inside the window, "
        "each worth its request's output tokens / its chunks. Only on a GPU host, and only where the window lasts "
        "0.5 s or more (a low rate never fills the server: no value).",
    ),
    Metric(
        "serve_steady_gpu_watts",
        "W",
        "lower",
        "repetition",
        "The GPU board's mean power over the serve_steady_j_per_token window.",
    ),
    Metric(
        "serve_ttft_ms",
        "ms",
        "lower",
        "request",
        "Time to first token of one successful request: from sending it (its scheduled arrival, or later where "
        "max_concurrency held it back) until the first streamed chunk that carries text arrives (a role-only chat "
        "delta is not a token). Queueing in the server included. vLLM: TTFT (Mean/Median/P99 TTFT (ms)).",
    ),
    Metric(
        "serve_tpot_ms",
        "ms",
        "lower",
        "request",
        "Time per output token after the first, of one successful request with more than one output token: "
        "(serve_e2el_ms - serve_ttft_ms) / (output tokens - 1), output tokens as the server counted them "
        "(usage.completion_tokens). vLLM: TPOT (Time per Output Token, excl. 1st token).",
    ),
    Metric(
        "serve_itl_ms",
        "ms",
        "lower",
        "gap",
        "Inter-token latency: the time between two consecutive streamed chunks that carry text, of any successful "
        "request; every gap of the run is one sample (vLLM pools them the same way). A chunk can hold two tokens "
        "(both servers hold back a token ending in an incomplete UTF-8 sequence). Times are taken as the client reads "
        "each chunk, as vLLM's client takes them: where tokens come faster than a busy client reads (a tiny model, "
        "many requests on few cores) several chunks are read at once and ITL and TPOT read low. vLLM: ITL.",
    ),
    Metric(
        "serve_e2el_ms",
        "ms",
        "lower",
        "request",
        "End-to-end latency of one successful request: from sending it until its last streamed data chunk (the usage "
        "report, where the server sends one after the text) arrives. vLLM: E2EL.",
    ),
    Metric(
        "serve_prompt_tokens",
        "tokens",
        "lower",
        "request",
        "Prompt tokens of one successful request as the server counted them (usage.prompt_tokens): after its chat "
        "template, so the same messages count differently on two servers whose templates differ.",
        kind="count",
    ),
    Metric(
        "serve_output_tokens",
        "tokens",
        "higher",
        "request",
        "Output tokens of one successful request as the server counted them (usage.completion_tokens).",
        kind="count",
    ),
    Metric(
        "serve_cached_prompt_tokens",
        "tokens",
        "higher",
        "request",
        "Prompt tokens of one successful request the server took from its prompt cache instead of computing them "
        "(usage.prompt_tokens_details.cached_tokens: llama-server's cached prompt of the slot it chose, mlx_lm.server's "
        "nearest entry of its LRU prompt cache). Absent where the server does not report it (llama_cpp.server).",
        kind="count",
    ),
    Metric(
        "serve_prompt_reuse_pct",
        "%",
        "higher",
        "repetition",
        "One run: 100 x the successful requests' cached prompt tokens / their prompt tokens. Multi-turn replays reuse "
        "each conversation's history where the server's cache still holds it.",
    ),
    Metric(
        "serve_request_throughput",
        "requests/s",
        "higher",
        "repetition",
        "One run: successful requests / duration. Duration runs from the run's start (the first arrival's schedule "
        "origin) until the last request ends. vLLM: Request throughput (req/s).",
    ),
    Metric(
        "serve_request_goodput",
        "requests/s",
        "higher",
        "repetition",
        "One run: successful requests that met every objective of params.slo (TTFT, TPOT and E2EL each at most its "
        "objective; a one-token answer's TPOT counts as 0) / duration. Only with objectives. vLLM: Request goodput "
        "(--goodput).",
    ),
    Metric(
        "serve_output_throughput",
        "tokens/s",
        "higher",
        "repetition",
        "One run: output tokens of the successful requests (usage) / duration. vLLM: Output token throughput.",
    ),
    Metric(
        "serve_total_token_throughput",
        "tokens/s",
        "higher",
        "repetition",
        "One run: (prompt + output tokens of the successful requests, usage) / duration. vLLM: Total token throughput.",
    ),
    Metric(
        "serve_sent_rate",
        "requests/s",
        "higher",
        "repetition",
        "One run: units sent / time from the run's start to the last unit's first request, a unit being what "
        "params.request_rate counts — a request, or with multi_turn a conversation: the rate achieved beside the rate "
        "asked. Below it where max_concurrency or the client held units back (serve_send_delay_ms tells the client's "
        "own lag); a server that cannot keep up shows instead as serve_request_throughput below the rate and TTFT "
        "growing. Not with rate 'inf'.",
    ),
    Metric(
        "serve_sent_turn_rate",
        "requests/s",
        "higher",
        "repetition",
        "multi_turn only. One run: requests (turns) sent / time from the run's start to the last one sent; each "
        "conversation's turns follow one another, so this exceeds serve_sent_rate (conversations/s) by about the "
        "turns per conversation.",
    ),
    Metric(
        "serve_conversation_throughput",
        "conversations/s",
        "higher",
        "repetition",
        "multi_turn only. One run: conversations whose every turn succeeded / duration (as "
        "serve_request_throughput, which counts each turn).",
    ),
    Metric(
        "serve_send_delay_ms",
        "ms",
        "lower",
        "request",
        "How late the client began one unit (a request, or a conversation) against its scheduled arrival: the "
        "client's own lag (thread start, a sleep that overshot, a busy host), before any max_concurrency wait, as "
        "GuideLLM's scheduler metrics. A run whose p99 exceeds 10 % of the mean gap between arrivals (at least "
        "10 ms) is flagged extra.runs[].client_behind: its latencies are then partly the client's.",
    ),
    Metric(
        "serve_server_prompt_ms",
        "ms",
        "lower",
        "request",
        "The server's own prompt-processing time for one successful request (llama-server's timings.prompt_ms: its "
        "uncached prompt tokens through the model, queueing excluded), beside the client's serve_ttft_ms. Absent "
        "where the server gives none (mlx_lm.server, llama_cpp.server).",
    ),
    Metric(
        "serve_server_decode_ms",
        "ms",
        "lower",
        "request",
        "The server's own generation time for one successful request (llama-server's timings.predicted_ms), beside "
        "the client's serve_e2el_ms - serve_ttft_ms. Absent where the server gives none.",
    ),
    Metric(
        "serve_failed_requests",
        "requests",
        "lower",
        "repetition",
        "One run: requests that failed (connection error, not HTTP 200 — the server's message kept in "
        "extra.runs — no text streamed, a stream that ended without [DONE], or anything else raised while sending "
        "or reading it). A run whose every request failed fails the job. vLLM: Failed requests.",
        kind="count",
    ),
    # ---- long_context: a prompt of params.depth tokens, prefilled whole (full prompt reprocessing).
    # Its prefill_tps, decode_tps and ttft_ms are the generate metrics with n_prompt = depth and no depth fill.
    Metric(
        "kv_cache_bytes",
        "bytes",
        "lower",
        "repetition",
        "KV-cache memory holding the context after prefill + decode, as the engine reports it: llama.cpp "
        "llama_state_seq_get_size(ctx, 0) (K and V of the used cells plus a few KB of cell metadata; the cache "
        "dtype is llama.cpp's default F16); MLX the sum of KVCache.nbytes (its arrays, allocated in 256-token "
        "steps, in the model's activation dtype, float32 here).",
    ),
    Metric(
        "kv_cache_computed_bytes",
        "bytes",
        "lower",
        "repetition",
        "The same memory computed from the model's shape: 2 (K, V) x layers x KV heads x head_dim x tokens x "
        "bytes of the cache dtype (llama.cpp F16: 2; MLX: the dtype of its cache arrays), tokens = depth + gen.",
    ),
    # ---- a CUDA host (siliconbench/worker/platform/nvidia.py): the device's own memory and energy, read through NVML.
    Metric(
        "device_memory_peak_bytes",
        "bytes",
        "lower",
        "repetition",
        "Peak GPU memory of the job's process during one repetition (from the fresh KV cache to the last decode "
        "step), sampled every 20 ms from NVML's per-process accounting (nvmlDeviceGetComputeRunningProcesses, "
        "the figure nvidia-smi lists per process); where NVML does not list the process, the device's used memory "
        "above what it was before the model loaded (extra.device_memory.source says which). CUDA hosts only; a "
        "Mac's unified memory is peak_footprint_bytes.",
    ),
    Metric(
        "prefill_j_per_token",
        "J/token",
        "lower",
        "job",
        "GPU energy per prompt token: the GPU's cumulative energy counter (nvmlDeviceGetTotalEnergyConsumption, "
        "the whole board) read at the edges of one window of at least 1 s in which the job's last prefill (its "
        "prompt after its depth) is repeated back to back, the cache rewound to the depth before each; the window's "
        "joules / (repeats x n_prompt). A window, not the timed region: the counter moves in steps of ~10-100 ms "
        "and a p512 prefill lasts ~12 ms on an H100. Run after the timed repetitions, so no timed region holds a "
        "counter read. Includes whatever else the GPU did meanwhile (the busy gate checks the CPU, not the GPU). "
        "No engine's own tool reports it.",
    ),
    Metric(
        "decode_j_per_token",
        "J/token",
        "lower",
        "job",
        "GPU energy per generated token: as prefill_j_per_token, over one window of at least 1 s in which the job's "
        "n_gen decode steps are repeated from the same position (the cache rewound to depth + prompt before each); "
        "the window's joules / (repeats x n_gen).",
    ),
    Metric("decode_tokens_per_j", "tokens/J", "higher", "job", "1 / decode_j_per_token: tokens per joule."),
    Metric(
        "prefill_gpu_watts",
        "W",
        "lower",
        "job",
        "The GPU board's mean power over the prefill_j_per_token window: its joules / its seconds.",
    ),
    Metric(
        "decode_gpu_watts",
        "W",
        "lower",
        "job",
        "The GPU board's mean power over the decode_j_per_token window: its joules / its seconds.",
    ),
    # ---- perplexity: params.windows non-overlapping windows of params.window_tokens tokens of the shipped text.
    Metric(
        "window_nll",
        "nats/token",
        "lower",
        "window",
        "Mean negative log-likelihood of one window's scored tokens, each predicted from all the window's tokens "
        "before it, from an empty cache (log-softmax of the engine's float32 logits, in float64). Which tokens, "
        "by params.mode (0-based, n = window_tokens): llama-perplexity (default) — BOS first where the vocab adds "
        "BOS (the text tokenized with BOS, each window's first token replaced by it), tokens n/2+1..n-1 scored "
        "(n - n/2 - 1 a window), as llama-perplexity's default --ppl path; all-tokens — no BOS, tokens 1..n-1 "
        "(records without params.mode). Both engines score the same ids (extra.tokens_sha256 lets one check).",
    ),
    Metric(
        "perplexity",
        "ppl",
        "lower",
        "job",
        "exp(total NLL / scored tokens) over all windows. Mode llama-perplexity with offset_tokens 0 is "
        "llama-perplexity's final estimate (`llama-perplexity -f TEXT -c window_tokens --chunks windows`: the same "
        "chunks, BOS handling and second-half scoring; benchmarks/fidelity.py compares the two). Mode all-tokens "
        "is mlx_lm.perplexity's definition (eval_ppl: windows of --sequence-length tokens, tokens 2..L of each "
        "scored, no BOS put at window starts) applied to this text's windows — mlx_lm.perplexity itself samples "
        "a Hugging Face dataset, so it is compared by calling its eval_ppl on our ids. Computed in the worker "
        "because it is the metric's definition, not a statistic of repetitions.",
    ),
    Metric(
        "file_size_bytes",
        "bytes",
        "lower",
        "job",
        "Size on disk of the artifact evaluated (a GGUF file, or an MLX directory's files), beside its perplexity "
        "as in the reference comparison's Format | Perplexity | File size table.",
    ),
    # ---- KL-divergence (perplexity with params.kl_divergence): the same windows, against full precision.
    Metric(
        "window_kld",
        "nats",
        "lower",
        "window",
        "Mean KL-divergence of one window's scored positions against the own engine's base (see kld_mean).",
    ),
    Metric(
        "kld_mean",
        "nats",
        "lower",
        "job",
        "Mean over every scored position of KL(base || model) = sum over the vocabulary of p_base x (log p_base - "
        "log p_model), base = the model's full-precision form on the job's own engine (params.kld_bases: the "
        "highest precision both engines share, by digest), on exactly the perplexity windows' tokens. "
        "llama-perplexity --kl-divergence's arithmetic (tools/perplexity/perplexity.cpp): the base's log-probs "
        "kept as its base file keeps them (uint16 per token over [max-16, max] of the logits, float scale and "
        "minimum), only base log-probs above -16 summed; = its 'Mean KLD' on the same GGUF files and "
        "--chunks windows with -b equal to the window (one window a batch, as ours; its default packs several, "
        "and Q4_K_M's 0.006819 reads 0.006824). The base is computed once per host, engine, digest and token set and reused.",
    ),
    Metric(
        "kld_median", "nats", "lower", "job", "Median of the per-position KLD (kld_mean), as the tool's 'Median KLD'."
    ),
    Metric(
        "kld_p90",
        "nats",
        "lower",
        "job",
        "90th percentile of the per-position KLD: the tool's '90.0% KLD' "
        "(linear between the two nearest sorted values).",
    ),
    Metric("kld_p99", "nats", "lower", "job", "99th percentile of the per-position KLD: the tool's '99.0% KLD'."),
    Metric("kld_p999", "nats", "lower", "job", "99.9th percentile of the per-position KLD: the tool's '99.9% KLD'."),
    Metric("kld_max", "nats", "lower", "job", "Largest per-position KLD: the tool's 'Maximum KLD'."),
    Metric(
        "same_top_pct",
        "%",
        "higher",
        "job",
        "Share of scored positions where the model's most likely next token is the base's (ties: the lowest id; "
        "the base's from its uint16 log-probs): the tool's 'Same top p'; extra.kld.same.same_top_count is its count. "
        "Each window is one batch, as llama-perplexity -b <window> evaluates it: the tool's default -b 2048 packs "
        "2048 / window windows into one llama_decode, whose kernels round otherwise, and near-ties flip (tiny model, "
        "40 windows of 128: Q8_0 95.198 % packed, 95.397 % one a batch, ours 95.40 %; Q4_K_M 59.246 / 59.643 / 59.64).",
    ),
    Metric(
        "cross_kld_mean",
        "nats",
        "lower",
        "job",
        "kld_mean against the other engine's full-precision form (an MLX job against the GGUF base, a llama.cpp "
        "job against the MLX one), on the same token ids: which engine's quantization is closer to one original. "
        "Needs both forms' vocabularies equal (`models add` checks the tokenizers).",
    ),
    Metric("cross_kld_p99", "nats", "lower", "job", "kld_p99 against the other engine's full-precision form."),
    Metric("cross_same_top_pct", "%", "higher", "job", "same_top_pct against the other engine's full-precision form."),
    # ---- multiprocess: params.processes engine processes, each with the model loaded, decoding at once.
    Metric(
        "mp_aggregate_decode_tps",
        "tokens/s",
        "higher",
        "repetition",
        "processes x gen_tokens / (last process's decode end - first process's decode start), one repetition: "
        "all processes get the start signal together; each prefills prompt_tokens untimed, then decodes.",
    ),
    Metric(
        "mp_process_decode_tps",
        "tokens/s",
        "higher",
        "process",
        "One process of one repetition: gen_tokens / its own decode time (the decode_tps region).",
    ),
    Metric(
        "mp_total_rss_bytes",
        "bytes",
        "lower",
        "repetition",
        "Sum of the processes' RSS right after the repetition's decode (all still loaded). Pages of an mmapped "
        "GGUF shared between processes are counted once per process here; see mp_total_pss_bytes.",
    ),
    Metric(
        "mp_total_pss_bytes",
        "bytes",
        "lower",
        "repetition",
        "Linux only: the sum of the processes' proportional set size at the same moment, which counts a page "
        "shared by k processes 1/k in each: the memory the K processes take together.",
    ),
    Metric(
        "mp_total_footprint_bytes",
        "bytes",
        "lower",
        "repetition",
        "macOS only: the sum of the processes' phys_footprint at the same moment (Metal memory included), plus "
        "the model file's pages resident in the page cache (mincore), counted once: no footprint holds clean "
        "mapped file pages. The Darwin counterpart of mp_total_pss_bytes.",
    ),
]
_DEFS += WORKLOAD_DEFS

METRICS: dict[str, Metric] = {m.name: m for m in _DEFS}

# The figures every table, chart, comparison and regression search leads with, by default: llama-bench's pp and
# tg, mlx_lm.benchmark's prompt and generation tok/s, and the time to the first token.
PREFILL_TPS, DECODE_TPS, TTFT_MS = "prefill_tps", "decode_tps", "ttft_ms"
HEADLINE = (PREFILL_TPS, DECODE_TPS, TTFT_MS)
# Metrics with one value per result, kept on the results row itself rather than as samples.
RESULT_ROW_METRICS = ("peak_memory_bytes", "load_s")
assert set(HEADLINE + RESULT_ROW_METRICS) <= set(METRICS)


def is_count(name: str) -> bool:
    """Whether a metric's samples add up to a meaningful total (see Metric.kind); unknown names do not."""
    m = METRICS.get(name)
    return m is not None and m.kind == "count"


def get(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None
