"""Every known framework-log format, in detection order (the most specific signatures first)."""

from __future__ import annotations

from dlperf.errors import ConfigError
from dlperf.framework_logs.base import LogFormat
from dlperf.framework_logs.formats import (
    aws_fsdp,
    declared,
    deepspeed,
    deepspeed_chat,
    deepspeed_pipe,
    dllogger,
    dlperf_log,
    dlperf_steps,
    gpt_neox,
    hf_trainer,
    hugectr,
    keras,
    keras_fit,
    lightning_rich,
    litgpt,
    llmc,
    maxtext,
    megatron,
    mlperf,
    modded_nanogpt,
    mxnet,
    nanochat,
    nanogpt,
    nanotron,
    nemo,
    oneflow,
    paddle,
    pytorch_imagenet,
    timm,
    torchtitan,
    torchtune,
    tqdm_bar,
)

FORMATS: tuple[LogFormat, ...] = (
    *dlperf_log.FORMATS,
    *keras.FORMATS,
    *dllogger.FORMATS,
    *mlperf.FORMATS,
    *gpt_neox.FORMATS,
    *megatron.FORMATS,
    *torchtitan.FORMATS,
    *maxtext.FORMATS,
    *deepspeed_chat.FORMATS,
    *deepspeed.FORMATS,
    *deepspeed_pipe.FORMATS,
    *nanotron.FORMATS,
    *torchtune.FORMATS,
    *litgpt.FORMATS,
    *nemo.FORMATS,
    *oneflow.FORMATS,
    *mxnet.FORMATS,
    *pytorch_imagenet.FORMATS,
    *paddle.FORMATS,
    *hugectr.FORMATS,
    *hf_trainer.FORMATS,
    *keras_fit.FORMATS,
    *lightning_rich.FORMATS,
    *timm.FORMATS,
    *nanogpt.FORMATS,
    *llmc.FORMATS,
    *nanochat.FORMATS,
    *modded_nanogpt.FORMATS,
    *aws_fsdp.FORMATS,
    *tqdm_bar.FORMATS,
)
# named only: the instrumentation's side file is read by the run that wrote it, never detected
BY_NAME = {f.name: f for f in (*FORMATS, *dlperf_steps.FORMATS)}


def get_format(name: str) -> LogFormat:
    """A known format by name, or the format declared in a YAML file (`PATH.yaml`, see formats/declared.py)."""
    if declared.is_declared(name):
        return declared.load(name)
    if name not in BY_NAME:
        raise ConfigError(
            f"unknown log format {name!r}: choose auto, a declared format PATH.yaml, or one of {', '.join(BY_NAME)}"
        )
    return BY_NAME[name]


def detect(line: str) -> LogFormat | None:
    """The format a line identifies, if any."""
    return next((f for f in FORMATS if f.recognises(line)), None)


def describe() -> str:
    """The `--list-formats` text: name, rules, default warm-up and window in iterations, unit, and the source."""
    rows = []
    for f in BY_NAME.values():
        steps = "iterations" if f.steps_are_iterations else "progress events"
        window = "the last printed step" if f.last_only else "to the end of the run" if f.window is None else ""
        rows.append(
            f"{f.name}\n    {f.description}\n    rules: {', '.join(f.rules)} (default {f.rules[0]}); "
            f"warm-up: {f.warmup} {steps}; window: {window or f'{f.window} {steps}'}; unit: {f.unit}; "
            f"printed figure: {f.printed}\n    rule: {f.practice}"
        )
    rows.append(
        "PATH.yaml\n    a format declared in YAML: `line:` a regex with named groups (iteration, throughput, "
        "step_time or time, loss), unit, printed (global or per device), throughput_counts, per, warmup, window; "
        "rates combine as samples over time (docs/peer-logs.md)"
    )
    return "\n".join(rows)
