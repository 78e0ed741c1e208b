"""The two spellings of an inferred dynamic dim. An export with the inferred Dim.DYNAMIC dims that fails
for a reason other than a specialization (an exporter bug one spelling of the dims trips) is tried
again with Dim.AUTO, which lets a dimension become static instead of failing (a recipe of
onnx_export); every input set is run through the result, so a dimension that silently specialized
cannot pass unseen. Only for dims compatcheck inferred, never the user's get_dynamic_shapes()."""

from __future__ import annotations

import re

_SPECIALIZED = re.compile(r"specializ|Constraints violated|marked .* as dynamic|Not all values of", re.I)


def is_specialization(error: BaseException) -> bool:
    """Whether the export failed because a dimension declared dynamic had to be a constant."""
    from compatcheck.diagnose.shapes import pinned_dims
    from compatcheck.errors import chain

    if pinned_dims(error):  # "inferred a static shape of 2 for dimension ...", worded so by some releases
        return True
    return any(_SPECIALIZED.search(str(one)) for one in chain(error, contexts=False))


def as_auto(dynamic_shapes):
    """The same dims, each Dim.DYNAMIC spelled Dim.AUTO."""
    from torch.export import Dim

    if isinstance(dynamic_shapes, dict):
        return {key: as_auto(value) for key, value in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (list, tuple)):
        return type(dynamic_shapes)(as_auto(value) for value in dynamic_shapes)
    return Dim.AUTO if dynamic_shapes == Dim.DYNAMIC else dynamic_shapes
