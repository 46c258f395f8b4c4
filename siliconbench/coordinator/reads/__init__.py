"""The dashboard's reads, one function per thing a page shows (``queries``), the Compare page's filters as
SQL conditions (``filters``) and its series (``compare_series``), and a planned sweep's duration estimate
(``estimates``). The Regressions page's history comes from ``history``. May import: reports, history,
siliconbench, storage; never the broker.
"""
