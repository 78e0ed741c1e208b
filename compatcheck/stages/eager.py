"""eager: the model as written. It is the reference; run twice to tell nondeterminism from backend error,
and sample by sample against batches of the user's samples, to tell whether answers depend on the batch."""

from __future__ import annotations

import re

import torch

from compatcheck.diagnose.batching import batch_dependence
from compatcheck.diagnose.mutation import input_mutation
from compatcheck.diagnose.unstable import instability
from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext

_MODE_DEPENDENT = (
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.modules.dropout._DropoutNd,
    torch.nn.modules.instancenorm._InstanceNorm,
)


# `training=True` spelled out in a dropout call: on in eval mode too.
_DROPOUT_ALWAYS = re.compile(r"\btraining\s*=\s*True\b")


class Eager(Stage):
    name = "eager"

    def __init__(self):
        self.unstable: str | None = None  # where eager itself is far from float64
        self.batching: list[Finding] = []

    def build(self, ctx: StageContext):
        ctx.reference  # noqa: B018 - computing it is the point: it raises what the model raises
        self.batching = batch_dependence(ctx, self.name)
        return ctx.eager

    def backend(self, ctx: StageContext) -> str:
        return f"torch {torch.__version__}"

    def note(self, ctx: StageContext) -> str | None:
        return self.unstable

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        findings = []
        if error is not None:
            frame = ctx.spec.user.from_exception(error)
            findings.append(ctx.spec.user.finding(
                self.name, "eager-error", f"the model itself raises {type(error).__name__}: {error}",
                location=frame,
            ))
            return findings
        if ctx.spec.arrived_training:
            findings.extend(self._training_mode(ctx))
        findings.extend(input_mutation(ctx, self.name))
        if ctx.reduced:
            from compatcheck.diagnose.precision import precision_findings

            findings.extend(precision_findings(ctx))
        findings.extend(self.batching)
        unstable = instability(ctx, self.name)
        self.unstable = f"eager itself is far from float64: {unstable[0].cite()}" if unstable else None
        findings.extend(unstable)
        if ctx.varies:
            findings.append(self._variation(ctx))
        elif ctx.noise is not None:
            findings.append(ctx.spec.user.finding(
                self.name, "nondeterministic",
                "eager gives different results on two runs with the same seed; later stages are compared "
                "with that spread allowed, so a difference within it is not blamed on a backend",
                rewrite="seed or remove the randomness in forward (dropout with training=True, torch.rand...), "
                        "or set torch.use_deterministic_algorithms(True)",
            ))
        return findings

    def _variation(self, ctx: StageContext) -> Finding:
        site = ctx.varies.first()
        if ctx.varies.random:
            what = f"draws random numbers ({site.what})"
            then = "each artifact is run again under a second seed and must vary too"
        else:
            what = f"reads the clock ({site.what})"
            then = ("each artifact is run again with the clock moved and must change too; an exported or traced "
                    "artifact keeps the time it was built at: pass the time in as an input instead")
        finding = ctx.spec.user.finding(
            self.name, "nondeterministic", f"forward {what}: its outputs change by design, so no stage's values "
            f"are compared with eager's; {then}", location=site.frame, op=site.what)
        if finding.code and "dropout" in finding.code.lower() and _DROPOUT_ALWAYS.search(finding.code):
            finding.rewrite = _DROPOUT_ALWAYS.sub("training=self.training", finding.code)
            finding.message += ("; dropout with training=True stays on in eval mode, in every artifact: "
                                "training=self.training turns it off for inference")
        return finding

    def _training_mode(self, ctx: StageContext) -> list[Finding]:
        by_site: dict[tuple, list[str]] = {}
        for name, module in ctx.spec.model.named_modules():
            if isinstance(module, _MODE_DEPENDENT):
                frame = ctx.spec.build_sites.get(name)
                key = (type(module).__name__, frame.filename if frame else None, frame.lineno if frame else None)
                by_site.setdefault(key, []).append(name)
        findings = []
        for (kind, file, line), names in by_site.items():
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            findings.append(ctx.spec.user.finding(
                self.name, "training-mode",
                f"{ctx.spec.factory}() returned the model in training mode; {kind} behaves differently in "
                f"training ({shown}). compatcheck ran everything in eval mode; an export in training mode "
                f"bakes in batch statistics or random dropout",
                location=(file, line) if file else None, op=kind,
                rewrite=f"return model.eval() from {ctx.spec.factory}(), and call model.eval() before "
                        "torch.jit.trace / torch.onnx.export in your own export script",
            ))
        return findings

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "def run(args, kwargs):\n    with torch.no_grad():\n        return model(*args, **kwargs)\n"
            "return run\n"
        )
