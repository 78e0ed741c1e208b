"""Each option is defined once (user_options.OPTIONS): the CLI, check() and matrix.yaml follow from it."""

import pytest
import typer.main

from compatcheck.cli import app
from compatcheck.errors import UsageError
from compatcheck.matrix.config import RunSettings
from compatcheck.matrix.cells import Cell, run_arguments
from compatcheck.user_options import OPTIONS, parse
from tests.conftest import ROOT


def run_command():
    return typer.main.get_command(app).commands["run"]


def test_run_has_a_flag_per_option_with_its_help_and_default():
    flags = {opt: param for param in run_command().params for opt in param.opts}
    for option in OPTIONS:
        param = flags[option.flag]
        assert param.help == option.help
        if option.type is not bool:
            assert param.default == option.default, option.name
    assert flags["--no-cache"].is_flag and flags["--bench"].is_flag and flags["-j"] is flags["--jobs"]


def test_every_flag_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert [option.flag for option in OPTIONS if f"`{option.flag}" not in readme] == []


def test_matrix_yaml_takes_the_options_marked_for_it_and_passes_them_as_flags():
    assert list(RunSettings.model_fields) == [option.name for option in OPTIONS if option.matrix]
    settings = RunSettings(stages=["jit_trace"], atol=0.5, onnx_exporter="legacy")
    cell = Cell("env", "m", "/m.py", settings, (0, 0), [])
    assert run_arguments(cell) == ["run", "/m.py", "--quiet", "--stages", "jit_trace", "--atol", "0.5",
                                   "--onnx-exporter", "legacy"]


@pytest.mark.parametrize("values, as_flag, as_argument", [
    ({"atol": -1}, "--atol: must be a finite non-negative number, got -1",
     "atol: must be a finite non-negative number, got -1"),
    ({"timeout": 0}, "--timeout: must be a number of seconds above 0 and at most 604800 (a week), got 0",
     "timeout: must be a number of seconds above 0 and at most 604800 (a week), got 0"),
    ({"jobs": 0}, "--jobs must be at least 1, got 0", "jobs must be at least 1, got 0"),
    ({"cache": False, "timeout": "soon"}, "--timeout must be a number, got 'soon'", "timeout must be a number, got 'soon'"),
    ({"onnx_exporter": "magic"}, "--onnx-exporter must be dynamo or legacy, got 'magic'",
     "onnx_exporter must be dynamo or legacy, got 'magic'"),
    ({"memory_limit": "lots"}, "--memory-limit: must be a positive size like 4G or 512M, got 'lots'",
     "memory_limit: must be a positive size like 4G or 512M, got 'lots'"),
])
def test_the_same_check_words_the_option_as_the_caller_named_it(values, as_flag, as_argument):
    with pytest.raises(UsageError) as flag:
        parse(values, flags=True)
    with pytest.raises(UsageError) as argument:
        parse(values)
    assert (str(flag.value), str(argument.value)) == (as_flag, as_argument)


def test_parsed_options_become_the_workers_run_options():
    chosen = parse({"stages": ["onnxruntime"], "memory_limit": "2G", "bench": True, "bench_seconds": 0.5})
    run = chosen.run_options()
    assert run.stages == ["eager", "onnx_export", "onnxruntime"]
    assert (run.memory_limit_mb, run.bench_seconds) == (2048, 0.5)
    assert parse({}).run_options().bench_seconds is None
