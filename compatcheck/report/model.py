"""The report schema. Knows nothing about torch: the worker fills it, renderers read it."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field

from compatcheck.ladder import NAMES
from compatcheck.report.kinds import FindingKind

SCHEMA_VERSION = 11
READABLE_VERSIONS = tuple(range(1, SCHEMA_VERSION + 1))  # older reports are migrated on load (see migrate and docs/report.md's changelog)


class Status(str, Enum):
    PASS = "pass"
    MISMATCH = "mismatch"
    FAIL = "fail"
    SKIP = "skip"
    CRASH = "crash"
    TIMEOUT = "timeout"
    BROKEN_ENV = "broken-env"  # torch, onnx or onnxruntime could not import what it needs: no verdict on the model
    INTERNAL = "internal-error"  # compatcheck's own code raised: no verdict on the model


# A stage that did not reach a verdict of its own for one of these reasons makes the run fail.
FAILING = {Status.MISMATCH, Status.FAIL, Status.CRASH, Status.TIMEOUT, Status.BROKEN_ENV, Status.INTERNAL}


class RouteStatus(str, Enum):
    WORKS = "works"
    WARNS = "works-with-warnings"
    BLOCKED = "blocked"
    UNCHECKED = "not-checked"


class Finding(BaseModel):
    stage: str
    kind: FindingKind = Field(description="what kind of finding (compatcheck/report/kinds.py, docs/findings.md)")
    op: str | None = Field(None, description="aten or ONNX op, or the Python construct")
    file: str | None = Field(None, description="the user's file the finding points into")
    line: int | None = None
    code: str | None = Field(None, description="the source line's text")
    message: str
    rewrite: str | None = Field(None, description="what to write instead, only where it fits the code shown")
    library_file: str | None = Field(
        None, description="where in library code it happened, below the user's line: the file under its package, "
                          "e.g. transformers/models/llama/modeling_llama.py")
    library_line: int | None = None
    library_code: str | None = Field(None, description="the library source line's text")
    advice: str | None = Field(
        None, description="what to do when the cause is in library code: a config switch, pinning or upgrading "
                          "the library, or reporting upstream with the reproducer")
    checked_by: str | None = Field(
        None, description="the run that checked the finding's claim before it was made, in words: 'the trace ran "
                          "at edge_index.shape[1] = 30 and matched eager'; None where the claim is the tool's own "
                          "error or was not checked")

    @property
    def where(self) -> str | None:
        """The user's file:line, when the finding has one."""
        return f"{self.file}:{self.line}" if self.file and self.line else None

    @property
    def library_where(self) -> str | None:
        """The library's file:line below the user's line, when the cause is in library code."""
        return f"{self.library_file}:{self.library_line}" if self.library_file and self.library_line else None

    def cite(self, *, op: bool = True) -> str:
        """The finding in a few words: kind (and op), and where: 'graph-break on `if` at model.py:12'."""
        at = " via ".join(part for part in (self.where, self.library_where if op else None) if part)
        return f"{self.kind}{f' on `{self.op}`' if op and self.op else ''}" + (f" at {at}" if at else "")


def shown_error(stage: "StageResult", value: float | None) -> float | None:
    """A stage's error figure as the table shows it: only where the verdict was reached by comparing values
    (pass, mismatch); a stage that failed on one input set after matching on another shows none."""
    return value if stage.status in (Status.PASS, Status.MISMATCH) else None


def blocker(findings: list[Finding]) -> str | None:
    """A stage's first finding in a few words, for the skip reasons of the stages that needed it:
    'dynamic-shape at model.py:12'."""
    return findings[0].cite(op=False) if findings else None


class LeafComparison(BaseModel):
    output: str = Field(description="the output's path in the returned structure, e.g. 'logits' or '0'")
    shape: list[int] | None = None
    dtype: str | None = None
    ok: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched_fraction: float | None = None
    worst_index: list[int] | None = None
    atol: float | None = None
    rtol: float | None = None
    required_atol: float | None = Field(None, description="smallest atol that passes at this rtol")
    required_rtol: float | None = Field(None, description="smallest rtol that passes at this atol")
    fp64_verdict: str | None = Field(
        None, description="'within-noise' when the result is as close to an fp64 eager run as eager itself"
    )
    problem: str | None = Field(None, description="why it is not ok, in words")
    rule: str | None = Field(None, description="the row of the comparison's rule table that decided (docs: "
                                               "comparison); absent before schema_version 11")
    accepted: str | None = Field(None, description="differences the contract accepts, counted and named: integers "
                                                   "at ties of the values beside them or at rounding edges")
    note: str | None = Field(None, description="how the output was read, where it is not as eager returns it")
    fp64_error: float | None = Field(None, description="with --dtype: RMS error against the float64 run (backend "
                                                       "fidelity)")
    eager_fp64_error: float | None = Field(None, description="with --dtype: eager's own RMS error against the float64 "
                                                             "run, in the same dtype")
    float32_error: float | None = Field(None, description="with --dtype: the largest absolute difference from the "
                                                          "model's float32 answers (how far the precision moved it)")


class InputSetResult(BaseModel):
    index: int = Field(description="the input set; -1 for a swept one")
    label: str | None = Field(None, description="for a swept input set, its size: 'batch 7'")
    dims: list[str] = Field([], description="for a swept input set, the dimensions it resized: 'x.shape[0]'")
    ok: bool
    error: str | None = Field(None, description="what the artifact raised on this input set")
    structure: str | None = Field(None, description="how the output structure differs from eager's")
    seconds: float | None = None
    leaves: list[LeafComparison] = []


class Timing(BaseModel):
    label: str = Field(description="what was timed: the stage, or e.g. triton_http")
    input_set: int
    iterations: int
    stable: bool = Field(description="the median settled before the time budget ran out")
    p50_ms: float
    p95_ms: float
    throughput: float | None = Field(None, description="samples per second at p50 (batch = first dim)")
    speedup_vs_eager: float | None = None


class ServedRequest(BaseModel):
    id: str = Field(description="the request id sent to the server, e.g. r3")
    protocol: str = Field(description="http or grpc")
    input_set: int
    rows: list[int] = Field(description="[start, end): the samples of the input set it carries")
    shared_with: list[str] | None = Field(
        None, description="the requests it ran in one execution with; null where the backend does not say")
    ok: bool = Field(description="its answer under load matches eager on its samples, as its answer alone does")
    problem: str | None = Field(None, description="how its answer differs, in words")


class ConcurrencyLevel(BaseModel):
    backend: str = Field(description="what served it, e.g. python backend (onnxruntime on the CPU)")
    protocol: str
    concurrency: int = Field(description="requests in flight at once")
    requests: int = Field(description="requests timed")
    seconds: float
    throughput: float = Field(description="requests answered per second")
    samples_per_second: float
    p50_ms: float
    p99_ms: float


class ServedLoad(BaseModel):
    """The served model under concurrent requests, as its dynamic batcher packs them."""

    addresses: list[str] = Field(description="the HTTP and gRPC addresses sent to: this machine only")
    queue_delay_ms: float = Field(description="how long the dynamic batcher waited to gather a batch")
    requests: list[ServedRequest] = Field(description="each sent alone, then all at once")
    executions: int = Field(description="model executions the concurrent requests took (execution_count)")
    inferences: int = Field(description="samples they carried (inference_count)")
    batch_stats: dict[int, int] = Field({}, description="batch size -> executions of that size (batch_stats)")
    shared: int | None = Field(None, description="requests that shared an execution with another; null where "
                                                 "the backend does not say which requests ran together")
    seconds: float = 0.0
    problem: str | None = Field(None, description="the first request whose answer changed under load, in words")
    levels: list[ConcurrencyLevel] = Field([], description="with --bench: throughput and latency per protocol "
                                                           "and concurrency")


class CacheOrigin(BaseModel):
    computed_at: str = Field(description="when the run that computed it started (UTC, ISO 8601)")
    tool_version: str = Field(description="the compatcheck version that computed it")
    log_cut: int = Field(0, description="bytes at the start of the computing worker's log that the cache did not "
                                        "keep (it keeps the last 8 KB, after a line saying so)")


class SweepInfo(BaseModel):
    sizes: list[str] = Field(description="the swept sizes: 'batch 1', 'input_ids.shape[1] = 12'")
    caps: dict[str, int] = Field({}, description="per dimension, the largest size eager takes, found by bisection")
    seconds: float = Field(0.0, description="what making the swept input sets cost")
    cut_short: bool = Field(False, description="--sweep-budget ran out before every size was made")


class Precision(BaseModel):
    """With --dtype float16 or bfloat16: how faithful a stage is in that precision, and what it cost."""

    dtype: str
    fp64_error: float | None = Field(None, description="backend fidelity: the stage's RMS error against the float64 "
                                                       "run, on the output and input set nearest what the rule allows")
    eager_fp64_error: float | None = Field(None, description="eager's own there, in the same dtype")
    allowed: float | None = Field(None, description="before schema_version 11, what the RMS rule allowed there: "
                                                    "2 × eager's + atol/10; the rule is now element by element")
    float32_error: float | None = Field(None, description="how far the model moved from its float32 answers: the "
                                                          "largest absolute difference over every output and input set")
    upcast: str | None = Field(None, description="what the backend computes in float32 instead, where it does so "
                                                 "on its own (onnxruntime's CPU provider)")


class PhaseRecord(BaseModel):
    """One phase of a stage's run (worker/phases.py): what it did with its budget."""

    name: str = Field(description="build, sweep, load, timing, diagnosis, meta or recipes")
    outcome: str = Field(description="ran; cut-short (it stopped its own work at its budget); timed-out (stopped "
                                     "from outside: its deadline, or the supervisor's kill); failed (compatcheck's "
                                     "own code raised)")
    seconds: float = 0.0
    budget: float | None = Field(None, description="the seconds it was given")
    note: str | None = Field(None, description="what it left undone, in words")


class StageResult(BaseModel):
    name: str = Field(description="the stage, in ladder order", json_schema_extra={"enum": list(NAMES)})
    status: Status
    seconds: float = 0.0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    reason: str | None = Field(None, description="one line: why it is not a pass, or a note on the pass")
    error: str | None = Field(None, description="the full error text of a failure")
    call: str | None = Field(None, description="the call that built the artifact, as the reproducer writes it "
                                               "(model, args, kwargs, dynamic_shapes: the model and its sample)")
    findings: list[Finding] = []
    input_sets: list[InputSetResult] = []
    artifacts: dict[str, str] = {}
    backend: str | None = Field(None, description="what executed the artifact, e.g. for onnxruntime how many nodes "
                                                  "each execution provider ran")
    cached: bool = Field(False, description="served from the result cache: same model, options and versions")
    cached_from: CacheOrigin | None = Field(None, description="for a cached stage: when and by which compatcheck "
                                                               "version it was computed")
    timings: list[Timing] = Field([], description="with --bench: latency and throughput per input set")
    recipes: list[str] = Field([], description="the other ways of building it that were tried after it failed, "
                                               "each with what it gave; empty for a stage that passed")
    swept: list[InputSetResult] = Field([], description="the artifact on the swept input sets: sizes the input "
                                                        "sets lack, made from them (a pass covers these too)")
    recompiles: list[str] = Field([], description="torch.compile: swept sizes its graphs do not cover, each with "
                                                  "dynamo's reason (a guard that fails there): it would compile again "
                                                  "for them, so they were not run (the first request of that size "
                                                  "waits for the compile)")
    sweep: SweepInfo | None = Field(None, description="on the reference stage: what the sweep made and what it "
                                                        "cost")
    precision: Precision | None = Field(None, description="with --dtype float16 or bfloat16: backend fidelity and "
                                                          "the distance from the float32 answers")
    load: ServedLoad | None = Field(None, description="triton: the served model under concurrent requests")
    covered: list[int] | None = Field(None, description="with `compatcheck fix`, on the reference stage: the "
                                                        "lines of the original model file its runs executed")
    phases: list[PhaseRecord] = Field([], description="each phase the stage ran, in order, with its budget and "
                                                      "outcome")


class Route(BaseModel):
    name: str = Field(description="a way to deploy: torch.compile, TorchScript (script), ONNX → onnxruntime → Triton, ...")
    stages: list[str] = Field(description="its stages, in order")
    status: RouteStatus
    stage: str | None = Field(None, description="the stage it is blocked at")
    finding: str | None = Field(None, description="what blocks it: the first finding of that stage, in short")
    summary: str = Field("", description="one line: the status and why")


class ModelInfo(BaseModel):
    path: str
    factory: str = "get_model"
    input_sets: int
    input_shapes: list[list[list[int]]] = Field(description="per input set, the shape of each tensor leaf")
    constants: dict[str, str] = Field({}, description="the non-tensor arguments, by where they go: constants baked "
                                                      "into every artifact (not inputs of the ONNX graph or the "
                                                      "served model), as repr()")
    dynamic_shapes: str | None = Field(None, description="the dynamic shapes used for export, as text")
    dynamic_shapes_inferred: bool = False
    tolerance: dict = {}


class RewriteStatus(str, Enum):
    PROVEN = "proven"  # eager's answers held, a stage that did not pass passes, none that passed fails
    PARTIAL = "partial"  # a stage got past its blocker and stopped at another
    REFUTED = "refuted"  # eager's answers moved, a stage that passed fails, or nothing improved
    NOT_COVERED = "not-covered"  # it changes a line no input set runs: these inputs cannot prove it


class Rewrite(BaseModel):
    """With `compatcheck fix`: one rewrite of the model file, made by a codemod and run through the ladder."""

    parts: list[str] = Field(description="what it applies: 'catalog-id at file:line', one per codemod; several "
                                         "for the combination of the proven ones")
    status: RewriteStatus
    why: str = Field(description="one line: what the run of the rewritten copy showed")
    diff: str = Field(description="the unified diff against the model file")
    unblocked: list[str] = Field([], description="the stages that did not pass before and pass on the rewritten copy")
    after: dict[str, Status] = Field({}, description="each stage's verdict on the rewritten copy")
    seconds: float = 0.0


class Report(BaseModel):
    schema_version: int = SCHEMA_VERSION
    tool_version: str
    created: str
    command: list[str] = []
    model: ModelInfo | None = None
    environment: dict[str, str] = {}
    options: dict = {}
    stages: list[StageResult] = []
    findings: list[Finding] = []
    routes: list[Route] = Field([], description="per deployment route, whether it works; assembled from the stages")
    rewrites: list[Rewrite] = Field([], description="with `compatcheck fix`: each rewrite a codemod made, with what "
                                                    "running the ladder on it proved")
    seconds: float = 0.0
    workers: int = Field(0, description="worker processes started: 1 unless a stage crashed or timed out")
    interrupted: bool = False
    run_key: str | None = Field(None, description="hash of what, besides the files below, the verdicts depend on: "
                                                   "compatcheck's version, the model path and factory, the options, "
                                                   "the interpreter, the installed distributions and the relevant "
                                                   "environment variables")
    dependencies: dict[str, str | None] = Field(
        {}, description="every file the run loaded (the user's Python sources and the files the model read) with "
                        "its sha256, null when it was missing or not a regular file")

    def swept_summary(self) -> str | None:
        """What the sweep covered, in one line: 'swept sizes the input sets lack: batch 1, batch 7 (0.2s)'."""
        info = next((stage.sweep for stage in self.stages if stage.sweep is not None), None)
        if info is None:
            return None
        caps = "".join(f"; {name} capped at {size} (eager takes no more)" for name, size in info.caps.items())
        cut = "; cut short by --sweep-budget" if info.cut_short else ""
        return (f"swept sizes the input sets lack, through every artifact: {', '.join(info.sizes) or 'none'} "
                f"({info.seconds:.1f}s{caps}{cut})")

    @property
    def failed(self) -> bool:
        return any(s.status in FAILING for s in self.stages)

    @property
    def internal_errors(self) -> list[StageResult]:
        """The stages compatcheck's own code gave no verdict: its bugs, not the model's."""
        return [s for s in self.stages if s.status is Status.INTERNAL]


# Options renamed in schema_version 3: one name per option everywhere.
_RENAMED_OPTIONS = {"memory_limit_mb": "memory_limit", "triton_launcher": "triton"}


def migrate(data: dict) -> dict:
    """A report of an older schema_version, as this one reads it (docs/report.md lists the changes)."""
    if data.get("schema_version") in (1, 2, 3):
        options = {_RENAMED_OPTIONS.get(name, name): value for name, value in data.get("options", {}).items()}
        if "bench_seconds" in options and "bench" not in options:
            options["bench"] = options["bench_seconds"] is not None
        data = {**data, "options": options}
    if data.get("schema_version", 1) < 5:  # before --dtype and --device: the model as given, on the CPU
        data = {**data, "options": {"dtype": "float32", "device": "cpu", **data.get("options", {})}}
    # The other versions after 3 only added keys, with defaults (6: a stage's phases; 7: its call; 8: log_cut;
    # 9: rewrites and covered, from `compatcheck fix`).
    return {**data, "schema_version": SCHEMA_VERSION}


def load_report(path: Path) -> Report:
    """Read a report written by `run --json`, refusing other schema versions with a clear message."""
    import json

    from compatcheck.errors import UsageError

    from compatcheck.files import read_json

    try:
        data = read_json(Path(path))
    except FileNotFoundError:
        raise UsageError(f"report not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read report {path}: {exc}") from None
    from pydantic import ValidationError

    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in READABLE_VERSIONS:
        raise UsageError(
            f"{path} has schema_version {version!r}; this compatcheck reads schema_version "
            f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}"
        )
    try:
        return Report.model_validate(migrate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"])) or "the top level"
        value = json.dumps(first.get("input"), default=str)
        value = value if len(value) <= 80 else value[:79] + "…"
        raise UsageError(f"{path}: field {field} has value {value}, which the report schema rejects: "
                         f"{first['msg']}") from None
