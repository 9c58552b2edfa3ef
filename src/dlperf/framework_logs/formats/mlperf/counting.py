"""What an MLPerf log declares and how its counts become samples. Each benchmark counts its progress in its own unit
(epochs of its data set, tokens, fractions of the data or samples, per the MLPerf training rules and mlperf_logging's
keys), so every figure and every second reading goes through this one conversion."""

from __future__ import annotations

from typing import Any

from dlperf.framework_logs.formats.mlperf.events import Event, number

# Epoch-counted benchmarks: training samples in one epoch (the data sets' published sizes: ImageNet-1k, the
# MLPerf OpenImages subset, COCO-2017 train, KiTS19's training cases).
EPOCH_SIZE = {"resnet": 1281167, "ssd": 1170301, "retinanet": 1170301, "maskrcnn": 117266, "unet3d": 168}
EPOCH_OF_TRAIN_SAMPLES = {"rnnt"}  # epoch-counted; `train_samples` is the epoch's size (utterances kept)
FRACTION_EPOCHS = {"dlrm", "dlrm_dcnv2", "gnn", "rgat"}  # epoch_num is a fraction of `train_samples`
TOKEN_COUNTED = {"gpt3"}  # sample counts are tokens; a sequence is `max_sequence_length` tokens
SAMPLE_COUNTED = {"bert", "stable_diffusion", "llama2_70b_lora", "llama31_8b", "llama31_405b", "flux1"}
EVALUATED = ("eval_start", "eval_accuracy")  # the events that say the run evaluated
# the events that declare a size, and the attribute each one sets
_SIZES = {"global_batch_size": "batch", "max_sequence_length": "seq_len", "train_samples": "train_samples"}
# What one sample is, per benchmark (MLPerf training rules: the data each benchmark trains on).
UNITS = {
    **dict.fromkeys(("resnet", "ssd", "retinanet", "maskrcnn", "stable_diffusion", "flux1"), "images/s"),
    **dict.fromkeys(("bert", "gpt3", "llama2_70b_lora", "llama31_8b", "llama31_405b"), "sequences/s"),
    **dict.fromkeys(("dlrm", "dlrm_dcnv2"), "records/s"),
}


class Counts:
    """What one log declares (its sizes, benchmark, start, stop and evaluations) and the samples trained so far by
    any event's count."""

    def __init__(self, batch: float) -> None:
        self.batch = batch
        self.seq_len: float | None = None
        self.benchmark = ""
        self.train_samples: float | None = None
        self.local_declared = self.stopped = self.evaluated = self.timed_eval = False
        self.run_start: float | None = None
        self.cumulative: float | None = None  # samples trained so far, from any event's count
        self.last_count: float | None = None  # the last tracked step count (for its unit)

    def declare(self, event: Event) -> None:
        """What the run declares or marks: its sizes, its benchmark, its start and stop, its evaluations."""
        key, value = event.key, event.value
        if key in _SIZES and (size := number(value)):
            setattr(self, _SIZES[key], size)
        elif key == "submission_benchmark" and isinstance(value, str):
            self.benchmark = value.lower()
        elif key == "local_batch_size":
            self.local_declared = True
        elif key == "run_start":
            self.run_start = event.stamp
        elif key == "run_stop":
            self.stopped = True
        elif key in EVALUATED:
            self.evaluated = True
            self.timed_eval = self.timed_eval or key == "eval_start"

    @property
    def unit(self) -> str | None:
        return UNITS.get(self.benchmark)

    def samples(self, count: float, delta: float | None = None) -> tuple[float | None, str | None]:
        """A count in the benchmark's unit -> samples, and a note when it was not samples."""
        if (size := self.epoch_size()) is not None:
            return count * size, None
        if self.benchmark in FRACTION_EPOCHS:
            return (count * self.train_samples, None) if self.train_samples else (None, None)
        if self.seq_len and (self.benchmark in TOKEN_COUNTED or self._token_sized(delta)):
            return count / self.seq_len, f"counts are tokens: / {self.seq_len:g} tokens per sequence"
        return count, None

    def epoch_size(self) -> float | None:
        """Samples in one epoch of an epoch-counted benchmark (None: the benchmark does not count epochs)."""
        if self.benchmark in EPOCH_SIZE:
            return float(EPOCH_SIZE[self.benchmark])
        if self.benchmark in EPOCH_OF_TRAIN_SAMPLES:
            return self.train_samples
        return None

    def counts_samples(self) -> bool:
        """Whether `epoch_num` counts samples, tokens or a fraction of the data (not whole epochs)."""
        return self.benchmark in SAMPLE_COUNTED | TOKEN_COUNTED | FRACTION_EPOCHS

    def _token_sized(self, delta: float | None) -> bool:
        """A count step of whole global batches of full sequences is a token count."""
        if not delta or not self.seq_len:
            return False
        steps = delta / (self.batch * self.seq_len)
        return steps >= 1 and abs(steps - round(steps)) < 1e-6

    def tokens_per_sample(self) -> int | None:
        return int(self.seq_len) if self.seq_len else None

    def advance(self, metadata: dict[str, Any]) -> tuple[float, bool] | None:
        """The samples trained so far by the event's own count (samples_count, step_num x the batch, or
        sample-counting epochs: bert's epoch_num), and whether they rose; None where it counts none."""
        if (count := number(metadata.get("samples_count"))) is None:
            if (steps := number(metadata.get("step_num"))) is not None:
                count = steps * self.batch
            elif (epochs := number(metadata.get("epoch_num"))) is not None and self.counts_samples():
                count = self.samples(epochs)[0]
        if count is None:
            return None
        rose = self.cumulative is None or count > self.cumulative
        self.cumulative = max(self.cumulative or 0.0, count)
        return count, rose

    def progress(self, metadata: dict[str, Any]) -> tuple[float | None, str | None] | None:
        """A progress event's cumulative sample count: bert's epoch_num, step_num x batch, or a step count in
        tokens, samples or a fraction of an epoch."""
        if self.epoch_size() is not None or (self.benchmark and not self.counts_samples()):
            return None  # `step` is the epoch number: the epoch's own time stamps are the second reading
        if (count := number(metadata.get("epoch_num"))) is not None:
            return self.samples(count)
        if (count := number(metadata.get("step_num"))) is not None:
            return count * self.batch, None
        if (count := number(metadata.get("step"))) is not None:
            return self._step_samples(count)
        return None

    def _step_samples(self, count: float) -> tuple[float | None, str | None] | None:
        """A progress event's `step`: tokens or a fraction of the data where the benchmark (or the step's size)
        says so, samples where it counts samples or steps one global batch at a time, else not a count."""
        delta = count - (self.last_count or 0.0)
        self.last_count = count
        if self.benchmark in FRACTION_EPOCHS | TOKEN_COUNTED or self._token_sized(delta):
            return self.samples(count, delta)
        if self.benchmark in SAMPLE_COUNTED or abs(delta - self.batch) < 1e-6 * self.batch:
            return count, None
        return None
