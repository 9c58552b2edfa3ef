"""TensorFlow's own official ResNet-50 script (tf-models-official, unchanged) through a dlperf sweep at 1n1g and
1n2g: the shipped config, TF_CONFIG per process (--launch-env tf) so 1n2g trains under MultiWorkerMirroredStrategy
with two workers, and each record's figure equal to a hand reading of the script's own lines.

TensorFlow lives in a virtual environment of its own (CI: .tfvenv, see .ci/run), named by DLPERF_TF_PYTHON."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_dlperf

REPO = Path(__file__).parents[2]
CONFIG = REPO / "configs" / "frameworks" / "tf_official_resnet50.yaml"
LINE = re.compile(r"TimeHistory: \S+ seconds, (\S+) examples/second between steps (\d+) and (\d+)")


def tf_python() -> str:
    python = os.environ.get("DLPERF_TF_PYTHON") or str(REPO / ".tfvenv" / "bin" / "python")
    if not os.access(python, os.X_OK):
        pytest.skip(f"no TensorFlow venv at {python}: set DLPERF_TF_PYTHON (CI builds .tfvenv, see .ci/run)")
    probe = "import official.legacy.image_classification.resnet.resnet_ctl_imagenet_main, tf_keras"
    if subprocess.run([python, "-c", probe], capture_output=True, timeout=300).returncode != 0:
        pytest.skip(f"{python} cannot import tf-models-official's ResNet-50 trainer: pip install tf-models-official")
    return python


@pytest.mark.slow
def test_tf_official_resnet50_sweep_1n1g_1n2g(tmp_path):
    python = tf_python()
    sweep = yaml.safe_load(CONFIG.read_text())
    sweep["command"] = sweep["command"].replace("{python}", python)
    sweep["command"] = sweep["command"].replace("/tmp/dlperf-tf-official", str(tmp_path / "model"))
    path = tmp_path / "tf.yaml"
    path.write_text(yaml.safe_dump(sweep))
    done = run_dlperf(["sweep", str(path), "--out", str(tmp_path / "res")], timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('tensorflow'))"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    for case in ("1n1g", "1n2g"):
        (record_path,) = (tmp_path / "res" / "resnet50" / case).glob("*.json")
        record = json.loads(record_path.read_text())
        assert record["status"] == "ok" and record["framework"] == f"tensorflow {version}", record
        assert record["label"] == "tf-official" and record["format"] == "tf2-keras"
        log = record_path.with_suffix(".log").read_text()
        kept = [float(m[1]) for m in LINE.finditer(log) if int(m[2]) >= sweep["log_warmup"]]
        assert kept and record["throughput"] == pytest.approx(statistics.fmean(kept), rel=1e-9)
        assert record["host_memory_mib_sampled"] > 100  # a TensorFlow process tree holds far more than 100 MiB
    two = (tmp_path / "res" / "resnet50" / "1n2g").glob("*.log").__next__().read_text()
    assert "group_size = 2" in two  # MultiWorkerMirroredStrategy's collectives span both workers
