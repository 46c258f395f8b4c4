"""The coordinator: everything that decides what runs where and what the numbers mean. It reads and writes
through ``storage`` and never imports the worker or an engine. One room per subsystem:

    fleet/      the hosts and the sweeps on them: sweep preview/submit/progress/cancel (sweeps), which host
                runs which job (placement), jobs put back when a worker dies (reconcile), SKU peers and
                their fleet verdict (peers), a host whose series disagree with its peers' (suspects)
    stats/      statistics that touch no database: a fresh process is one sample (significance), the
                group-sequential design (sequential)
    history/    stored results as points and series (points, load), baseline against candidate (compare),
                change points in a series' history (regressions)
    confirm/    a finding confirmed by an A/B/A/B run: what it is (plan), run on chosen workers (on_fleet)
    watch/      the regression watch: declared watches, the package index they poll, the scheduler's tick,
                the notifications outbox (notify) and its messages (messages); a new release becomes a
                campaign (watch/campaigns/: its state machine, preparing hosts, the sequential looks, the
                baseline and its hosts, the verdict)
    reads/      the dashboard's read queries (queries), their filters, the Compare page's series, estimates
    reports/    tables people publish (tables, workload_tables, quant_matrix), the export record (export),
                llama-bench interop (llamabench)

``celery_app`` is the coordinator's Celery beat process. Rooms import ``siliconbench`` and ``storage``; stats
imports no database and no broker; reports and reads import no broker (tests/house/test_import_rules.py).
"""
