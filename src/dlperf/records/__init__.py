"""Run records, torch-free: the schema, atomic storage, loading, the results layout and dlperf's own log format.

Shared by `run`/`sweep` (which write them) and `extract`, `report`, `compare`, `history` (which read them).
"""
