"""Every numeric flag of every command declares its bound where it is declared, and a value is refused in the
same words by each door it enters through: the flag, a sweep file's key, the JSON spec a rank decodes."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import pytest
from conftest import assert_one_line_error, run_cli

from dlperf.cli.declared_flags import add_declared
from dlperf.cli.main import build_parser
from dlperf.cli.parser import Declared, subcommands
from dlperf.errors import ConfigError
from dlperf.spec import setting
from dlperf.workloads import decode_spec


def unbounded_numbers(parser: argparse.ArgumentParser, prog: str = "dlperf") -> list[str]:
    """The int or float options of `parser` and its commands that take a number without a declared bound."""
    found = []
    for action in parser._actions:
        kind = action.type.kind if isinstance(action.type, Declared) else action.type
        bounded = isinstance(action.type, Declared) and (action.type.bound or action.type.choices)
        numeric = kind in (int, float) or (
            action.type is None and action.nargs != 0 and type(action.default) in (int, float)
        )
        if numeric and not bounded:
            found.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    for name, sub in subcommands(parser).items():
        found += unbounded_numbers(sub, f"{prog} {name}")
    return found


def test_every_numeric_flag_of_every_command_declares_its_bound():
    assert unbounded_numbers(build_parser()) == []


def test_a_new_unbounded_number_is_caught():
    @dataclass(frozen=True)
    class Options:
        share: float = setting(0.5, "a share without its bound")
        count: int = setting(1, "a count with one", bound="positive")

    parser = argparse.ArgumentParser()
    add_declared(parser, Options)
    assert unbounded_numbers(parser, "new") == ["new --share"]


def test_an_unknown_bound_is_refused_where_it_is_declared():
    with pytest.raises(ValueError, match="unknown bound 'positve'"):
        setting(1, "a typo", bound="positve")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "5", "1.5", "half"])
def test_recompute_share_outside_zero_to_one_is_refused(value, capsys):
    code, out, err = run_cli(["predict", "--model", "llama", "--recompute-mm-share", value], capsys)
    assert code == 2 and out == ""
    assert_one_line_error(code, err, "--recompute-mm-share: must be a share in [0, 1], got")


def test_global_batch_size_zero_in_a_sweep_file_is_refused_by_name(tmp_path, capsys):
    """Llama's `global_batch_size: 0` once became micro batch x dp; now the key's bound refuses it, before any
    process starts or anything is written."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("model: llama\ndevice: cpu\nglobal_batch_size: 0\n")
    code, _, err = run_cli(["sweep", str(sweep), "--out", str(tmp_path / "out")], capsys)
    assert_one_line_error(code, err, "global_batch_size must be a positive integer, got 0")
    assert not list(tmp_path.glob("out/**/*.json"))


# (model, key, the flag's text, the YAML text, the JSON value, the words every door says)
DOORS = [
    ("llama", "global_batch_size", "0", "0", 0, "must be a positive integer, got 0"),
    ("gpt", "weight_decay", "-1", "-1", -1, "must be a non-negative finite number, got -1.0"),
    ("resnet50", "momentum", "nan", ".nan", math.nan, "must be a non-negative finite number, got nan"),
    ("resnet50", "timeout", "inf", ".inf", math.inf, "must be a positive finite number, got inf"),
    ("resnet50", "precision", "fp8", "fp8", "fp8", "must be one of fp32, amp-fp16, amp-bf16, got 'fp8'"),
    ("llama", "pp_schedule", "1f2b", "1f2b", "1f2b", "must be one of gpipe, 1f1b, interleaved-1f1b,"),
]


@pytest.mark.parametrize(("model", "key", "text", "yaml_text", "value", "words"), DOORS)
def test_flag_sweep_file_and_json_spec_say_the_same(tmp_path, capsys, model, key, text, yaml_text, value, words):
    option = "--" + key.replace("_", "-")
    code, _, err = run_cli(["run", "--model", model, "--device", "cpu", option, text, "--dry-run"], capsys)
    assert_one_line_error(code, err, f"argument {option}: {words}")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"model: {model}\ndevice: cpu\n{key}: {yaml_text}\n")
    code, _, err = run_cli(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--dry-run"], capsys)
    assert_one_line_error(code, err, f"{key} {words}")
    with pytest.raises(ConfigError) as refused:  # the spec a node agent hands each rank, as JSON
        decode_spec(json.loads(json.dumps({"model": model, "device": "cpu", key: value})))
    assert f"{option} {words}" in str(refused.value)


def test_a_count_of_thousands_of_digits_is_one_short_line(capsys):
    """int() refuses past 4300 digits and a message would quote them all: the text is cut, the line stays one."""
    code, _, err = run_cli(["run", "--iters", "9" * 5000], capsys)
    assert_one_line_error(code, err, "argument --iters: must be a positive integer, got '999")
    assert len(err) < 300
