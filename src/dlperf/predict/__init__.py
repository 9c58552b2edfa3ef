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
    single_device_run,
)

__all__ = [
    "GptSingleDevice",
    "LayoutPrediction",
    "Link",
    "Prediction",
    "SingleDeviceRun",
    "allreduce_s",
    "ddp_buckets",
    "predict_data_parallel",
    "predict_gpt_layout",
    "ring_allreduce_s",
    "single_device_run",
]
