"""Series and their history: stored results as points grouped by what makes two numbers comparable
(``points``, pure; ``load`` reads them from the store; ``selectors`` pick them by key=value terms), baseline
against candidate per series and metric (``compare``), change points over versions and the findings they
become (``regressions``).
May import: stats, siliconbench, storage.
"""
