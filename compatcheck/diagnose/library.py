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
    package = finding.library_file.split("/", 1)[0]
    where = f"{finding.library_file}:{finding.library_line}"
    evidence = f"{finding.library_file} {finding.library_code or ''} {finding.op or ''}"
    steps = [f"The cause is in {_release(package)} ({where}), not in your code, so there is no line of yours to "
             "rewrite."]
    steps += [f"Switch: {switch}." for name, words, switch in _SWITCHES
              if name == package and any(word in evidence for word in words)]
    steps.append(f"Otherwise pin or upgrade {package} to a release whose code does not do this, or report it "
                 f"upstream with the minimal reproducer (`compatcheck run ... --artifacts DIR` writes "
                 f"reproduce_{finding.stage}.py).")
    return " ".join(steps)
