"""The record is declared once: the JSON Schema files and the docs' reference are generated from the declaration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_records import record

from dlperf.records.docgen import JSON_DIR, docs_with_reference, schema_files
from dlperf.records.schema import RunRecord, declared_keys, declared_kind, undeclared_fields
from dlperf.records.validate import record_problem

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_json_schemas_equal_the_generated_ones():
    generated = schema_files()
    assert sorted(p.name for p in JSON_DIR.glob("*.json")) == sorted(generated)
    for name, text in generated.items():
        assert (JSON_DIR / name).read_text(encoding="utf-8") == text, f"run python -m dlperf.records.docgen ({name})"


def test_docs_reference_is_in_sync_with_the_declaration():
    docs = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    assert docs_with_reference(docs) == docs, "run python -m dlperf.records.docgen"
    assert all(f"| `{key}` |" in docs for key in declared_keys(RunRecord))


def test_json_schema_states_the_validators_rules():
    schema = json.loads((JSON_DIR / "RunRecord.schema.json").read_text())
    assert {"schema", "model", "case", "group", "precision"} <= set(schema["required"])
    assert schema["properties"]["world_size"]["anyOf"][0] == {"type": "integer", "minimum": 1}
    assert schema["properties"]["status"]["enum"] == ["ok", "failed", "diverged"]


def test_validator_reads_the_declared_types():
    good = record("1n1g", 1, 100.0, env={"host": "h1"}, hosts=["h1"], ranks=[{"rank": 0}])
    assert record_problem(good) is None
    assert record_problem({**good, "noisy": "yes"}) == "noisy 'yes' is not true or false"
    wrong = "window_throughputs[1] 'x' is not a finite number"
    assert record_problem({**good, "window_throughputs": [1.0, "x"]}) == wrong
    assert declared_kind({**good, "kind": "external"}).__name__ == "ExternalRunRecord"
    assert declared_kind({**good, "kind": "extracted"}).__name__ == "ExtractedRecord"
    assert record_problem({**good, "kind": "remote"}).startswith("kind 'remote'")
    # a record older than dlperf.run/3 carries no kind: derived once, from its keys
    old = {**good, "schema": "dlperf.run/2"}
    assert declared_kind({**old, "command": "python train.py"}).__name__ == "ExternalRunRecord"
    assert declared_kind({**old, "source": "extract"}).__name__ == "ExtractedRecord"
    assert declared_kind({**good, "command": "python train.py"}).__name__ == "RunRecord"  # new: written, not guessed


def test_writer_spells_only_declared_fields(tmp_path):
    """Every key a failed run's and a failed external run's record carry is declared for its kind."""
    from dlperf.launch.messages import RunResult
    from dlperf.orchestration.kinds import build_record
    from dlperf.orchestration.run import plan_jobs
    from dlperf.records.written import record_json, typed
    from dlperf.workloads import check_spec, spec_from_mapping

    for values in ({"model": "resnet50", "device": "cpu"}, {"model": "resnet50", "command": "train.py"}):
        spec = spec_from_mapping(values)
        (job,) = plan_jobs(spec, check_spec(spec), [1], tmp_path)
        built = build_record(job, RunResult.failed("worker rank 0 on h exited with code 1", rank=0), {}, 0.0, 1.0)
        written = record_json(built)
        assert undeclared_fields(written) == []
        assert record_problem(written) is None
        external = "command" in values
        assert type(built).__name__ == ("ExternalRunRecord" if external else "RunRecord")
        assert written["kind"] == built.kind == ("external" if external else "native")  # written, not guessed
        assert written["engine"] == (None if external else "torch")  # a command runs no engine
        with pytest.raises(TypeError, match="does not declare energy.kwh"):  # a writer's misspelling, in use too
            typed({**written, "energy": {"kwh": 1.0}})


def test_an_older_records_kind_is_derived_once_on_loading(tmp_path):
    """A `dlperf.run/2` record carries no `kind`: `upgrade` derives it from its keys, so it loads as its kind; an
    older external record's engine `external` loads as null."""
    from dlperf.records.load import load_record

    old = {**record("1n1g", 1, 100.0), "schema": "dlperf.run/2", "engine": "external", "command": "python t.py"}
    path = tmp_path / "resnet50" / "1n1g" / "resnet50_b128_fp32_1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    loaded = load_record(path)
    assert (
        type(loaded).__name__ == "ExternalRunRecord" and loaded.kind == "external" and loaded.command == "python t.py"
    )
    assert loaded.engine is None  # before dlperf.run/4 the external kind was spelled as an engine
    path.write_text(json.dumps({**old, "schema": "dlperf.run/3", "kind": "external"}))
    assert load_record(path).engine is None
    path.write_text(json.dumps({**old, "schema": "dlperf.run/3", "engine": "jax"}))
    assert (load_record(path).kind, load_record(path).engine) == ("native", "jax")  # a /3 record says its kind


def test_loaded_record_is_its_declared_kind():
    """`as_record` maps each declared key to its attribute (absent ones None), keeps the JSON as read (null and
    absent differ there; an undeclared key stays there, no attribute), and is idempotent."""
    from dlperf.records.load import as_json, as_record
    from dlperf.records.schema import COMMBENCH_SCHEMA, CommbenchRecord, ExtractedRecord

    data = {**record("1n2g", 2, 50.0), "tf32": None, "mystery": 7}
    loaded = as_record(data, "r.json")
    assert type(loaded) is RunRecord and (loaded.case, loaded.repeat, loaded.throughput) == ("1n2g", 2, 50.0)
    assert loaded.tf32 is None and loaded.energy is None and not hasattr(loaded, "mystery")
    assert loaded.origin.path == "r.json" and as_json(loaded) == data and "energy" not in as_json(loaded)
    assert as_record(loaded) is loaded
    assert type(as_record({**data, "kind": "extracted", "source": "extract", "unit": "tokens/s"})) is ExtractedRecord
    bench = as_record({"schema": COMMBENCH_SCHEMA, "status": "ok", "dtype": "fp32", "model": "commbench", "nodes": 2})
    assert type(bench) is CommbenchRecord and bench.dtype == "fp32"
    assert (bench.run.model, bench.run.nodes, bench.run.throughput) == ("commbench", 2, None)


def test_console_rows_are_the_declared_ones(capsys):
    """The table after a run has a row per field declared with `show` (none written by hand in cli/display.py):
    each plain one with its value written by its format, a null one left out, an external run's unit in labels."""
    from dlperf.cli.display import show_record
    from dlperf.records.schema import ExternalRunRecord, shown

    figures = {"compile_s": 12.34, "window_cv": 0.012, "latency_ms": {"mean": 10.0, "p50": 9.9, "p90": None}}
    show_record({**record("1n1g", 1, 300.0), **figures}, "r.json")
    rows = dict(line.split("  ", 1) for line in capsys.readouterr().out.splitlines()[2:-1])
    assert {k: v.strip() for k, v in rows.items() if k in ("compile (s)", "window CV", "latency (ms)")} == {
        "compile (s)": "12.3",
        "window CV": "1.2%",
        "latency (ms)": "mean 10.00, p50 9.90",
    }
    assert "tokens/s" not in rows and "loss first" not in rows  # declared, null here: no row
    assert ("format", "log format", "") in shown(ExternalRunRecord) and "format" not in declared_keys(RunRecord)
    external = {**record("1n1g", 1, 12.5), "kind": "external", "unit": "images/s", "format": "pytorch-imagenet"}
    show_record(external, "e.json")
    out = capsys.readouterr().out
    assert "throughput (images/s)" in out and "log format" in out and "pytorch-imagenet" in out
