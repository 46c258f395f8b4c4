"""Measurements outside the engines: process-tree memory (``memory``), page-cache residency (``pagecache``),
the memory-bandwidth bound of decode (``roofline``), and the gates around each job: thermal state and power
(``thermal``), other load on the machine (``quiet``). May import: platform, models, siliconbench.
"""
