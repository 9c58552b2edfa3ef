"""Orchestration: check a spec once, plan its runs' paths, pick the launcher, run, build and store the records."""
