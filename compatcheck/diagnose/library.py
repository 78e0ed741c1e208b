"""What to do when a finding's cause lies in library code (transformers, timm, torchvision, ...): the
user cannot apply a rewrite there, so the advice is a switch the library offers for that code, a
different release of it, or a report upstream with the reproducer."""

from __future__ import annotations

import importlib.metadata

from compatcheck.report.model import Finding

# (package, what the library frame or op must mention, the switch): switches a library offers to
# route around its own code. transformers picks the attention implementation per model.
_SWITCHES = (
    ("transformers", ("scaled_dot_product_attention", "sdpa"),
     'load the model with attn_implementation="eager" (from_pretrained(..., attn_implementation="eager"), or '
     'config._attn_implementation = "eager" before building it): attention is then computed with matmul and '
     "softmax in the model's own code instead of scaled_dot_product_attention"),
)


def _release(package: str) -> str:
    names = importlib.metadata.packages_distributions().get(package, [package])
    try:
        return f"{package} {importlib.metadata.version(names[0])}"
    except importlib.metadata.PackageNotFoundError:
        return package


def advice(finding: Finding) -> str:
    """The same text for every finding of one stage in one library with the same switch, so the report
    can print it once."""
    package = finding.library_file.split("/", 1)[0]
    evidence = f"{finding.library_file} {finding.library_code or ''} {finding.op or ''}"
    steps = [f"The cause is in {_release(package)}'s code, not in yours: there is no line of yours to rewrite."]
    switches = [f"Switch: {switch}." for name, words, switch in _SWITCHES
                if name == package and any(word in evidence for word in words)]
    steps += switches
    steps.append(f"{'Otherwise pin' if switches else 'Pin'} or upgrade {package} to a release whose code does not "
                 "do this, or report it upstream with the minimal reproducer (`compatcheck run ... --artifacts DIR` "
                 f"writes reproduce_{finding.stage}.py).")
    return " ".join(steps)
