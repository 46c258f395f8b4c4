"""A campaign: a new release of an engine benchmarked on the fleet against its baseline. Its state machine
driven by the watch's tick (``state``), hosts preparing the candidate's environment (``prepare``), the
baseline version and target hosts (``baselines``), one sweep per look of the sequential design
(``looks``), and the end: suspects, each series' fleet verdict, findings and notifications (``verdicts``).
May import what the watch may, and the watch's notify, messages and package_index.
"""
