"""Every mismatch gets a finding: which output of which input set differs from eager and the element where
the values part (or the shape each has); and where the artifact shows the tensors it makes along the way
(TorchScript), the first line of forward whose tensor has another size than eager's, with both sizes."""

from __future__ import annotations

from compatcheck.diagnose.found import finding_at, plain
from compatcheck.errors import one_line
from compatcheck.report.model import Finding


def _what_differs(ctx) -> tuple[int, str | None, str] | None:
    """(input set, output, how it differs) of the first input set whose outputs differ from eager's."""
    one = next((one for one in ctx.input_results if not one.ok and one.error is None and one.index >= 0), None)
    if one is None:
        return None
    leaf = next((leaf for leaf in one.leaves if not leaf.ok), None)
    if leaf is None:
        return one.index, None, f"the outputs' structure differs from eager's: {one.structure}"
    return one.index, leaf.output, leaf.problem or "differs from eager"


def _size_apart(ctx, index: int, intermediates):
    """(line, eager's shape, the artifact's) of the first line whose tensor differs in size; None where the
    artifact does not show its tensors or every size agrees."""
    from compatcheck.diagnose.script_sizes import eager_shapes, first_size_apart

    input_set = ctx.spec.input_sets[index]
    artifact = intermediates(input_set)
    if artifact is None:
        return None
    model = ctx.spec.pristine.copy() if ctx.spec.pristine else ctx.spec.model
    return first_size_apart(eager_shapes(model, ctx.spec.user, input_set), artifact)


def mismatch_findings(stage: str, ctx, findings: list[Finding], intermediates) -> list[Finding]:
    """`findings` with the mismatch's own: first where a line makes a tensor of another size (that is where
    the two part), else last, unless a finding already names the output."""
    differs = _what_differs(ctx)
    if differs is None:  # the mismatch is under load, at a swept size or in precision: those have their own
        return findings
    index, output, how = differs
    what = f"output '{output}' on input set {index + 1}: {how}" if output is not None else \
        f"on input set {index + 1}, {how}"
    try:
        apart = _size_apart(ctx, index, intermediates)
    except Exception as exc:  # the sizes add to the finding; the mismatch stands without them
        apart, what = None, f"{what} (the sizes along the way could not be compared: {one_line(exc)})"
    if apart is not None:
        where, want, got = apart
        message = (f"this line makes a tensor of shape {want} in eager and {got} in the {stage} artifact: the "
                   f"size is computed otherwise there, and from here on the two part; {what}")
        return [finding_at(ctx.spec.user, stage, "size-apart", message, location=where), *findings]
    if output is not None and any(f"'{output}'" in finding.message for finding in findings):
        return findings
    return [*findings, plain(stage, "output-mismatch", what)]
