"""`compatcheck triton-repo`: a model repository for users to deploy.

The export stages run as in `compatcheck run` (in a worker, compared with eager); only artifacts that
passed go into the repository: <model>_onnx from onnx_export, and <model>_torchscript from jit_script,
else jit_trace. The ONNX file supplies the tensor names, dtypes and dims of both configs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from compatcheck.ladder import ROUTE
from compatcheck.triton.errors import TritonError

ONNX = ROUTE["onnx"].stages[0]
TORCHSCRIPT = (*ROUTE["torchscript"].stages, *ROUTE["trace"].stages)  # scripted where it passes, else traced


def write_repository(model: Path, factory: str, output: Path, *, native: bool, timeout: float,
                     queue_delay_ms: float, device: str = "cpu") -> list[str]:
    """Write the repository into `output`, its models' instances on `device` (checked there first); return one
    line per model written or left out."""
    from compatcheck.options import parse
    from compatcheck.report.model import Status
    from compatcheck.session.run import RunRequest, execute
    from compatcheck.triton import repository

    with tempfile.TemporaryDirectory(prefix="compatcheck-") as artifacts:
        chosen = parse({"stages": [ONNX, *TORCHSCRIPT], "timeout": timeout, "artifacts": artifacts, "device": device})
        report = execute(RunRequest(model, factory, chosen))
        if report.interrupted:
            raise TritonError("interrupted; nothing was written")
        results = {stage.name: stage for stage in report.stages}
        onnx = results[ONNX]
        if onnx.status is not Status.PASS:
            raise TritonError(f"{ONNX} did not pass ({onnx.status.value}: {onnx.reason}); the repository "
                              "takes its tensor names, dtypes and dims from the ONNX file")
        onnx_file = Path(onnx.artifacts[ONNX])
        io = repository.onnx_io(onnx_file)
        batch = repository.max_batch_size(shape[0] for one in report.model.input_shapes for shape in one if shape)
        name = repository.model_name(model.stem)
        repository.write_model(output, f"{name}_onnx", "onnx", onnx_file, io, native=native, batch_size=batch,
                               device=device, queue_delay_ms=queue_delay_ms)
        lines = [f"{name}_onnx: {onnx_file.name} for the "
                 f"{'onnxruntime' if native else 'python (onnxruntime)'} backend"]

        passed = [results[stage] for stage in TORCHSCRIPT if results[stage].status is Status.PASS]
        if passed:
            script = Path(passed[0].artifacts[passed[0].name])
            repository.write_model(output, f"{name}_torchscript", "torchscript", script, io, native=native,
                                   batch_size=batch, device=device, queue_delay_ms=queue_delay_ms)
            lines.append(f"{name}_torchscript: {script.name} from {passed[0].name} for the "
                         f"{'pytorch' if native else 'python (torch)'} backend")
        else:
            why = "; ".join(f"{stage} {results[stage].status.value}: {results[stage].reason}"
                            for stage in TORCHSCRIPT)
            lines.append(f"no TorchScript model ({why})")
    return lines
