"""The layers of compatcheck, top to bottom: an import only ever points to its own layer or one below.

tests/test_layers.py holds every import in the package (function-level ones too) against this list,
and the architecture page of the docs is generated from it. Nothing in the package imports it.
"""

# (name, what it holds, its modules: a name covers the module and, for a package, everything in it)
LAYERS = (
    ("front doors", "the command line, check() and assert_deployable(), the pytest plugin, triton-repo",
     ("compatcheck.__main__", "compatcheck.cli", "compatcheck.api", "compatcheck.pytest_plugin",
      "compatcheck.triton_repo")),
    ("fix", "compatcheck fix: the catalog's codemods on the model file, each proven by running the ladder again",
     ("compatcheck.fix",)),
    ("session", "the parent side of one run: cache, resume, the workers and what contains them, the report",
     ("compatcheck.session",)),
    ("matrix", "matrix.yaml, environments, cells, the baseline gate, merge and the CI emitters",
     ("compatcheck.matrix",)),
    ("worker", "the child process: loads the model, runs each stage through the harness, reproducers, --bench",
     ("compatcheck.worker",)),
    ("stages", "one module per stage, behind the small Stage interface", ("compatcheck.stages",)),
    ("triton", "model repositories, the local, Docker and URL launchers, the client", ("compatcheck.triton",)),
    ("diagnose", "findings from each stage's evidence, the rewrite catalog", ("compatcheck.diagnose",)),
    ("codemods", "a catalog rewrite made on the user's source, on its concrete syntax tree", ("compatcheck.codemods",)),
    ("model", "loading the model file, comparing outputs, the user's frames, torch's features, the worker protocol",
     ("compatcheck.spec", "compatcheck.payload", "compatcheck.compare", "compatcheck.frames",
      "compatcheck.torch_features", "compatcheck.onnxruntime_session", "compatcheck.protocol",
      "compatcheck.variation", "compatcheck.state", "compatcheck.recipes", "compatcheck.stage_call",
      "compatcheck.sweep", "compatcheck.nesting", "compatcheck.snapshot", "compatcheck.lines_run")),
    ("report", "the report model (the JSON schema) and its renderers, route summaries", ("compatcheck.report",)),
    ("ground", "the package's face (its version), the options table, the ladder and route tables, errors, files, "
               "redaction, the model's text made inert, what the host has, deadlines for blocks of code",
     ("compatcheck", "compatcheck.call", "compatcheck.deadline", "compatcheck.options", "compatcheck.ladder", "compatcheck.errors", "compatcheck.causes", "compatcheck.files", "compatcheck.redact",
      "compatcheck.untrusted", "compatcheck.target", "compatcheck.host", "compatcheck.loaded_files", "compatcheck.layers")),
)


def layer_of(module: str) -> int:
    """The index in LAYERS (0 is the top) of the most specific name that covers `module`."""
    best, found = -1, None
    for index, (_, _, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (module.startswith(name + ".") and name != "compatcheck")
            if covers and len(name) > best:
                best, found = len(name), index
    if found is None:
        raise KeyError(f"{module} is in no layer of compatcheck/layers.py")
    return found
