"""The subcommands: each one's module, imported only when the subcommand is named, and its one-line summary, which
`dlperf --help` lists without importing any of them (each subcommand's parser has the same words, cli/main.py)."""

from __future__ import annotations

# subcommand -> its module, in the order `dlperf --help` lists them
SUBCOMMANDS = {
    "run": "dlperf.cli.run_cmd",
    "sweep": "dlperf.cli.sweep_cmd",
    "report": "dlperf.cli.report_cmd",
    "extract": "dlperf.cli.extract_cmd",
    "compare": "dlperf.cli.compare_cmd",
    "history": "dlperf.cli.history_cmd",
    "export": "dlperf.cli.export_cmd",
    "env": "dlperf.cli.env_cmd",
    "peak": "dlperf.cli.peak_cmd",
    "commbench": "dlperf.cli.commbench_cmd",
    "maxbatch": "dlperf.cli.maxbatch_cmd",
    "predict": "dlperf.cli.predict_cmd",
    "references": "dlperf.cli.references_cmd",
}

SUMMARIES = {
    "run": "benchmark one case",
    "sweep": "run a YAML matrix of cases with repeats, then write the report",
    "report": "summarise results folders into report.md, summary.json, plots and report.html",
    "extract": "read other frameworks' training logs into the same report as `dlperf report`",
    "compare": "compare two results folders case by case: faster, slower, same or inconclusive",
    "history": "store results in a history (SQLite, or a shared PostgreSQL) and show each case across versions",
    "export": "export a results folder to MLflow or W&B: the sweep as a parent run, one run per record",
    "env": "print the environment (devices, topology, driver, library versions, commit)",
    "peak": "measure the achievable matmul TFLOP/s per dtype on this device",
    "commbench": "measure collective bandwidth on a run's topology",
    "maxbatch": "find the largest batch per device that fits in memory",
    "predict": "predict data-parallel scaling from a 1-device run and commbench records",
    "references": "list the published training figures reports compare against, with their sources",
}
