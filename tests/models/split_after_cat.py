"""Two images through one encoder, as torchvision's RAFT does: concatenated along the batch, then chunked
back in two. The ONNX exporter's graph optimizer fails folding the chunk (a SplitToSequence of a
dynamic size), so the usual torch.onnx.export call fails; with optimize=False the file exports and
matches eager in onnxruntime."""

import torch


class SharedEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = torch.nn.Conv1d(3, 4, 3, padding=1)

    def forward(self, image1, image2):
        both = self.encode(torch.cat([image1, image2], dim=0))
        first, second = torch.chunk(both, chunks=2, dim=0)
        return first - second


def get_model():
    return SharedEncoder().eval()


def get_inputs():
    return [(torch.randn(2, 3, 8), torch.randn(2, 3, 8)), (torch.randn(3, 3, 10), torch.randn(3, 3, 10))]
