"""What to do when a finding's cause lies in library code (transformers, timm, torchvision, ...): the
user cannot apply a rewrite there. A switch the library offers for that code is a recipe of the
catalog (rewrites.yaml), offered as a `passes-with` finding only once it was run and passed; the advice
here is what is left: a different release of the library, or a report upstream with the reproducer."""

from __future__ import annotations

import functools
import importlib.metadata

from compatcheck.report.model import Finding


@functools.cache  # packages_distributions reads every installed distribution's file list: once a package
def _release(package: str) -> str:
    names = importlib.metadata.packages_distributions().get(package, [package])
    try:
        return f"{package} {importlib.metadata.version(names[0])}"
    except importlib.metadata.PackageNotFoundError:
        return package


def advice(finding: Finding) -> str:
    """The same text for every finding of one stage in one library, so the report can print it once."""
    package = finding.library_file.split("/", 1)[0]
    return (f"The cause is in {_release(package)}'s code, not in yours: there is no line of yours to rewrite. "
            f"Pin or upgrade {package} to a release whose code does not do this, or report it upstream with the "
            f"minimal reproducer (`compatcheck run ... --artifacts DIR` writes reproduce_{finding.stage}.py).")
