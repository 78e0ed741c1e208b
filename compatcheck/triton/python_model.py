"""Triton Python-backend model: copied into a repository as <model>/1/model.py, never imported by
compatcheck. It serves the model.onnx (with onnxruntime) or model.pt (TorchScript, with torch) beside
it, under the tensor names, dtypes and dims of its config.pbtxt, inside the server's Python stub.
Where the config's `execution_log` parameter names a file, every execution appends the ids of the
requests it ran together to it, one JSON list a line: the batch partners of each request.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.inputs = [tensor["name"] for tensor in config["input"]]
        self.outputs = [tensor["name"] for tensor in config["output"]]
        self.batched = config["max_batch_size"] > 0
        self.log = config.get("parameters", {}).get("execution_log", {}).get("string_value")
        folder = os.path.join(args["model_repository"], args["model_version"])
        onnx_file = os.path.join(folder, "model.onnx")
        # The instance group's kind (config.pbtxt): KIND_GPU instances run on their GPU.
        gpu = args.get("model_instance_kind") == "GPU"
        device = f"cuda:{args.get('model_instance_device_id', 0)}" if gpu else "cpu"
        self.run = _onnxruntime(onnx_file, self.outputs, device) if os.path.exists(onnx_file) else \
            _torchscript(os.path.join(folder, "model.pt"), self.inputs, device)

    def execute(self, requests):
        if self.log:
            with open(self.log, "a") as log:
                log.write(json.dumps([request.request_id() for request in requests]) + "\n")
        feeds = [{name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
                 for request in requests]
        if not self.batched:
            return [self._response(self.run(feed)) for feed in feeds]
        # The dynamic batcher may hand over several requests: run them as one batch, split the answer.
        bounds = np.cumsum([0] + [len(feed[self.inputs[0]]) for feed in feeds])
        outputs = self.run({name: np.concatenate([feed[name] for feed in feeds]) for name in self.inputs})
        return [self._response([output[start:end] for output in outputs])
                for start, end in zip(bounds[:-1], bounds[1:])]

    def _response(self, outputs):
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor(name, np.ascontiguousarray(value)) for name, value in zip(self.outputs, outputs)
        ])


def _onnxruntime(path, outputs, device):
    import onnxruntime

    providers = ["CPUExecutionProvider"]
    if device != "cpu":
        providers.insert(0, ("CUDAExecutionProvider", {"device_id": int(device.partition(":")[2])}))
    session = onnxruntime.InferenceSession(path, providers=providers)
    return lambda feed: session.run(outputs, feed)


def _torchscript(path, inputs, device):
    import torch

    module = torch.jit.load(path, map_location=device).eval()

    def run(feed):
        with torch.no_grad():
            result = module(*(torch.from_numpy(feed[name]).to(device) for name in inputs))
        return [leaf.cpu().numpy() for leaf in torch.utils._pytree.tree_leaves(result)]

    return run
