"""aot_inductor: the export stage's program compiled ahead of time with AOTInductor into a .pt2
package (C++ that loads without Python), loaded back with aoti_load_package and run on every
input set."""

from __future__ import annotations

import os
import shutil

from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext
from compatcheck.torch_features import AOT_INDUCTOR

ARTIFACT = "model.aoti.pt2"


def _cpp_compiler() -> str | None:
    """The compiler inductor would run (CXX, else its defaults), or None when none works."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
    except ImportError:  # a torch that keeps it elsewhere: look for what inductor looks for
        candidates = (os.environ.get("CXX"),) if os.environ.get("CXX") else ("g++", "c++", "clang++")
        return next((found for found in map(shutil.which, candidates) if found), None)
    try:
        return get_cpp_compiler()
    except Exception:  # inductor's InvalidCxxCompiler: nothing it tried runs
        return None


class AotInductor(Stage):
    name = "aot_inductor"

    def needs(self, ctx: StageContext):
        return (AOT_INDUCTOR,)

    def available(self, ctx: StageContext) -> str | None:
        if _cpp_compiler() is None:
            return "no C++ compiler found: AOTInductor compiles the model to C++ (install g++ or set CXX)"
        return None

    def inductor(self, options) -> bool:
        return True

    def build(self, ctx: StageContext):
        import torch._inductor

        program = torch.export.load(ctx.artifacts["export"])
        path = ctx.artifact(ARTIFACT)
        torch._inductor.aoti_compile_and_package(program, package_path=str(path))
        ctx.artifacts[self.name] = str(path)
        compiled = torch._inductor.aoti_load_package(str(path))

        def run(input_set):
            with torch.no_grad():
                return compiled(*input_set.args, **input_set.kwargs)

        return run

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.export import stage_findings

        return stage_findings(self.name, ctx, error, kind="compile-error")

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "import torch._inductor\n"
            "# model.export.pt2 is what reproduce_export.py writes\n"
            "program = torch.export.load(os.path.join(HERE, 'model.export.pt2'))\n"
            f"package = torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(HERE, {ARTIFACT!r}))\n"
            "compiled = torch._inductor.aoti_load_package(package)\n"
            "def run(args, kwargs):\n    with torch.no_grad():\n        return compiled(*args, **kwargs)\n"
            "return run\n"
        )
