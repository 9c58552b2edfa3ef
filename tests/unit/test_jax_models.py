"""The workloads' Flax models are the PyTorch ones: same parameter tensors, same counts; their JAX recipes read the
one plan; and what the JAX engine refuses, it refuses in one line before any process starts."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

pytest.importorskip("flax", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tiny import TINY_GPT_SHAPE

from dlperf.engines.base import RankEnv  # noqa: E402
from dlperf.engines.jax import host  # noqa: E402
from dlperf.engines.jax.engine import JaxEngine  # noqa: E402
from dlperf.engines.jax.step import JaxStep  # noqa: E402
from dlperf.errors import ConfigError  # noqa: E402
from dlperf.workloads import check_engine, check_spec, spec_from_mapping  # noqa: E402
from dlperf.workloads.gpt import jax_step as gpt_jax  # noqa: E402
from dlperf.workloads.gpt.jax_model import GPT  # noqa: E402
from dlperf.workloads.resnet.jax_model import ResNet50  # noqa: E402

RESNET50_PARAMETERS = 25_557_032  # torchvision's published figure for resnet50 (IMAGENET1K_V1 weights' "num_params")


def flax_shapes(module, sample) -> Counter:
    """Parameter shapes as PyTorch stores them: conv kernels HWIO -> OIHW, dense kernels (in, out) -> (out, in)."""
    params = jax.eval_shape(module.init, jax.random.key(0), sample)["params"]
    shapes: Counter = Counter()
    for leaf in jax.tree.leaves(params):
        shape = leaf.shape
        if len(shape) == 4:
            shape = (shape[3], shape[2], shape[0], shape[1])
        elif len(shape) == 2:
            shape = shape[::-1]
        shapes[shape] += 1
    return shapes


def torch_shapes(module) -> Counter:
    return Counter(tuple(p.shape) for p in module.parameters() if p.requires_grad)


def test_resnet50_matches_torchvision():
    torchvision = pytest.importorskip("torchvision")
    torch_model = torchvision.models.resnet50(weights=None)
    shapes = flax_shapes(ResNet50(1000), jnp.zeros((1, 224, 224, 3)))
    count = sum(n * _size(shape) for shape, n in shapes.items())
    assert count == sum(p.numel() for p in torch_model.parameters() if p.requires_grad) == RESNET50_PARAMETERS
    # equal multisets of tensor shapes: the same layers, not just the same total
    assert shapes == torch_shapes(torch_model)


def test_gpt_matches_torch_gpt():
    pytest.importorskip("torch")
    from dlperf.workloads.gpt.model import GPT as TorchGPT
    from dlperf.workloads.gpt.model import GPTShape, count_parameters

    shape = GPTShape(num_layers=3, hidden_size=64, num_heads=4, seq_length=32, vocab_size=640)
    module = GPT(shape.num_layers, shape.hidden_size, shape.num_heads, shape.seq_length, shape.vocab_size)
    shapes = flax_shapes(module, jnp.zeros((1, shape.seq_length), jnp.int32))
    # nn.Embed stores (vocab, hidden) as torch does: undo the 2-D flip for the two embeddings
    for rows in (shape.vocab_size, shape.seq_length):
        shapes[(shape.hidden_size, rows)] -= 1
        shapes[(rows, shape.hidden_size)] += 1
    assert +shapes == torch_shapes(TorchGPT(shape))  # the tied output weight is the embedding: counted once
    assert sum(n * _size(s) for s, n in shapes.items()) == count_parameters(shape)


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


TINY_GPT = {**TINY_GPT_SHAPE, "micro_batch_size": 4, "lr": 1e-3, "weight_decay": 0.1}


def jax_spec(**values):
    """The checks a native JAX run passes before launch: the values, then its engine (the run kind's check)."""
    spec = spec_from_mapping({"engine": "jax", "device": "cpu", **values})
    plan = check_spec(spec)
    check_engine(spec)
    return spec, plan


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"model": "gpt", "precision": "amp-fp16"}, "amp-fp16 is not available"),
        ({"model": "resnet50", "data": "/imagenet"}, "synthetic data only"),
        ({"model": "resnet50", "compile": True}, "compiled by XLA already"),
    ],
)
def test_engine_refusals_are_one_line(values, words):
    spec = spec_from_mapping({"engine": "jax", **values})
    with pytest.raises(ConfigError, match=words) as error:
        host.preflight(spec, local=False)
    assert "\n" not in str(error.value)


def test_gpu_run_without_jaxs_cuda_plugin_is_refused_in_one_line(monkeypatch, capsys):
    """JAX without its CUDA plugin (as in this CPU machine's venv): a --device cuda run is refused before any rank
    starts, where each rank used to fail inside; with the plugin, or a jaxlib built with CUDA, the spec passes."""
    from conftest import assert_one_line_error, run_cli

    real = host.importlib.util.find_spec
    plugins: set[str] = set()
    monkeypatch.setattr(host.importlib.util, "find_spec",
                        lambda name: (name in plugins) if name in host.CUDA_PLUGINS else real(name))  # fmt: skip
    jaxlib = {"version": "0.10.2"}
    monkeypatch.setattr(host, "version", lambda name: jaxlib["version"] if name == "jaxlib" else "1")
    spec = spec_from_mapping({"engine": "jax", "model": "gpt", "device": "cuda"})
    code, _, err = run_cli(["run", "--engine", "jax", "--device", "cuda", "--model", "gpt", "--iters", "2"], capsys)
    assert_one_line_error(code, err, "needs JAX's CUDA plugin", "jax_cuda12_plugin", "pip install 'jax[cuda12]'")
    host.preflight(spec_from_mapping({"engine": "jax", "model": "gpt", "device": "cpu"}), local=True)
    host.preflight(spec, local=False)  # ranks on other hosts: their own venv, not checked here
    jaxlib["version"] = "0.4.20+cuda12.cudnn89"  # CUDA inside jaxlib, before the plugins
    host.preflight(spec, local=True)
    jaxlib["version"] = "0.10.2"
    plugins.add("jax_cuda13_plugin")
    host.preflight(spec, local=True)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"model": "gpt", "pp": 2, "num_layers": 2, "devices_per_node": 2}, "no pipeline parallelism"),
        ({"model": "gpt", "dp_mode": "fsdp", "devices_per_node": 2}, "--dp-mode fsdp is read by --engine torch only"),
        ({"model": "resnet50", "channels_last": True}, "--channels-last True is read by --engine torch only"),
        ({"model": "commbench"}, "model commbench has no jax implementation: choose --engine torch"),
    ],
)
def test_workload_refusals_are_one_line(values, words):
    with pytest.raises(ConfigError, match=words) as error:
        jax_spec(**values)
    assert "\n" not in str(error.value)


def test_gpt_recipe_reads_the_plan():
    """dp, tp, accumulation and the padded vocabulary are the plan's, not recomputed: vocab 600 at tp 2 pads to
    768 (a multiple of 128 x 2), global batch 16 over dp 2 of micro-batches of 2 accumulates 4."""
    spec, plan = jax_spec(model="gpt", **{**TINY_GPT, "vocab_size": 600, "micro_batch_size": 2},
                          devices_per_node=4, tp=2, global_batch_size=16)  # fmt: skip
    recipe = gpt_jax.recipe(spec, plan)
    assert (recipe.dp, recipe.tp, recipe.global_batch, recipe.accumulation_steps) == (2, 2, 16, 4)
    assert recipe.module.vocab_size == 768 and plan.lr == 1e-3


def test_engine_imports_no_torch():
    code = (
        "import sys, dlperf.workloads.gpt.jax_step, dlperf.workloads.resnet.jax_step; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_bf16_computes_in_bf16_and_keeps_fp32_parameters():
    losses = {}
    for precision in ("fp32", "amp-bf16"):
        spec, plan = jax_spec(model="gpt", precision=precision, seed=3, **TINY_GPT)
        JaxEngine().setup(spec, RankEnv(0, 1, 0, 1))
        step = JaxStep(gpt_jax.recipe(spec, plan), spec.seed)
        losses[precision] = [step.read_loss(step.step()) for _ in range(2)]
        assert {leaf.dtype for leaf in jax.tree.leaves(step.state)} <= {jnp.dtype("float32"), jnp.dtype("int32")}
    # the same model and batch (log 512 = 6.24 at the start), computed at bf16's ~3 significant digits
    assert losses["amp-bf16"] == pytest.approx(losses["fp32"], abs=0.05)
    assert losses["amp-bf16"] != losses["fp32"]
