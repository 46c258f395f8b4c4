"""Confirmation of a finding by an interleaved A/B/A/B run: what a confirmation is, its sweep and the
comparison it ends in (``plan``), and the same run on chosen workers of the fleet (``on_fleet``; the
embedded one on this host is ``siliconbench.embedded.confirm``). May import: fleet, history, stats, siliconbench, storage.
"""
