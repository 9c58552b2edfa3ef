"""dlperf's start-up hook for an instrumented `--command` (docs/instrumentation.md). dlperf puts this folder first
on the command's PYTHONPATH, so Python imports this file as `sitecustomize` when the script starts. It uses the
standard library only (the command may run in another environment) and changes nothing the script does or
prints: it notes each optimizer step in a side file, `$DLPERF_STEPS.rank<RANK>`, one line per step:

    <step> <time.monotonic() after the step> <global samples of the step, or - where the framework does not say>

and, where a trainer's own printed figure covers a stretch the steps alone do not tell, marks of that stretch:

    train <begin> <end>    transformers' Trainer: the span its train_runtime times (speed_metrics' start to its call)
    epoch <time>           Lightning: an epoch began (its progress bars start again there)

Where the script imports them, it hooks, after their own import:
- torch: a global optimizer step post-hook (`torch.optim.optimizer.register_optimizer_step_post_hook`), so any
  PyTorch loop, HF Trainer, Lightning, timm and nanoGPT are timed at each update (an accumulation boundary); only
  the first optimizer that steps is counted (a GAN's second one would count every iteration twice); where its
  parameters are on a GPU, a step's time is when the GPU finished it (CUDA events, `_dlperf_gpu_steps.py`), not
  when `step()` returned having queued it; and GradScaler's steps skipped on inf/nan gradients count as steps;
- transformers' Trainer: the samples of an update (its batch per device x accumulation x processes), and the span
  of its train_runtime;
- Lightning's Trainer: a callback noting the samples of an update (the batch's length x accumulation x processes)
  and the start of each epoch;
- Keras 3 `Model.fit` (any backend): a callback timing each batch, with fit's `batch_size`.
Any failure of the hook itself is written to the side file as a `#` line and the hook steps aside.
Another `sitecustomize` later on sys.path (a site's own) is imported after this one, as it would have been.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import time

PREFIX = os.environ.get("DLPERF_STEPS")
FLUSH_S = 0.5  # what a SIGTERM (dlperf's stop rules) can cost: the last half second's lines


class _Steps:
    """The side file: lines buffered in memory, written with os.write (a forked child drops the buffer and never
    writes its parent's lines twice)."""

    def __init__(self, prefix: str) -> None:
        self.path = f"{prefix}.rank{os.environ.get('RANK', '0')}"
        self.fd: int | None = None
        self.lines: list[str] = []
        self.step = 0
        self.samples: int | None = None  # the framework's own samples per update, where it tells
        self.owner: int | None = None  # id() of the optimizer whose steps count
        self.gpu = None  # _dlperf_gpu_steps.CudaStepClock where that optimizer's steps run on a GPU
        self.flushed = time.monotonic()
        self.dead = False

    def record(self) -> None:
        now = time.monotonic()
        self.step += 1
        entry = (self.step, self.samples)
        if self.gpu is None or not self.gpu.stamp(entry):  # on a GPU: its time once the GPU has run it
            self.lines.append(_line(entry, now))
        if now - self.flushed >= FLUSH_S:
            self.flush()

    def mark(self, name: str, *times: float) -> None:
        self.lines.append(" ".join([name, *(f"{t:.6f}" for t in times)]) + "\n")

    def note(self, text: str) -> None:
        self.lines.append("# " + text.replace("\n", " ")[:500] + "\n")
        self.flush()

    def flush(self, final: bool = False) -> None:
        self.flushed = time.monotonic()
        if self.gpu is not None:
            self.lines += [_line(entry, at) for entry, at in self.gpu.ready(final)]
            if self.gpu.problem:
                self.lines, self.gpu = [*self.lines, f"# {self.gpu.problem}\n"], None
        if not self.lines or self.dead:
            return
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self.fd, "".join(self.lines).encode())
        except OSError:
            self.dead = True  # a full disk or a gone folder: the run goes on untimed
        self.lines = []

    def forked(self) -> None:
        self.fd, self.lines, self.step, self.dead, self.gpu = None, [], 0, True, None  # a data-loader worker


def _line(entry: tuple[int, int | None], at: float) -> str:
    step, samples = entry
    return f"{step} {at:.6f} {samples if samples else '-'}\n"


STEPS = _Steps(PREFIX) if PREFIX else None


def _guarded(what: str):
    """Run a patch; a failure is noted in the side file, never raised into the script."""

    def wrap(patch):
        def run(module):
            try:
                patch(module)
            except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
                if STEPS is not None:
                    STEPS.note(f"dlperf hook for {what} failed: {type(error).__name__}: {error}")

        return run

    return wrap


def _post_step(optimizer, _args, _kwargs) -> None:
    if STEPS.owner is None:
        STEPS.owner = id(optimizer)
        _guarded("GPU step clock")(_gpu_clock)(optimizer)
    if id(optimizer) == STEPS.owner:
        STEPS.record()


@_guarded("torch")
def _torch(module) -> None:
    module.register_optimizer_step_post_hook(_post_step)


def _gpu_clock(optimizer) -> None:
    STEPS.gpu = importlib.import_module("_dlperf_gpu_steps").clock_for(optimizer)


@_guarded("GradScaler")
def _grad_scaler(module) -> None:
    importlib.import_module("_dlperf_gpu_steps").count_skipped_steps(module, _post_step)


@_guarded("transformers")
def _transformers(module) -> None:
    train = module.Trainer.train

    def timed_train(self, *args, **kwargs):
        a = self.args
        STEPS.samples = a.train_batch_size * a.gradient_accumulation_steps * max(1, a.world_size)
        return train(self, *args, **kwargs)

    module.Trainer.train = timed_train
    metrics = module.speed_metrics

    def timed_metrics(split, start_time, *args, **kwargs):
        """transformers.trainer_utils.speed_metrics: train_runtime is time.time() at this call less start_time; the
        call with num_samples is the end of training (Trainer's `_finalize_training`), not a log's tokens/s."""
        if split == "train" and kwargs.get("num_samples") is not None:
            now, wall = time.monotonic(), time.time()
            STEPS.mark("train", now - (wall - start_time), now)
        return metrics(split, start_time, *args, **kwargs)

    module.speed_metrics = timed_metrics


def _batch_length(batch) -> int | None:
    """The samples in a batch: the first dimension of its first tensor."""
    while isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    if isinstance(batch, dict) and batch:
        batch = next(iter(batch.values()))
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape else None


@_guarded("lightning")
def _lightning(module) -> None:
    package = module.__name__.rsplit(".trainer.trainer", 1)[0]  # lightning.pytorch, or pytorch_lightning
    Callback = importlib.import_module(f"{package}.callbacks").Callback  # noqa: N806 - a class

    class Samples(Callback):
        def on_train_epoch_start(self, trainer, pl_module) -> None:
            STEPS.mark("epoch", time.monotonic())

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # Lightning's own names
            try:
                n = _batch_length(batch)
                STEPS.samples = n * trainer.accumulate_grad_batches * trainer.world_size if n else None
            except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
                STEPS.note(f"dlperf hook for lightning: {type(error).__name__}: {error}")

    init = module.Trainer.__init__

    def timed_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.callbacks.append(Samples())

    module.Trainer.__init__ = timed_init


@_guarded("keras")
def _keras(module) -> None:
    class Steps(module.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None) -> None:  # Keras passes `logs=` by name
            STEPS.record()

    fit = module.Model.fit

    def timed_fit(self, *args, **kwargs):
        x = kwargs.get("x", args[0] if args else None)
        batch = kwargs.get("batch_size", args[2] if len(args) > 2 else None)
        if batch is None and hasattr(x, "shape"):
            batch = 32  # fit's default for arrays
        STEPS.samples = batch
        if len(args) > 5:  # callbacks given in place
            args = (*args[:5], [*(args[5] or []), Steps()], *args[6:])
        else:
            kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), Steps()]
        return fit(self, *args, **kwargs)

    module.Model.fit = timed_fit


PATCHES = {
    "torch.optim.optimizer": _torch,
    "torch.amp.grad_scaler": _grad_scaler,
    "transformers.trainer": _transformers,
    "lightning.pytorch.trainer.trainer": _lightning,
    "pytorch_lightning.trainer.trainer": _lightning,
    "keras": _keras,
}


class _Patched(importlib.abc.Loader):
    """The module's own loader, then the patch."""

    def __init__(self, loader, patch) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.patch(module)

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds the modules in PATCHES through the other finders and wraps their loaders."""

    busy: set[str] = set()

    def find_spec(self, name, path, target=None):
        if name not in PATCHES or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Patched(spec.loader, PATCHES[name])
        return spec


def _next_sitecustomize() -> None:
    """Import the `sitecustomize` this one shadows, as Python would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if STEPS is not None:
    sys.meta_path.insert(0, _AfterImport())
    atexit.register(STEPS.flush, True)
    os.register_at_fork(after_in_child=STEPS.forked)
_next_sitecustomize()
