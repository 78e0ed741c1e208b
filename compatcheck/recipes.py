"""The other ways of building a stage than its plain call, as data: what a stage offers after it failed
(another mode, exporter keyword or sample) and what the catalog offers for library code (a setting on
the built model). The harness tries each on a pristine model and offers only what passed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    """A way to build a stage other than its plain call, as data (never code): more keywords for the
    export call, the inferred dims spelled Dim.AUTO, another input set as the sample. A stage's build
    reads `ctx.recipe` (None: the plain call, which is what the verdict is about)."""

    what: str  # in words, for the finding: "strict=True", "input set 2 as the sample"
    keywords: tuple[tuple[str, object], ...] = ()
    auto_dims: bool = False
    sample: int = 0
    from_program: bool = False  # export with torch.export.export first, then hand the ExportedProgram on
    setting: tuple | None = None  # ("call", method, args) or ("attribute", dotted path, value), on the built model
    factory: str | None = None  # the constructor argument that does what `setting` does
    flat: bool = False  # build from a wrapper whose forward returns the outputs' tensors flat
    before: str | None = None  # code the user writes before the call (a wrapper class), for the finding
    then: str | None = None  # code the user writes after it (the outputs rebuilt), for the finding
    static: bool = False  # dynamic_shapes=None: one artifact per input size, each built from an input of that size
    parts: int = 1  # the recipes it combines: one that got past a blocker, and those for the next one
    more: tuple = ()  # the settings of the recipes it combines after the first's, applied after `setting`
    session: tuple[tuple[str, str], ...] = ()  # the runtime's session options (onnxruntime's optimization level)

    @property
    def settings(self) -> tuple:
        return tuple(one for one in (self.setting, *self.more) if one)


def combined(first: Recipe, then: Recipe) -> Recipe | None:
    """`first` and `then` together, where one build can take both (not two samples, or two values of one
    keyword); None where it cannot."""
    if first.sample and then.sample or first.flat and then.flat or first.session and then.session or \
            {name for name, _ in first.keywords} & {name for name, _ in then.keywords} or then.what in first.what:
        return None
    settings = first.settings + then.settings
    return Recipe(f"{first.what}, with {then.what}", keywords=first.keywords + then.keywords,
                  auto_dims=first.auto_dims or then.auto_dims, sample=first.sample or then.sample,
                  from_program=first.from_program or then.from_program, setting=settings[0] if settings else None,
                  more=settings[1:],
                  factory=first.factory or then.factory, flat=first.flat or then.flat,
                  before=first.before or then.before, then=first.then or then.then, static=first.static or then.static,
                  parts=first.parts + then.parts, session=first.session + then.session)


def apply_setting(model, setting: tuple) -> str:
    """Apply a catalog setting to the first module of `model` that has it; the line a user writes for it.
    LookupError when no module has it (then only the factory can)."""
    kind, name, value = setting
    for path, module in model.named_modules():
        prefix = "model" + (f".{path}" if path else "")
        if kind == "call" and callable(getattr(module, name, None)):
            getattr(module, name)(*value)
            return f"{prefix}.{name}({', '.join(map(repr, value))})"
        if kind == "attribute":
            *parents, last = name.split(".")
            owner = module
            for part in parents:
                owner = getattr(owner, part, None)
            if owner is not None and hasattr(owner, last):
                setattr(owner, last, value)
                return f"{prefix}.{name} = {value!r}"
    raise LookupError(name)
