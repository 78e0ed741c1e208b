"""reproduce_<stage>.py scripts: the stage's own code, run on the run's inputs and judged as the run judged.

A reproducer loads the model exactly as the worker does (same working directory and sys.path, the
same module name in sys.modules, the same seeds), takes the input sets saved in inputs.npz instead
of calling get_inputs() again for them, builds the artifact with the lines the stage wrote, runs it
on every input set and compares with eager through compatcheck's own comparison. It prints one
line per input set and exits 0 when it reaches the verdict the stage reported, 1 when it does not.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from compatcheck.payload import FILE_NAME

TEMPLATE = '''\
"""Reproduces compatcheck's {stage} stage for {model}.

Builds the artifact as the stage did, runs it on every input set saved in inputs.npz and compares
each with eager the way compatcheck does. Run it from any directory with the Python that ran
compatcheck; it exits 0 when it reaches the verdict compatcheck reported ({expected}), 1 when not.
"""
import os
import sys

import torch
from torch.export import Dim

from compatcheck.worker.reproduce import Reproduction

HERE = os.path.dirname(os.path.abspath(__file__))
case = Reproduction({model!r}, {factory!r}, os.path.join(HERE, "inputs.npz"), cwd={cwd!r}, options={options!r}{payload})
model, input_sets, dynamic_shapes = case.model, case.input_sets, case.dynamic_shapes


def build():
    """The stage's artifact as a function of (args, kwargs), or None when there is nothing to run."""
{body}

sys.exit(case.check(build, stage={stage_name!r}, expected={expected!r}))
'''


def write(stage, ctx, expected: str | None) -> None:
    """Write reproduce_<stage>.py into the working folder; `expected` is the stage's verdict."""
    body = stage.reproduce(ctx)
    if not body or (ctx.spec.is_object and not (ctx.workdir / FILE_NAME).exists()):
        return  # nothing to rebuild, or a model object run in-process: no payload file to load it from
    # A model object (check()) is loaded from its payload file beside the script, with the sys.path it came with.
    payload = (f",\n                   payload=os.path.join(HERE, {FILE_NAME!r}), sys_path={sys.path!r}"
               if ctx.spec.is_object else "")
    text = TEMPLATE.format(
        stage=stage.name, model=str(ctx.spec.path), factory=ctx.spec.factory, cwd=os.getcwd(),
        options=ctx.options.model_dump(mode="json"), body=textwrap.indent(body, "    "),
        stage_name=stage.name, expected=expected, payload=payload,
    )
    (ctx.workdir / f"reproduce_{stage.name}.py").write_text(text)


def save_inputs(input_sets, path: Path) -> None:
    import numpy as np
    import torch

    arrays = {}
    for index, input_set in enumerate(input_sets):
        for leaf_index, leaf in enumerate(input_set.leaves()):
            leaf = leaf.detach().cpu()
            arrays[f"set{index}_input{leaf_index}"] = (leaf.float() if leaf.dtype == torch.bfloat16 else leaf).numpy()
    np.savez(path, **arrays)


class Reproduction:
    def __init__(self, model: str, factory: str, inputs: str, cwd: str, options: dict, payload: str | None = None,
                 sys_path: list[str] = ()):
        import numpy as np
        import torch

        from compatcheck.options import RunOptions
        from compatcheck.spec import cast, load
        from compatcheck.stages.base import StageContext, bound

        if os.path.isdir(cwd):  # the worker ran in the user's working directory, with it first on sys.path
            os.chdir(cwd)
            sys.path[0] = cwd
        if payload:
            from compatcheck.payload import unpack

            self.spec = unpack(Path(payload), list(sys_path))
        else:
            self.spec = load(Path(model), factory)
        cast(self.spec, options.get("dtype", "float32"))
        saved = np.load(inputs)
        restored = []
        for index, input_set in enumerate(self.spec.input_sets):
            leaves = iter(range(len(input_set.leaves())))
            restored.append(input_set.map(lambda t, i=index: torch.from_numpy(
                saved[f"set{i}_input{next(leaves)}"]).to(dtype=t.dtype, device=t.device)))
        self.spec.given_inputs = restored
        run_options = RunOptions.model_validate(options)
        self.spec.place(run_options.device)
        self.ctx = StageContext(self.spec, run_options, Path(inputs).parent, {}, {})
        self.model = self.spec.model
        self.input_sets = [(s.args, s.kwargs) for s in self.spec.given_inputs]
        self.dynamic_shapes = self.spec.dynamic_shapes
        self.bound = bound(self.ctx)  # what the stage's call reads, bound as the run bound it

    def check(self, build, stage: str, expected: str | None) -> int:
        import torch

        from compatcheck import stages
        from compatcheck.errors import one_line
        from compatcheck.report.verdict import Evidence, judge
        from compatcheck.worker.guards import isolated_globals
        from compatcheck.worker.runs import run_input_set

        with isolated_globals(), torch.no_grad():  # the deployer's recipe, as the stage built it
            try:
                run = build()
            except Exception as exc:
                print(f"build: fail: {one_line(exc)}")
                verdict = "fail"
            else:
                if run is None:
                    print("built and checked; there is nothing to run it with")
                    verdict = "pass"
                else:
                    sets = []
                    for index, input_set in enumerate(self.spec.input_sets):
                        one = run_input_set(self.ctx, lambda s: run(s.args, s.kwargs), index, input_set,
                                            stages.load(stage))
                        sets.append(one)
                        print(f"input set {index + 1}: {judge(Evidence(input_sets=[one]))[0].value}{_detail(one)}")
                    verdict = judge(Evidence(input_sets=sets))[0].value
        print(f"verdict: {verdict}; compatcheck reported {expected or 'no verdict'}")
        return 0 if verdict == expected else 1


def _detail(one) -> str:
    if one.error:
        return f": {one.error}"
    if one.structure:
        return f": {one.structure}"
    bad = [leaf for leaf in one.leaves if not leaf.ok]
    return f": output {bad[0].output}: {bad[0].problem}" if bad else ""
