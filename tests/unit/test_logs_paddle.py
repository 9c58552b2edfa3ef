"""Today's Paddle lines (PaddleClas, PaddleSeg, PaddleOCR, dygraph models) beside the fluid ones: the window's
samples over its summed batch_cost, and `ips` x world size as the second reading. Lines as each suite's logger
prints them (PaddleClas ppcls/engine/train/utils.py, PaddleSeg paddleseg/core/train.py, PaddleOCR
ppocr/utils/... program.py); figures computed here by hand."""

from __future__ import annotations

import pytest

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import LogInfo

LINES = {
    "clas": "[2022/03/01 10:00:00] ppcls INFO: [Train][Epoch 1/120][Iter: {i}/5005]lr: 0.10000, top1: 0.00000, "
    "CELoss: 6.94, loss: 6.94, batch_cost: {t:.5f}s, reader_cost: 0.00100, ips: {ips:.5f} samples/s, eta: 1 day",
    "seg": "2022-03-01 10:00:00 [INFO]\t[TRAIN] epoch: 1, iter: {i}/1000, loss: 2.5, lr: 0.010000, "
    "batch_cost: {t:.4f}, reader_cost: 0.00120, ips: {ips:.4f} samples/sec | ETA 00:04:22",
    "ocr": "[2022/03/01 10:00:00] ppocr INFO: epoch: [1/500], global_step: {i}, lr: 0.001000, loss: 5.1, "
    "avg_reader_cost: 0.5 s, avg_batch_cost: {t:.5f} s, avg_samples: 16.0, ips: {ips:.5f} samples/s, eta: 1 day",
}


@pytest.mark.parametrize("suite", sorted(LINES))
def test_today_s_paddle_lines_are_read(tmp_path, suite):
    batch, devices = 16, 2
    times = {i: 0.2 + (i % 30) / 1000 for i in range(10, 301, 10)}
    log = tmp_path / f"{suite}.txt"
    log.write_text("".join(LINES[suite].format(i=i, t=t, ips=batch / t) + "\n" for i, t in times.items()))
    record = read_run(LogInfo(log, "resnet50", 1, devices, batch, "fp32", 1), Options())
    kept = [t for i, t in times.items() if i - 10 >= 20 and i <= 20 + 100]  # intervals from 20, 100 iterations
    assert record["format"] == "paddle"
    # every line covers 10 iterations: their samples over their summed time, not a mean of the lines' rates
    assert record["throughput"] == pytest.approx(len(kept) * batch * devices / sum(kept), rel=1e-6)
    assert record["cross_check"]["agree"] is True and "ips" in record["cross_check"]["reading"]
