"""onnxruntime: the exported ONNX file in an InferenceSession (CUDA EP when there is a GPU)."""

from __future__ import annotations

from compatcheck.onnxruntime_session import feeds, providers
from compatcheck.report.model import Finding
from compatcheck.stages.base import Stage, StageContext


class OnnxRuntime(Stage):
    name = "onnxruntime"
    flat_outputs = True

    def __init__(self):
        self.session = None
        self.failure: BaseException | None = None  # a node failing at run time, for the diagnosis

    def available(self, ctx: StageContext) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "onnxruntime is not installed"
        return None

    def build(self, ctx: StageContext):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            ctx.artifacts["onnx_export"], options, providers=providers()
        )

        def run(input_set):
            try:
                return self.session.run(None, feeds(self.session, input_set))
            except Exception as exc:
                self.failure = self.failure or exc
                raise

        return run

    def backend(self, ctx: StageContext) -> str | None:
        if self.session is None:
            return None
        import onnxruntime

        return f"onnxruntime {onnxruntime.__version__} {self.session.get_providers()[0]}"

    def upcast(self, ctx: StageContext) -> str | None:
        from compatcheck.onnxruntime_session import upcast_ops

        if self.session is None:
            return None
        provider = self.session.get_providers()[0]
        ops = upcast_ops(ctx.artifacts["onnx_export"], self.session.get_providers())
        dtype = str(ctx.reduced).removeprefix("torch.")
        return (f"{provider} computes {', '.join(ops)} in float32: its optimizer wraps them in Casts from "
                f"{dtype} and back") if ops else None

    def diagnose(self, ctx: StageContext, error: BaseException | None) -> list[Finding]:
        from compatcheck.diagnose.onnxruntime import runtime_findings
        from compatcheck.diagnose.sample import first_if_size_one

        return first_if_size_one(self.name, ctx, runtime_findings(self.name, ctx, error or self.failure, self.session))

    def reproduce(self, ctx: StageContext) -> str:
        return (
            "import onnxruntime\nfrom compatcheck.spec import InputSet\n"
            "session = onnxruntime.InferenceSession(os.path.join(HERE, 'model.onnx'),\n"
            f"                                       providers={providers()!r})\n"
            "names = [i.name for i in session.get_inputs()]\n"
            "def run(args, kwargs):\n"
            "    arrays = InputSet(args, kwargs).arrays_for(names, 'the ONNX model')\n"
            "    return session.run(None, dict(zip(names, arrays)))\n"
            "return run\n"
        )
