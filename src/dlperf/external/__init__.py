"""Other frameworks' own training scripts run under dlperf (the `--command` workload)."""
