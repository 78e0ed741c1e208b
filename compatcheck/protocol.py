"""The worker protocol: the request a worker starts with, and the messages it sends back.

`python -m compatcheck.worker REQUEST.json FD`: the request names the model (a file, or a payload
file holding a model object), the options, the stages left to run and the artifacts earlier workers
made. The worker writes one message per line, as JSON, to file descriptor FD (never stdout, which
belongs to the model):
  usage_error   the model file, or its inputs or outputs, are unusable: the run stops with it
  internal_error  compatcheck's own code raised: in a stage (which gets no verdict, and the next
                stage runs), or outside any (the run stops with it)
  loaded        the model, its input sets and the environment it runs in
  start         a stage begins
  step          what the stage is doing now (an input set, the sweep, diagnosis), for a timeout's or
                a crash's reason; the first step of a phase names it and the seconds after which the
                supervisor kills the worker, which restarts the clock
  judged        a stage's verdict as soon as the phases that run its artifact are done, and again after
                each later phase, with the evidence it was judged from: a kill in a later phase keeps it
  result        a stage's result, the artifacts so far and what the run has loaded so far
  done          every stage of the request ran
A worker that dies mid-stage simply stops writing; the supervisor records the crash and starts
another for the remaining stages. The in-process runner (check(isolate=False)) sends the same
request and receives the same messages.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field, TypeAdapter

from compatcheck.report.model import ModelInfo, StageResult
from compatcheck.report.verdict import Evidence


class SandboxFolders(BaseModel):
    """Where the worker's Landlock domain (session/sandbox.py) lets it make nothing new, for the diagnosis
    of a model that tried; empty where the worker runs without the domain."""

    refusing: list[str] = Field([], description="the folders on the way to the protected ones that this user "
                                                "could otherwise write in: the worker may list them, not add to them")
    protected: list[str] = Field([], description="the key's folder and the cache folder")


class WorkerRequest(BaseModel):
    model: str | None = Field(None, description="the model file; None for a payload or an in-process model")
    factory: str = "get_model"
    rewritten: str | None = Field(None, description="with `compatcheck fix`: a rewritten copy of the model file, "
                                                    "run in its place and held to the original's answers")
    payload: str | None = Field(None, description="a model object's payload file (payload.py)")
    sys_path: list[str] = Field([], description="the parent's sys.path, to import a payload's classes")
    options: dict = Field(description="RunOptions, as JSON")
    stages: list[str] = Field(description="the stages to run, in ladder order")
    artifacts: dict[str, str] = Field({}, description="stage -> the artifact an earlier worker made")
    workdir: str
    previous: dict[str, str] = Field({}, description="stage -> its status, for skip reasons")
    blockers: dict[str, str | None] = Field({}, description="stage -> its first finding in a few words")
    save_inputs: bool = Field(False, description="write inputs.npz for the reproducers")
    sandbox: SandboxFolders = Field(SandboxFolders(), description="where the worker can make nothing new")
    cores: int | None = Field(None, description="with workers side by side, the cores that are this one's share: "
                                                "inductor compiles with that many threads")


class UsageErrorMessage(BaseModel):
    type: Literal["usage_error"] = "usage_error"
    message: str


class InternalErrorMessage(BaseModel):
    type: Literal["internal_error"] = "internal_error"
    stage: str | None = Field(None, description="the stage it came in; None while loading the model")
    message: str = Field(description="the exception, in one line")
    traceback: str = ""


class Loaded(BaseModel):
    type: Literal["loaded"] = "loaded"
    model: ModelInfo
    environment: dict[str, str]
    footprint: int | None = Field(None, description="the worker's peak resident size in bytes, the model loaded")


class Started(BaseModel):
    type: Literal["start"] = "start"
    stage: str


class Step(BaseModel):
    type: Literal["step"] = "step"
    stage: str
    what: str = Field(description="what the stage is doing, as words after 'the worker was killed': "
                                   "'on input set 2 of 2', 'while diagnosing'")
    phase: str | None = Field(None, description="the phase this step starts (worker/phases.py)")
    kill_after: float | None = Field(None, description="seconds the phase may run before the worker is killed")


class Judged(BaseModel):
    type: Literal["judged"] = "judged"
    result: StageResult
    evidence: Evidence


class Finished(BaseModel):
    type: Literal["result"] = "result"
    result: StageResult
    artifacts: dict[str, str]
    dependencies: dict = Field({}, description="the worker's manifest of loaded files (loaded_files.py)")


class Done(BaseModel):
    type: Literal["done"] = "done"


Message = Annotated[Union[UsageErrorMessage, InternalErrorMessage, Loaded, Started, Step, Judged, Finished, Done], Field(discriminator="type")]
MESSAGE = TypeAdapter(Message)
