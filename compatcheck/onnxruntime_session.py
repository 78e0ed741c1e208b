"""onnxruntime helpers the onnxruntime stage and its diagnosis share: which execution providers to
use here, and the feed dict of an input set."""

from __future__ import annotations


def providers() -> list[str]:
    import onnxruntime
    import torch

    available = onnxruntime.get_available_providers()
    if "CUDAExecutionProvider" in available and torch.cuda.is_available():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def feeds(session, input_set) -> dict:
    """The session's feed dict for an input set."""
    names = [i.name for i in session.get_inputs()]
    arrays = input_set.arrays_for(names, "the ONNX model", "; the exporter dropped or merged inputs")
    return dict(zip(names, arrays))
