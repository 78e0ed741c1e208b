"""Each option is defined once, in the options table (compatcheck/options.py): the CLI's flags, check()'s
keywords, matrix.yaml's keys, the pytest plugin's --compatcheck-option, the workers' RunOptions and the
cache key all follow from it."""

import ast
import json
import subprocess
import sys
import textwrap

import pytest
import typer.main

from compatcheck.cli import app
from compatcheck.errors import UsageError
from compatcheck.matrix.cells import Cell, run_arguments
from compatcheck.matrix.config import RunSettings
from compatcheck.options import COMMAND_FLAGS, OPTIONS, at, parse
from tests.conftest import ROOT


def command(name):
    return typer.main.get_command(app).commands[name]


def test_run_has_a_flag_per_option_with_its_help_and_default():
    flags = {opt: param for param in command("run").params for opt in param.opts}
    for option in at("cli"):
        param = flags[option.flag]
        assert param.help == option.help
        if option.type is not bool:
            assert param.default == option.default, option.name
    assert flags["--no-cache"].is_flag and flags["--bench"].is_flag and flags["-j"] is flags["--jobs"]


def test_every_command_flag_comes_from_the_table():
    """A command's flags are exactly its rows of the table, so no flag has a default of its own."""
    for name in ("run", "checklist", "triton-repo", "matrix", "merge"):
        rows = [option for option in (*at("cli"), *COMMAND_FLAGS) if name in option.commands]
        declared = [param.opts[0] for param in command(name).params if param.param_type_name == "option"]
        assert declared == [option.flag for option in rows], name


def test_every_flag_is_on_the_options_page_as_the_table_gives_it():
    """docs/cli.md's tables are what docs/generate.py makes of the table, and name every flag."""
    from tests.test_docs import generator

    page = ROOT / "docs" / "cli.md"
    assert [str(stale) for stale in generator().update(page, {}, write=False)] == []
    text = page.read_text()
    for option in (*OPTIONS, *COMMAND_FLAGS):
        assert f"| `{option.flag}`" in text, option.flag


def test_matrix_yaml_takes_the_options_marked_for_it_and_passes_them_as_flags():
    assert list(RunSettings.model_fields) == [option.name for option in at("matrix")]
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


def test_parsed_options_become_the_workers_run_options_under_the_same_names():
    run = parse({"stages": ["onnxruntime"], "memory_limit": "2G", "bench": True, "bench_seconds": 0.5}).run_options()
    assert run.stages == ["eager", "onnx_export", "onnxruntime"]
    assert (run.memory_limit, run.bench, run.bench_seconds) == (2048, True, 0.5)
    assert set(type(run).model_fields) == {option.name for option in at("worker")}
    assert {option.name for option in OPTIONS if option.cache_key} <= set(type(run).model_fields)




def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is not ... or isinstance(node, (ast.List, ast.Tuple, ast.Dict))


# Fields that share an option's name but hold something else, recorded or read, never an option's default.
NOT_OPTIONS = {
    ("LeafComparison", "atol"): "the tolerance one comparison used, as the report records it",
    ("LeafComparison", "rtol"): "the tolerance one comparison used, as the report records it",
    ("Matrix", "baseline"): "matrix.yaml's expected-results file",
}


def literal_defaults(text: str) -> list[str]:
    """Where code outside the table spells an option's default: a typer.Option/Argument with a literal
    default, a field named as an option whose literal default is the option's, a dict of option defaults."""
    defaults: dict[str, list] = {}
    for option in (*OPTIONS, *COMMAND_FLAGS):
        defaults.setdefault(option.name, []).append(option.default)
    names = set(defaults)
    found = []
    tree = ast.parse(text)
    owner = {id(statement): node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
             for statement in node.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("Option",
                                                                                                       "Argument"):
            default = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "default"), None)
            if default is not None and _literal(default):
                found.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Field":
                value = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "default"),
                                                              None)
            same = _literal(value) and ast.literal_eval(value) in defaults[node.target.id] if value is not None else False
            if same and (owner.get(id(node)), node.target.id) not in NOT_OPTIONS:
                found.append(f"line {node.lineno}: {node.target.id} = {ast.unparse(node.value)[:40]}")
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if len(set(keys) & names) >= 2 and all(_literal(v) for v in node.values):
                found.append(f"line {node.lineno}: a dict of {sorted(set(keys) & names)}")
    return found


def test_no_option_default_is_spelled_outside_the_table():
    offenders = {str(path.relative_to(ROOT)): found for path in sorted((ROOT / "compatcheck").rglob("*.py"))
                 if path.name != "options.py" and (found := literal_defaults(path.read_text()))}
    assert offenders == {}


@pytest.mark.parametrize("text", [
    "import typer\ndef run(timeout: float = typer.Option(600.0, '--timeout')): ...\n",
    "from pydantic import BaseModel, Field\nclass RunOptions(BaseModel):\n    timeout: float = Field(600.0)\n",
    "class Settings:\n    timeout: float = 600.0\n",
    "DEFAULTS = {'timeout': 600.0, 'cache': True}\n",
])
def test_the_default_finder_sees_each_way_of_spelling_one(text):
    assert literal_defaults(text) != []


DUMMY_DOORS = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from types import SimpleNamespace
    from compatcheck import options

    dummy = options.Option("dummy_knob", float, 1.5, "A knob for this test.", doors=options.DOORS, cache_key=True,
                           gt=0)
    options.OPTIONS = (*options.OPTIONS, dummy)  # before any door is made from the table

    import typer.main
    from compatcheck import cli, pytest_plugin
    from compatcheck.errors import UsageError
    from compatcheck.matrix.cells import Cell, run_arguments
    from compatcheck.matrix.config import RunSettings
    from compatcheck.session.cache import run_key

    def refused(call):
        try:
            call()
        except (UsageError, ValueError) as exc:
            return " ".join(str(exc).split())

    seen = {}
    flag = next(p for p in typer.main.get_command(cli.app).commands["run"].params if "--dummy-knob" in p.opts)
    seen["cli"] = [flag.default, refused(lambda: options.parse({"dummy_knob": 0}, flags=True, door="cli"))]
    seen["api"] = [options.parse({}).dummy_knob, refused(lambda: options.parse({"dummy_knob": 0}))]
    settings = RunSettings(dummy_knob=2.5)
    seen["matrix"] = [RunSettings.model_fields["dummy_knob"].default, refused(lambda: RunSettings(dummy_knob=0)),
                      run_arguments(Cell("e", "m", "/m.py", settings, (0, 0), []))[-2:]]
    config = SimpleNamespace(getoption=lambda name: ["dummy_knob=2.5"])
    given = pytest_plugin._run_options(config)
    seen["pytest"] = [given, options.parse(given).dummy_knob]
    RunOptions = options.RunOptions
    seen["worker"] = [RunOptions.model_fields["dummy_knob"].default,
                      refused(lambda: RunOptions(stages=["eager"], dummy_knob=0))]
    keys = [run_key(Path("/m.py"), "get_model", options.parse({"dummy_knob": value}).run_options())[0]
            for value in (1.5, 1.5, 2.5)]
    seen["cache_key"] = [keys[0] == keys[1], keys[0] != keys[2]]
    print(json.dumps(seen))
""")


def test_a_new_row_reaches_every_door_with_its_default_and_bounds_and_the_cache_key():
    proc = subprocess.run([sys.executable, "-c", DUMMY_DOORS], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["cli"] == [1.5, "--dummy-knob must be a positive number, got 0"]
    assert seen["api"] == [1.5, "dummy_knob must be a positive number, got 0"]
    assert seen["matrix"][0] is None and "greater than 0" in seen["matrix"][1]  # unset unless matrix.yaml sets it
    assert seen["matrix"][2] == ["--dummy-knob", "2.5"]
    assert seen["pytest"] == [{"dummy_knob": "2.5"}, 2.5]
    assert seen["worker"][0] == 1.5 and "greater than 0" in seen["worker"][1]
    assert seen["cache_key"] == [True, True]
