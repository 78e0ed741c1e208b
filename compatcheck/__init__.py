"""compatcheck: how far a PyTorch model gets down the deployment ladder, and what to rewrite."""

__version__ = "0.1.0"

from compatcheck.call import Call  # noqa: E402  (imports nothing: safe beside the lazy names below)

# Imported on first use, so `import compatcheck` (and the command line) stays free of torch.
_LAZY = {"check": "compatcheck.api", "assert_deployable": "compatcheck.api", "Report": "compatcheck.report.model",
         "UsageError": "compatcheck.errors"}
__all__ = ["__version__", "Call", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'compatcheck' has no attribute {name!r}")
