"""Serving the model with a real Triton Inference Server: the model repository, the launchers that
start (or reach) a server, and the client that loads the model and sends it requests.

Nothing here is imported by `import compatcheck`; tritonclient, onnx and torch are imported lazily.
"""
