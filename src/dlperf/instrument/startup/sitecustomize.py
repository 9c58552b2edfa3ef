"""dlperf's start-up hook for an instrumented `--command` (docs/instrumentation.md). dlperf puts this folder first
on the command's PYTHONPATH, so Python imports this file as `sitecustomize` when the script starts. It uses the
standard library only (the command may run in another environment) and changes nothing the script does or
prints: it notes each update of the model in a side file of its own process, `$DLPERF_STEPS.<host>.<pid>` (no two
processes share one, whatever their launcher set), one line per update:

    <step> <time.monotonic() after it> <samples it consumed on this rank, or -> <rank> <real tokens, or ->

and, where a trainer's own printed figure covers a stretch the steps alone do not tell, marks of that stretch:

    train <begin> <end>    transformers' Trainer: the span its train_runtime times (speed_metrics' start to its call)
    epoch <time>           Lightning: an epoch began (its progress bars start again there)

An update is every `step()` call until an optimizer steps a parameter group it already stepped since the update
began (the group's first parameter tells): DeepSpeed ZeRO's call per group or sub-group, several optimizers after one
backward (a GAN's discriminator and generator, an embedding's sparse optimizer), optimizer-in-backward's one
optimizer per parameter, each make one update; it is stamped at its last call. The rank is torch.distributed's once
a process group exists, before that the launcher's variables. The samples are counted, not assumed: the first
dimension of each batch that went into the model since the last update (what a DataLoader yields with gradients
on, as accelerate's loaders yield it: an evaluation loop under no_grad is not counted; transformers'
`training_step` inputs; Lightning's batch; Keras' batches of an array, the short last one included); `-` where
nothing was counted. Where no loader or trainer counts a batch (tensors made or sliced inside the loop), the model's
input is: the first dimension of what the first module called with gradients on that has parameters takes at each
call (a `#` line says so; not where that module holds none of the stepped parameters); a run where nothing is ever
counted is taken at the declared batch by the parent, which says so.
Tokens: an `attention_mask`'s ones, else the `labels` not -100, where a batch holds them on the host.

Where the script imports them, it hooks, after their own import:
- torch: a global optimizer step post-hook (`torch.optim.optimizer.register_optimizer_step_post_hook`), so any
  PyTorch loop, HF Trainer, Lightning, timm and nanoGPT are timed at each update (an accumulation boundary); where
  the parameters are on a GPU, an update's time is when the GPU finished its last step (a CUDA event recorded at
  that call, `_dlperf_gpu_steps.py`), not when `step()` returned having queued it; GradScaler's steps skipped on
  inf/nan gradients are updates too; the DataLoader's iterator, counting each batch it yields on the main thread;
- accelerate's loaders and timm's PrefetchLoader: the batches they yield, not the one they fetch ahead;
- DeepSpeed's engine: an update made inside `engine.step()` is stamped when it returns (after ZeRO's gathers);
- transformers' Trainer: each micro-batch `training_step` takes, and the span of its train_runtime;
- Lightning's Trainer: a callback counting each batch and marking the start of each epoch;
- Keras 3 `Model.fit` (any backend): an async-safe callback timing each batch in Keras' own batch order (Keras
  keeps its asynchronous dispatch), with the batch's size where fit is given arrays.
Any failure of the hook itself is written to the side file as a `#` line and the hook steps aside.
Another `sitecustomize` later on sys.path (a site's own) is imported after this one, as it would have been.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import math
import os
import sys
import threading
import time

PREFIX = os.environ.get("DLPERF_STEPS")
FLUSH_S = 0.5  # what a SIGTERM (dlperf's stop rules) can cost: the last half second's lines
IGNORED = -100  # the label torch's cross entropy (and HF, torchtune) leaves out: padding


def _env_rank() -> int:
    """The process's rank by its launcher's variables, until a process group says (Lightning's own children have
    LOCAL_RANK and NODE_RANK only)."""
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    local = os.environ.get("LOCAL_RANK", "0")
    node, per_node = os.environ.get("NODE_RANK", "0"), os.environ.get("LOCAL_WORLD_SIZE", "0")
    if local.isdigit() and node.isdigit() and per_node.isdigit():
        return int(node) * int(per_node) + int(local)
    return 0


class _Steps:
    """The side file: lines buffered in memory, written with os.write every FLUSH_S; an update is held open until a
    call steps a group it already stepped (or the process ends), then written."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.dead = False
        self.finder = self.model = (
            None  # the global hook looking for the model; the model and its hook (kept in a fork)
        )
        self._start()

    def _start(self) -> None:
        self.path = f"{self.prefix}.{os.uname().nodename}.{os.getpid()}"
        self.fd: int | None = None
        self.lines: list[str] = []
        self.step = 0
        self.rank: int | None = None  # torch.distributed's, once a process group exists
        self.env_rank = _env_rank()
        self.stepped: set[tuple[int, int]] = set()  # (optimizer, group's first parameter) stepped in the open update
        self.open_at: float | None = None  # the open update's last call
        self.open_event = None  # on a GPU: a CUDA event recorded at that call (None: host time)
        self.gpu = None  # _dlperf_gpu_steps.CudaStepClock where the updates run on a GPU
        self.gpu_checked = False  # the first optimizer to step said where its parameters are
        self.calls = 0  # step() calls so far
        self.open_samples = self.open_tokens = 0
        self.samples = self.tokens = 0  # counted since the open update's last call
        self.framework = False  # a trainer's own hook counts: the DataLoader's count (fetched ahead) is not used
        self.quiet = 0  # inside a loader that fetches ahead: its inner DataLoader's batches are not counted
        self.counted = False  # a loader or a trainer counted a batch: the model's input is not counted
        self.by_model = False  # the model's input was counted (said once in the side file)
        self.model_samples = self.model_tokens = 0  # the model's input since the last step() call
        self.flushed = time.monotonic()

    def count(self, batch, framework: bool = False) -> None:
        """A batch went into the model: its first dimension, and its real tokens where it says."""
        if framework and not self.framework:
            self.framework, self.samples, self.tokens = True, 0, 0
        elif self.framework and not framework:
            return
        n, tokens = _batch_size(batch)
        self.counted = self.counted or n > 0
        self.samples += n
        self.tokens += tokens

    def stepped_groups(self, keys) -> None:
        """An optimizer's step() returned, stepping the groups `keys`."""
        now = time.monotonic()
        self.calls += 1
        if self.open_at is not None and not self.stepped.isdisjoint(keys):
            self._close()
        self.stepped.update(keys)
        self.last_call(now)
        if not self.counted:
            self._take_model_input()
        self.open_samples += self.samples
        self.open_tokens += self.tokens
        self.samples = self.tokens = 0
        if now - self.flushed >= FLUSH_S:
            self.flush()

    def _take_model_input(self) -> None:
        """No loader or trainer counts: the model's input since the last call is what the update took (said once)."""
        if self.model_samples and not self.by_model:
            self.by_model = True
            self.note(
                f"samples counted from the model's input: the first dimension of what {type(self.model[0]).__name__} "
                "takes at each call with gradients on (no DataLoader or trainer batch was seen)"
            )
        self.samples, self.tokens = self.model_samples, self.model_tokens
        self.model_samples = self.model_tokens = 0

    def last_call(self, now: float) -> None:
        """The open update's last call so far: its host time and, on a GPU, its one event recorded there (a
        DeepSpeed update's per-group calls move the same event, none made per call)."""
        self.open_at = now
        if self.gpu is not None:
            self.open_event = self.gpu.event(self.open_event)

    def record(self, samples: int, at: float) -> None:
        """One whole update (a Keras execution) of `samples` (0: not counted), ended at `at`."""
        self.open_at, self.open_samples, self.open_tokens = at, samples, 0
        self.model_samples = self.model_tokens = 0  # Keras counts its own batches
        self._close()
        if time.monotonic() - self.flushed >= FLUSH_S:
            self.flush()

    def _close(self) -> None:
        self.step += 1
        entry = (self.step, self.open_samples, self._rank(), self.open_tokens)
        if self.gpu is None:
            self.lines.append(_line(entry, self.open_at))
        else:  # written at a flush, once the GPU has run it
            self.gpu.add(entry, self.open_event, self.open_at)
        self.stepped, self.open_at, self.open_samples, self.open_tokens = set(), None, 0, 0
        self.open_event = None

    def _rank(self) -> int:
        if self.rank is not None:
            return self.rank
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                self.rank = dist.get_rank()
                return self.rank
        except Exception:  # noqa: BLE001 - a process group being torn down
            pass
        return self.env_rank

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

    def exit(self) -> None:
        if self.open_at is not None:
            self._close()
        self.flush(final=True)

    def forked(self) -> None:
        """A forked child (a data-loader worker, Lightning's ddp_fork rank): a file of its own, none of its
        parent's lines; it writes only where it steps an optimizer itself."""
        self._start()


def _line(entry: tuple[int, int, int, int], at: float) -> str:
    step, samples, rank, tokens = entry
    return f"{step} {at:.6f} {samples or '-'} {rank} {tokens or '-'}\n"


STEPS = _Steps(PREFIX) if PREFIX else None


def _first_tensor(batch):
    while isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    if hasattr(batch, "keys") and hasattr(batch, "values"):  # a dict, HF's BatchEncoding (a UserDict)
        batch = next((v for v in batch.values() if getattr(v, "shape", None)), None)
    return batch


def _batch_size(batch) -> tuple[int, int]:
    """(samples, real tokens) of a batch: the first dimension of its first tensor; the ones of its
    `attention_mask`, else its `labels` that are not -100, where those are on the host (0: not counted)."""
    shape = getattr(_first_tensor(batch), "shape", None)
    first = shape[0] if shape else None
    samples = int(first) if isinstance(first, int) else 0  # None: a symbolic input (Keras builds a model with one)
    if not (hasattr(batch, "keys") and hasattr(batch, "get")):
        return samples, 0
    mask, labels = batch.get("attention_mask"), batch.get("labels")
    for tensor, real in ((mask, lambda t: t.sum()), (labels, lambda t: (t != IGNORED).sum())):
        device = getattr(tensor, "device", None)
        if tensor is not None and getattr(device, "type", None) == "cpu" and getattr(tensor, "ndim", 0) >= 2:
            return samples, int(real(tensor))  # a host tensor: no device synchronisation
    return samples, 0


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


def _stepped(optimizer, _args, _kwargs) -> None:
    """An optimizer's step() returned (or GradScaler skipped it): the groups it stepped."""
    if not STEPS.gpu_checked:
        STEPS.gpu_checked = True
        _guarded("GPU step clock")(_gpu_clock)(optimizer)
    if STEPS.calls == 0 and STEPS.model is not None:
        _guarded("the model's input")(_check_model)(optimizer)
    keys = [(id(optimizer), id(group["params"][0])) for group in optimizer.param_groups if group["params"]]
    STEPS.stepped_groups(keys or [(id(optimizer), 0)])


@_guarded("torch.nn")
def _modules(module) -> None:
    """Watch for the model, whose input is counted where no loader or trainer counts a batch (tensors made or sliced
    in the loop): immune to a loader's fetching ahead."""
    STEPS.finder = module.register_module_forward_pre_hook(_not_traced(_find_model))


def _find_model(module, _args) -> None:
    """The first module called with gradients on that has parameters is the model (a whole model is called before
    its parts): where no loader or trainer counted a batch before it, its calls are counted from this one on (a
    forward hook, which sees keyword inputs too); else nothing is added to the model."""
    if STEPS.finder is None or not sys.modules["torch"].is_grad_enabled() or next(module.parameters(), None) is None:
        return
    STEPS.finder.remove()
    STEPS.finder = None
    if STEPS.counted:
        return
    try:
        STEPS.model = module, module.register_forward_hook(_not_traced(_model_input), with_kwargs=True)
    except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure (an old torch)
        STEPS.note(f"dlperf hook for the model's input: {type(error).__name__}: {error}")


def _model_input(_module, args, kwargs, _output) -> None:
    """A call of the model: its input's first dimension and real tokens, while no loader or trainer counts."""
    if STEPS.counted or not sys.modules["torch"].is_grad_enabled():
        return
    n, tokens = _batch_size(args[0] if args else kwargs)
    STEPS.model_samples += n
    STEPS.model_tokens += tokens


def _check_model(optimizer) -> None:
    """At the first update: a watched module that holds none of the stepped parameters (a frozen teacher called
    first) is not the model: its input is not counted."""
    model, handle = STEPS.model
    params = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if all(id(p) not in params for p in model.parameters()):
        handle.remove()
        STEPS.model = None
        STEPS.model_samples = STEPS.model_tokens = 0


def _gpu_clock(optimizer) -> None:
    STEPS.gpu = importlib.import_module("_dlperf_gpu_steps").clock_for(optimizer)


@_guarded("torch")
def _torch(module) -> None:
    module.register_optimizer_step_post_hook(_not_traced(_stepped))


@_guarded("GradScaler")
def _grad_scaler(module) -> None:
    importlib.import_module("_dlperf_gpu_steps").count_skipped_steps(module, _stepped)


def _not_traced(function):
    """`function`, left out of torch.compile's graphs where dynamo is already loaded (a compiled step calls the
    hook: dynamo would warn about its clock call into the script's output); called as is otherwise."""
    state: dict = {}

    def hook(*args):
        if "run" not in state:
            dynamo = sys.modules.get("torch._dynamo")
            if dynamo is None:
                return function(*args)
            state["run"] = dynamo.disable(function, recursive=True)
        return state["run"](*args)

    return hook


LAUNCHED = (os.environ.get("WORLD_SIZE", ""), "RANK" in os.environ)  # as the launcher started this process


@_guarded("torch.distributed")
def _distributed(module) -> None:
    """A process group that cannot form with the processes launched waits forever: say so in one line, exit."""
    init = module.init_process_group

    def checked_init(*args, **kwargs):
        world = kwargs.get("world_size", args[3] if len(args) > 3 else -1)
        launched, per_rank = LAUNCHED
        if isinstance(world, int) and world > 0 and launched.isdigit() and world != int(launched):
            fix = (
                "the script starts its own workers: run it once per node, add --command-per node"
                if per_rank
                else "set --nodes x --devices-per-node to the script's processes"
            )
            sys.stderr.write(
                f"dlperf: the script forms a process group of {world} processes where {launched} were launched "
                f"(WORLD_SIZE): {fix}\n"
            )
            sys.stderr.flush()
            os._exit(2)
        return init(*args, **kwargs)

    module.init_process_group = checked_init


@_guarded("torch DataLoader")
def _dataloader(module) -> None:
    """Each batch a DataLoader's iterator yields (torchdata's StatefulDataLoader's too: a subclass), on the main
    thread only: a loader read from a thread of its own (torchdata.nodes' Prefetcher over a DataLoader,
    prefetch_generator's BackgroundGenerator) is fetching ahead of the updates, and that thread's grad mode is not
    the loop's (an evaluation pass counted); there the model's input is counted."""
    base = module._BaseDataLoaderIter
    fetch = base.__next__

    grad = sys.modules["torch"].is_grad_enabled

    def counted_next(self):
        batch = fetch(self)
        if not STEPS.quiet and grad() and threading.current_thread() is threading.main_thread():
            try:
                STEPS.count(batch)
            except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
                STEPS.note(f"dlperf hook for the DataLoader: {type(error).__name__}: {error}")
        return batch

    base.__next__ = counted_next


@_guarded("accelerate")
def _accelerate(module) -> None:
    """accelerate's loaders fetch one batch ahead of the one they yield: what they yield is counted."""
    for name in ("DataLoaderShard", "DataLoaderDispatcher"):
        cls = getattr(module, name, None)
        if cls is not None:
            cls.__iter__ = _yielded(cls.__iter__, "accelerate")


@_guarded("timm")
def _timm(module) -> None:
    """timm's PrefetchLoader (timm/data/loader.py) takes the next batch from its DataLoader before it yields the one
    before: each epoch's first update would count two batches and its last none. What it yields is counted."""
    module.PrefetchLoader.__iter__ = _yielded(module.PrefetchLoader.__iter__, "timm")


def _yielded(iterate, what: str):
    def counted_iter(self):
        inner = iterate(self)
        while True:
            STEPS.quiet += 1
            try:
                batch = next(inner)
            except StopIteration:
                return
            finally:
                STEPS.quiet -= 1
            try:
                if sys.modules["torch"].is_grad_enabled():  # an evaluation loop under no_grad feeds no update
                    STEPS.count(batch)
            except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
                STEPS.note(f"dlperf hook for {what}: {type(error).__name__}: {error}")
            yield batch

    return counted_iter


@_guarded("deepspeed")
def _deepspeed(module) -> None:
    """DeepSpeed's engine finishes an update after its optimizer's last call (ZeRO gathers the updated partitions):
    an update made inside `engine.step()` is stamped when that returns."""
    step = module.DeepSpeedEngine.step

    def timed_step(self, *args, **kwargs):
        calls = STEPS.calls
        done = step(self, *args, **kwargs)
        if STEPS.calls != calls and STEPS.open_at is not None:
            STEPS.last_call(time.monotonic())
        return done

    module.DeepSpeedEngine.step = timed_step


@_guarded("transformers")
def _transformers(module) -> None:
    step = module.Trainer.training_step

    def counted_step(self, model, inputs, *args, **kwargs):
        try:
            STEPS.count(inputs, framework=True)
        except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
            STEPS.note(f"dlperf hook for transformers: {type(error).__name__}: {error}")
        return step(self, model, inputs, *args, **kwargs)

    module.Trainer.training_step = counted_step
    metrics = module.speed_metrics

    def timed_metrics(split, start_time, *args, **kwargs):
        """transformers.trainer_utils.speed_metrics: train_runtime is time.time() at this call less start_time; the
        call with num_samples is the end of training (Trainer's `_finalize_training`), not a log's tokens/s."""
        if split == "train" and kwargs.get("num_samples") is not None:
            now, wall = time.monotonic(), time.time()
            STEPS.mark("train", now - (wall - start_time), now)
        return metrics(split, start_time, *args, **kwargs)

    module.speed_metrics = timed_metrics


@_guarded("lightning")
def _lightning(module) -> None:
    package = module.__name__.rsplit(".trainer.trainer", 1)[0]  # lightning.pytorch, or pytorch_lightning
    Callback = importlib.import_module(f"{package}.callbacks").Callback  # noqa: N806 - a class

    class Samples(Callback):
        def on_train_epoch_start(self, trainer, pl_module) -> None:
            STEPS.mark("epoch", time.monotonic())

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # Lightning's own names
            try:
                STEPS.count(batch, framework=True)  # each micro-batch: its loader fetches one ahead
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
        """Stamps each execution of `steps_per_execution` batches, in Keras' own batch order; async-safe, so Keras 3
        keeps its asynchronous dispatch of batch callbacks. Keras calls `on_train_batch_begin` on the loop's thread
        in order, but runs the end calls on a thread pool once each execution's logs are ready, in no set order (a
        later batch's call may come first): an end call is held until every execution begun before it has ended,
        then written in turn, so each line is the update Keras numbers next. A later execution's logs being ready
        means the earlier ones have run: a held execution is stamped at the earliest end call at or after it
        (times never go back). Keras waits for every end call of an epoch before its next begins."""

        async_safe = True

        def __init__(self, sizes) -> None:
            super().__init__()
            self.sizes, self.lock = sizes, threading.Lock()
            self.begun: list[int] = []  # the first batch of each execution begun and not yet written, in order
            self.ended: dict[int, tuple[float, int]] = {}  # first batch -> (its end call's time, its last batch)

        def on_train_batch_begin(self, batch, logs=None) -> None:
            with self.lock:
                self.begun.append(batch)

        def on_train_batch_end(self, batch, logs=None) -> None:  # Keras passes `logs=` by name
            now = time.monotonic()
            with self.lock:
                first = max((b for b in self.begun if b <= batch), default=None)
                if first is None:  # never begun: nothing to place it after
                    STEPS.note(f"dlperf hook for keras: batch {batch} ended without beginning")
                    return
                self.ended[first] = (now, batch)
                while self.begun and self.begun[0] in self.ended:
                    at = min(t for t, _ in self.ended.values())
                    begin = self.begun.pop(0)
                    last = self.ended.pop(begin)[1]
                    STEPS.record(sum(self.sizes(i) for i in range(begin, last + 1)), at)

    fit = module.Model.fit

    def timed_fit(self, *args, **kwargs):
        try:
            sizes = _keras_batches(args, kwargs)
        except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
            STEPS.note(f"dlperf hook for keras: {type(error).__name__}: {error}")
            sizes = lambda _i: 0  # noqa: E731 - not counted
        if len(args) > 5:  # callbacks given in place
            args = (*args[:5], [*(args[5] or []), Steps(sizes)], *args[6:])
        else:
            kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), Steps(sizes)]
        return fit(self, *args, **kwargs)

    module.Model.fit = timed_fit


def _keras_batches(args, kwargs):
    """The samples of fit's batch i where it is given arrays (its batch_size, 32 where not given; the epoch's
    short last batch; validation_split's share left out), else 0 (a dataset or generator: not counted)."""
    x = kwargs.get("x", args[0] if args else None)
    batch = kwargs.get("batch_size", args[2] if len(args) > 2 else None) or 32
    shape = getattr(_first_tensor(x), "shape", None)
    if not shape or kwargs.get("steps_per_epoch") is not None:
        return lambda _i: 0
    split = kwargs.get("validation_split", args[6] if len(args) > 6 else 0.0) or 0.0
    n = int(shape[0])
    n = math.ceil(n * (1.0 - split)) if split else n  # keras' train_validation_split
    return lambda i: max(0, min(batch, n - i * batch))


PATCHES = {
    "torch.nn.modules.module": _modules,
    "torch.optim.optimizer": _torch,
    "torch.amp.grad_scaler": _grad_scaler,
    "torch.utils.data.dataloader": _dataloader,
    "torch.distributed.distributed_c10d": _distributed,
    "accelerate.data_loader": _accelerate,
    "timm.data.loader": _timm,
    "deepspeed.runtime.engine": _deepspeed,
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
    atexit.register(STEPS.exit)
    os.register_at_fork(after_in_child=STEPS.forked)
_next_sitecustomize()
