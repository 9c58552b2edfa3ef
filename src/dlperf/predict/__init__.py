"""`dlperf predict`: data-parallel and GPT TP/PP scaling from a 1-device run and commbench link fits."""

from dlperf.predict.model import (
    GptSingleDevice,
    LayoutPrediction,
    Link,
    Prediction,
    SingleDeviceRun,
    allreduce_s,
    ddp_buckets,
    predict_data_parallel,
    predict_gpt_layout,
    ring_allreduce_s,
)
from dlperf.predict.records import DEFAULT_BACKWARD_SHARE, links_from_records, op_links_from_records, run_from_record

__all__ = [
    "DEFAULT_BACKWARD_SHARE", "GptSingleDevice", "LayoutPrediction", "Link", "Prediction", "SingleDeviceRun",
    "allreduce_s", "ddp_buckets", "links_from_records", "op_links_from_records", "predict_data_parallel",
    "predict_gpt_layout", "ring_allreduce_s", "run_from_record"
]  # fmt: skip
