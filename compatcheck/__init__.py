"""compatcheck: how far a PyTorch model gets down the deployment ladder, and what to rewrite."""

__version__ = "0.1.0"
