"""`compatcheck triton-repo`: a model repository for users to deploy.

The export stages run as in `compatcheck run` (in a worker, compared with eager); only artifacts that
passed go into the repository: <model>_onnx from onnx_export, and <model>_torchscript from jit_script,
else jit_trace. The ONNX file supplies the tensor names, dtypes and dims of both configs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from compatcheck.triton.errors import TritonError

TORCHSCRIPT_STAGES = ("jit_script", "jit_trace")


def write_repository(model: Path, factory: str, output: Path, *, native: bool, timeout: float) -> list[str]:
    """Write the repository into `output`; return one line per model written or left out."""
    from compatcheck import ladder
    from compatcheck.options import RunOptions
    from compatcheck.report.model import Status
    from compatcheck.session.run import execute
    from compatcheck.triton import repository

    options = RunOptions(stages=ladder.select(["onnx_export", *TORCHSCRIPT_STAGES], None), timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="compatcheck-") as artifacts:
        report = execute(model, factory, options, artifacts_dir=Path(artifacts))
        if report.interrupted:
            raise TritonError("interrupted; nothing was written")
        results = {stage.name: stage for stage in report.stages}
        onnx = results["onnx_export"]
        if onnx.status is not Status.PASS:
            raise TritonError(f"onnx_export did not pass ({onnx.status.value}: {onnx.reason}); the repository "
                              "takes its tensor names, dtypes and dims from the ONNX file")
        onnx_file = Path(onnx.artifacts["onnx_export"])
        io = repository.onnx_io(onnx_file)
        batch = repository.max_batch_size(shape[0] for one in report.model.input_shapes for shape in one if shape)
        name = repository.model_name(model.stem)
        repository.write_model(output, f"{name}_onnx", "onnx", onnx_file, io, native=native, batch_size=batch)
        lines = [f"{name}_onnx: {onnx_file.name} for the "
                 f"{'onnxruntime' if native else 'python (onnxruntime)'} backend"]

        passed = [results[stage] for stage in TORCHSCRIPT_STAGES if results[stage].status is Status.PASS]
        if passed:
            script = Path(passed[0].artifacts[passed[0].name])
            repository.write_model(output, f"{name}_torchscript", "torchscript", script, io, native=native,
                                   batch_size=batch)
            lines.append(f"{name}_torchscript: {script.name} from {passed[0].name} for the "
                         f"{'pytorch' if native else 'python (torch)'} backend")
        else:
            why = "; ".join(f"{stage} {results[stage].status.value}: {results[stage].reason}"
                            for stage in TORCHSCRIPT_STAGES)
            lines.append(f"no TorchScript model ({why})")
    return lines
