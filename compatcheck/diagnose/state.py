"""Findings for a forward that keeps state across calls: on eager, each piece of state and the line that
writes it; on a stage whose artifact froze it, that the artifact answers like the model's first call
forever. The lines are found by running one first call with a line tracer over the user's code, which
takes the state after every line."""

from __future__ import annotations

import sys
import traceback

import torch

from compatcheck.diagnose.found import finding_at
from compatcheck.report.model import Finding
from compatcheck.state import fingerprint, same, taken

_WHAT = {"attribute": "the attribute", "buffer": "the buffer", "global": "the global"}
_SHOWN = 4  # places named in one finding


def _writers(ctx) -> dict:
    """Each kept place -> the user's line that first changed it in one first call (None where none did)."""
    if ctx.state_lines is None:
        places, user = ctx.kept, ctx.spec.user
        pristine = ctx.spec.pristine
        model = pristine.copy() if pristine else ctx.spec.model
        modules = pristine.globals.modules if pristine and pristine.globals else {}
        found: dict = {}
        frames: list = []  # the user's frames now running, innermost last: a write is the line it ran last
        previous = [taken(model, modules, places, quick=True)]

        def check():
            now = taken(model, modules, places, quick=True)
            for place, before, after in zip(places, previous[0], now):
                if place not in found and frames and not same(before, after):
                    found[place] = traceback.FrameSummary(frames[-1][0].f_code.co_filename, frames[-1][1],
                                                          frames[-1][0].f_code.co_name)
            previous[0] = now

        def local(frame, event, arg):
            check()
            if event == "line":
                frames[-1] = (frame, frame.f_lineno)
            elif event == "return":
                frames.pop()
            return local

        def calls(frame, event, arg):
            if not user.owns(frame.f_code.co_filename):
                return None
            check()
            frames.append((frame, frame.f_lineno))
            return local

        traced = sys.gettrace()
        sys.settrace(calls)
        try:
            ctx.seeded(ctx.spec.input_sets[0], model)
        except Exception:  # the lines are a diagnosis: the reference already ran this call
            pass
        finally:
            sys.settrace(traced)
        ctx.state_lines = {place: found.get(place) for place in places}
    return ctx.state_lines


def _names(ctx) -> str:
    shown = [place.shown for place in ctx.kept[:_SHOWN]]
    return ", ".join(shown) + (f" and {len(ctx.kept) - _SHOWN} more" if len(ctx.kept) > _SHOWN else "")


def kept_findings(ctx, stage: str) -> list[Finding]:
    """Eager's: one finding per piece of state, at the line that writes it."""
    lines = _writers(ctx)
    return [finding_at(ctx.spec.user,
        stage, "state-across-calls", f"forward keeps state across calls: it changes {_WHAT[place.kind]} "
        f"{place.shown}, and a second call answers otherwise than the first. Every stage is compared with eager's "
        "first call on a pristine copy, input set by input set; an exported or traced artifact keeps what the call "
        "it was built from saw, and answers like the model's first call forever",
        location=lines[place], op=place.shown,
        rewrite="pass the state in as an input and return its new value, so the caller keeps it between calls")
        for place in ctx.kept[:_SHOWN]]


def froze_findings(stage: str, ctx, runner, error: BaseException | None) -> list[Finding]:
    """A stage's: its artifact answers the same whatever call came before (it froze the state), or the
    tracer's own check saw the state change the graph."""
    place = ctx.kept[0]
    location = _writers(ctx)[place]
    if error is not None and type(error).__name__ == "TracingCheckError":
        return [finding_at(ctx.spec.user, stage, "state-across-calls",
            f"forward keeps state across calls ({_names(ctx)}): torch.jit.trace ran it twice and its check saw the "
            "graph change. A trace without that check answers like the model's first call forever",
            location=location, op=place.shown)]
    if runner is None or not _froze(ctx, runner):
        return []
    return [finding_at(ctx.spec.user, stage, "state-across-calls",
        f"the artifact froze the state forward keeps across calls ({_names(ctx)}): it answers the same whatever "
        "call came before, like the model's first call, forever; eager's answers move on with every call",
        location=location, op=place.shown)]


def _froze(ctx, runner) -> bool:
    """Whether the artifact answers input set 2 (else 1) the same as a first call and as a second call."""
    sets = ctx.spec.input_sets
    probe = sets[min(1, len(sets) - 1)]
    raw = getattr(runner, "raw", runner)
    try:
        with torch.no_grad():
            ctx.rewind()
            alone = runner(probe.copy())
            runner(sets[0])
            after = raw(probe.copy())
    except Exception:  # it ran every input set already; a rerun that raises shows nothing about state
        return False
    return same(fingerprint(alone), fingerprint(after))
