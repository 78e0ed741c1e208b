"""Eager's own findings: the model raising, modules left in training mode, inputs written in place,
reduced precision, answers that depend on the batch, where eager is numerically unstable, and outputs
that change by design."""

from __future__ import annotations

import re

import torch

from compatcheck.diagnose.found import finding_at
from compatcheck.diagnose.mutation import input_mutation
from compatcheck.diagnose.state import kept_findings
from compatcheck.diagnose.unstable import instability
from compatcheck.report.model import Finding
from compatcheck.variation import SEEDS

_MODE_DEPENDENT = (
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.modules.dropout._DropoutNd,
    torch.nn.modules.instancenorm._InstanceNorm,
)

# `training=True` spelled out in a dropout call: on in eval mode too.
_DROPOUT_ALWAYS = re.compile(r"\btraining\s*=\s*True\b")


def eager_findings(ctx, stage: str, error: BaseException | None, batching: list) -> tuple[list[Finding], str | None]:
    """Eager's findings, and the note on its pass where eager itself is far from float64."""
    findings = []
    if error is not None:
        frame = ctx.spec.user.from_exception(error)
        findings.append(finding_at(ctx.spec.user,
            stage, "eager-error", f"the model itself raises {type(error).__name__}: {error}",
            location=frame,
        ))
        return findings, None
    if ctx.spec.arrived_training:
        findings.extend(_training_mode(ctx, stage))
    findings.extend(input_mutation(ctx, stage))
    if ctx.kept:
        findings.extend(kept_findings(ctx, stage))
    if ctx.reduced:
        from compatcheck.diagnose.precision import precision_findings

        findings.extend(precision_findings(ctx))
    findings.extend(batching)
    unstable = instability(ctx, stage)
    unstable_note = f"eager itself is far from float64: {unstable[0].cite()}" if unstable else None
    findings.extend(unstable)
    if ctx.varies:
        findings.append(_variation(ctx, stage))
    elif ctx.noise is not None:
        findings.append(finding_at(ctx.spec.user,
            stage, "nondeterministic",
            "eager gives different results on two runs with the same seed; later stages are compared "
            "with that spread allowed, so a difference within it is not blamed on a backend",
            rewrite="seed or remove the randomness in forward (dropout with training=True, torch.rand...), "
                    "or set torch.use_deterministic_algorithms(True)",
        ))
    return findings, unstable_note


def _variation(ctx, stage: str) -> Finding:
    site = ctx.varies.first()
    if ctx.varies.random:
        # The op is named where its own output differed between the seeds (variation.drawing_ops).
        checked = f": its output differs under seeds {SEEDS[0]} and {SEEDS[1]}" if site.what.startswith("aten.") else ""
        what = f"draws random numbers ({site.what}{checked})"
        then = "each artifact is run again under a second seed and must vary too"
    else:
        what = f"reads the clock ({site.what})"
        then = ("each artifact is run again with the clock moved and must change too; an exported or traced "
                "artifact keeps the time it was built at: pass the time in as an input instead")
    finding = finding_at(ctx.spec.user,
        stage, "nondeterministic", f"forward {what}: its outputs change by design, so no stage's values "
        f"are compared with eager's; {then}", location=site.frame, op=site.what)
    if finding.code and "dropout" in finding.code.lower() and _DROPOUT_ALWAYS.search(finding.code):
        finding.rewrite = _DROPOUT_ALWAYS.sub("training=self.training", finding.code)
        finding.message += ("; dropout with training=True stays on in eval mode, in every artifact: "
                            "training=self.training turns it off for inference")
    return finding


def _training_mode(ctx, stage: str) -> list[Finding]:
    by_site: dict[tuple, list[str]] = {}
    for name, module in ctx.spec.model.named_modules():
        if isinstance(module, _MODE_DEPENDENT):
            frame = ctx.spec.build_sites.get(name)
            key = (type(module).__name__, frame.filename if frame else None, frame.lineno if frame else None)
            by_site.setdefault(key, []).append(name)
    findings = []
    for (kind, file, line), names in by_site.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        findings.append(finding_at(ctx.spec.user,
            stage, "training-mode",
            f"{ctx.spec.factory}() returned the model in training mode; {kind} behaves differently in "
            f"training ({shown}). compatcheck ran everything in eval mode; an export in training mode "
            f"bakes in batch statistics or random dropout",
            location=(file, line) if file else None, op=kind,
            rewrite=f"return model.eval() from {ctx.spec.factory}(), and call model.eval() before "
                    "torch.jit.trace / torch.onnx.export in your own export script",
        ))
    return findings

