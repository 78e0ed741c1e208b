"""Writes the generated parts of the README and the docs, or checks them (--check).

    python docs/generate.py           rewrite every generated region that is out of date
    python docs/generate.py --check   change nothing; print what is out of date and exit 1 if anything is

Two kinds of region, each between marker comments in the Markdown:

- `<!-- generated: NAME -->` ... `<!-- /generated -->`: a table made from the code (NAME is a key
  of TABLES): `options` from the options table (compatcheck/options.py), `layers` from the layer
  list (compatcheck/layers.py) and the package's files, `verdict-rules` from the verdict's rule table
  (compatcheck/report/verdict.py), `phases` from a stage's phases (compatcheck/worker/phases.py),
  `finding-kinds` from the kinds of finding (compatcheck/report/kinds.py), `comparison-rules` from the
  comparison's rule table (compatcheck/compare/rules.py).
- `<!-- output: COMMAND -->` ... `<!-- /output -->`: what COMMAND prints, from a real run of it.
  COMMAND is `compatcheck run PATH [FLAGS]`; with `--markdown FILE` the block is the checklist the
  run writes there, otherwise the terminal output. `COMMAND | PARTS` keeps only some parts: `first
  finding` (the table, the first finding and the routes), or for a checklist `routes` and stage names
  (the routes with the ladder line, and those stages' sections).

Each distinct run is made once, cold (an empty result cache), from the repository root, at WIDTH
columns. A block is compared after `normalise` (the seconds column and the total, which differ
from run to run, and trailing spaces); one that compares equal is left as it is, so regenerating
does not rewrite timings alone. The test suite checks the blocks against its own shared run of the
model (tests/test_docs.py) instead of running again.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH = 120  # the terminal width of every output block

REGION = re.compile(r"^<!-- (generated|output): (.+?) -->\n(.*?)^<!-- /\1 -->$", re.M | re.S)
# Flags that say where a run's results go, not what it finds: the one run behind several blocks
# writes every output; a block shows the one its command names.
OUTPUT_FLAGS = {"--json": 1, "--markdown": 1, "--junit": 1, "--quiet": 0, "-q": 0}


def pages() -> list[Path]:
    """Every Markdown file with generated regions: the README and the docs."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# -- tables from the code ---------------------------------------------------------------------------

def _type(option) -> str:
    if option.type is bool:
        return "flag"
    if option.choices:
        return " or ".join(f"`{choice}`" for choice in option.choices)
    if option.type is list:
        return "stage names, comma-separated" if not option.repeat else f"`{option.metavar}`, repeatable"
    kind = {int: "whole number", float: "number", str: "text", Path: "path"}[option.type]
    if option.metavar:
        kind = f"{kind} (`{option.metavar}`)"
    for bound, word in ((option.ge, "≥"), (option.gt, ">")):
        if bound is not None:
            kind += f" {word} {bound:g}"
    return kind


def _default(option) -> str:
    from compatcheck.options import REQUIRED

    if option.default is REQUIRED:
        return "required"
    if option.type is bool:
        return "off"
    if option.default is None:
        return "—"
    value = option.default
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def options_table() -> str:
    """Per command, its flags: type, default, the doors its row reaches, whether it is in the cache key."""
    from compatcheck.options import COMMAND_FLAGS, DOORS, OPTIONS, flags_of

    commands = []
    for option in (*OPTIONS, *COMMAND_FLAGS):
        for command in option.commands:
            if command not in commands:
                commands.append(command)
    out = []
    for command in commands:
        title = "compatcheck" if command == "compatcheck" else f"compatcheck {command}"
        out += [f"### `{title}`", "", "| flag | type | default | doors | cache key | what it does |",
                "|---|---|---|---|---|---|"]
        for option in flags_of(command):
            flag = f"`{option.flag}`" + (f", `{option.short}`" if option.short else "")
            doors = ", ".join(door for door in DOORS if door in option.doors)
            out.append(f"| {flag} | {_cell(_type(option))} | {_default(option)} | {doors} | "
                       f"{'yes' if option.cache_key else ''} | {_cell(option.help)} |")
        out.append("")
    out += ["### Every run option by door", "",
            "The name is the same at every door: the `check()` keyword, the matrix.yaml key, the pytest "
            "plugin's `--compatcheck-option NAME=VALUE`, the workers' `RunOptions` field (what the report "
            "records under `options`).", "",
            "| name | flag | `check()` | matrix.yaml | pytest | report `options` | cache key |",
            "|---|---|---|---|---|---|---|"]
    for option in OPTIONS:
        marks = ["✓" if door in option.doors else "" for door in ("api", "matrix", "pytest", "worker")]
        out.append(f"| `{option.name}` | `{option.flag}` | {' | '.join(marks)} | "
                   f"{'yes' if option.cache_key else ''} |")
    return "\n".join(out)


def layers_table() -> str:
    """The layers top to bottom, as tests/test_layers.py holds the imports to them, with every module in each."""
    from compatcheck.layers import LAYERS, layer_of

    package = ROOT / "compatcheck"
    files: dict[int, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files.setdefault(layer_of(module), []).append(str(path.relative_to(package)))
    out = ["| | layer | what it holds | files (under `compatcheck/`) |", "|---|---|---|---|"]
    for index, (name, holds, _) in enumerate(LAYERS):
        listed = ", ".join(f"`{file}`" for file in files.get(index, []))
        out.append(f"| {index + 1} | **{name}** | {_cell(holds)} | {listed} |")
    return "\n".join(out)


def verdict_rules_table() -> str:
    """The verdict's rules in the order they are tried (compatcheck/report/verdict.py)."""
    from compatcheck.report.verdict import RULES

    out = ["| | rule | when | verdict |", "|---|---|---|---|"]
    out += [f"| {index} | {rule.name} | {_cell(rule.says)} | `{rule.status.value}` |"
            for index, rule in enumerate(RULES, 1)]
    return "\n".join(out)


def phases_table() -> str:
    """A stage's phases in the order they run, with their budgets (compatcheck/worker/phases.py)."""
    from compatcheck.report.verdict import JUDGED
    from compatcheck.worker.phases import PHASES

    out = ["| phase | evidence for the verdict | budget | stopped inside the worker | when it does not end |",
           "|---|---|---|---|---|"]
    out += [f"| `{phase.name}` | {'yes' if phase.name in JUDGED else 'no: findings and notes'} | "
            f"{_cell(phase.budget)} | {'yes' if phase.stoppable else 'no: the worker is killed'} | "
            f"{_cell(phase.lost)} |" for phase in PHASES]
    return "\n".join(out)


def kinds_table() -> str:
    """Every kind of finding, declared once (compatcheck/report/kinds.py)."""
    from compatcheck.report.kinds import KINDS

    out = ["| kind | what it means | stages | what you do |", "|---|---|---|---|"]
    out += [f"| `{kind.name}` | {_cell(kind.means)} | {', '.join(f'`{one}`' for one in kind.stages)} | "
            f"{_cell(kind.do)} |" for kind in KINDS]
    return "\n".join(out)


def comparison_rules_table() -> str:
    """What decides one output leaf, in the order the rules are tried (compatcheck/compare/rules.py)."""
    from compatcheck.compare import RULES

    out = ["| | rule | when | decides | why it is sound |", "|---|---|---|---|---|"]
    out += [f"| {index} | {rule.name} | {_cell(rule.when)} | {_cell(rule.decides)} | {_cell(rule.sound)} |"
            for index, rule in enumerate(RULES, 1)]
    return "\n".join(out)


TABLES = {"options": options_table, "layers": layers_table, "verdict-rules": verdict_rules_table,
          "phases": phases_table, "finding-kinds": kinds_table, "comparison-rules": comparison_rules_table}


# -- output blocks from real runs -------------------------------------------------------------------

@dataclass(frozen=True)
class Output:
    command: str  # as the page shows it
    parts: tuple[str, ...]  # empty: all of it

    @property
    def words(self) -> list[str]:
        words = shlex.split(self.command)
        if words[:1] != ["compatcheck"] or words[1:2] not in (["run"], ["fix"]) or len(words) < 3:
            raise ValueError(f"an output block runs `compatcheck run|fix PATH [FLAGS]`, not {self.command!r}")
        return words[2:]

    @property
    def fix(self) -> bool:
        return shlex.split(self.command)[1] == "fix"

    @property
    def key(self) -> tuple[str, ...]:
        """The run behind the block, as `reports` knows it: a fix run has "fix" first."""
        return ("fix", *self.run) if self.fix else self.run

    @property
    def run(self) -> tuple[str, ...]:
        """The run behind the block: its arguments without the output flags."""
        words, kept, index = self.words, [], 0
        while index < len(words):
            if words[index] in OUTPUT_FLAGS:
                index += 1 + OUTPUT_FLAGS[words[index]]
                continue
            kept.append(words[index])
            index += 1
        return tuple(kept)

    @property
    def checklist(self) -> bool:
        return "--markdown" in self.words


def parse_output(spec: str) -> Output:
    command, _, parts = spec.partition(" | ")
    return Output(command.strip(), tuple(part.strip() for part in parts.split(",") if part.strip()))


def run_options(run: tuple[str, ...]) -> dict:
    """The options that the run's flags give, as the report records them (`options`)."""
    from compatcheck.options import COMMAND_FLAGS, flags_of, parse

    flags = {name: option for option in flags_of("run") for name in (option.flag, option.short) if name}
    values, words = {}, list(run[1:])
    while words:
        flag, _, inline = words.pop(0).partition("=")
        option = flags.get(flag)
        if option is None:
            raise ValueError(f"{flag}: not a flag of compatcheck run")
        value = (not option.default) if option.type is bool else inline or words.pop(0)
        if option.type is list:
            value = [name.strip() for name in value.split(",") if name.strip()]
        if option not in COMMAND_FLAGS:
            values[option.name] = value
    return parse(values, flags=True, door="cli").run_options().model_dump(mode="json")


def same_run(report, run: tuple[str, ...]) -> str | None:
    """Why `report` is not a report of `run` (another model file, factory or options), or None."""
    path, _, factory = run[0].partition(":")
    if report.model is None or Path(report.model.path).resolve() != (ROOT / path).resolve():
        return f"the report is of {report.model and report.model.path}, the block of {path}"
    if report.model.factory != (factory or "get_model"):
        return f"the report is of factory {report.model.factory}, the block of {factory or 'get_model'}"
    wanted = run_options(run)
    if report.options != wanted:
        differ = sorted(name for name in {*wanted, *report.options} if report.options.get(name) != wanted.get(name))
        return f"the report's options differ from the block's command in {', '.join(differ)}"
    return None


def docs_torch() -> str:
    """The torch release the output blocks are of: the one the README's set-up command installs."""
    return re.search(r"torch==([0-9][0-9.]*[0-9])", (ROOT / "README.md").read_text()).group(1)


# OpenVINO's CPU plugin computes in bfloat16 by default on a processor with bf16 instructions, and in
# float32 elsewhere: the blocks were made on one with them.
DOCS_OPENVINO_PRECISION = "bf16"


def other_torch(report) -> str | None:
    """Why `report` cannot give the output blocks: it ran on another torch than the README installs, or
    on a processor where OpenVINO chose another precision than the blocks show."""
    torch = report.environment.get("torch", "unknown")
    if torch.split("+")[0] != docs_torch():
        return (f"the output blocks show torch {docs_torch()} (the README's set-up command installs it); "
                f"this run had torch {torch}")
    chosen = next((re.search(r"inference precision (\w+)", stage.backend or "") for stage in report.stages
                   if stage.name == "openvino"), None)
    if chosen and chosen.group(1) != DOCS_OPENVINO_PRECISION:
        return (f"the output blocks show OpenVINO's CPU plugin computing in {DOCS_OPENVINO_PRECISION}, its default "
                f"on a processor with bf16 instructions; on this one it computes in {chosen.group(1)}")
    return None


def command_of(key: tuple[str, ...]) -> list[str]:
    """The command behind a block's key (Output.key): `compatcheck fix ...` or `compatcheck run ...`."""
    return ["compatcheck", *key] if key[0] == "fix" else ["compatcheck", "run", *key]


def fresh_report(key: tuple[str, ...]):
    """Run the block's command (`compatcheck run`, or `fix`) as the block says, cold, and load its JSON
    report."""
    from compatcheck.report.model import load_report

    with tempfile.TemporaryDirectory(prefix="compatcheck-docs-") as folder:
        report_path = Path(folder) / "report.json"
        env = {**os.environ, "COLUMNS": str(WIDTH), "COMPATCHECK_CACHE_DIR": str(Path(folder) / "cache")}
        command_line = [sys.executable, "-m", *command_of(key), "--quiet", "--json", str(report_path)]
        print("running", shlex.join(command_of(key)), file=sys.stderr, flush=True)
        proc = subprocess.run(command_line, cwd=ROOT, env=env, capture_output=True, text=True)
        if not report_path.exists():
            raise SystemExit(f"{shlex.join(command_line)} wrote no report (exit {proc.returncode}):\n{proc.stderr}")
        return load_report(report_path)


def console_text(report, width: int = WIDTH) -> str:
    """What `compatcheck run` (or `fix`, for a report with rewrites) prints for `report` (no progress lines),
    from the repository root."""
    from rich.console import Console

    from compatcheck.report.console import render, render_rewrites

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None, legacy_windows=False)
    with contextlib.chdir(ROOT):
        render(report, console)
        render_rewrites(report, console)
    return buffer.getvalue()


def _checklist_parts(text: str, parts: tuple[str, ...]) -> str:
    lines = text.splitlines()
    kept = []
    for part in parts:
        if part == "routes":
            start = lines.index("**Routes:**")
            end = next(i for i in range(start, len(lines)) if lines[i].startswith("| "))
        else:
            start = next((i for i, line in enumerate(lines) if re.match(rf"^### .*`{re.escape(part)}`:", line)), None)
            if start is None:
                raise ValueError(f"the checklist has no section for {part!r}")
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
        kept.append("\n".join(lines[start:end]).strip("\n"))
    return "\n\n".join(kept)


def block(output: Output, report) -> str:
    """The Markdown of an output block (the fence included) for `report`."""
    if output.checklist:
        from compatcheck.report.markdown import checklist

        text = checklist(report)
        text = _checklist_parts(text, output.parts) if output.parts else text
        return "````markdown\n" + _tidy(text) + "````\n"
    if output.parts and output.parts != ("first finding",):
        raise ValueError(f"{output.command}: a terminal block keeps all of it or `| first finding`")
    if output.parts:
        report = report.model_copy(update={"findings": report.findings[:1]})
    return "```\n" + _tidy(console_text(report)) + "```\n"


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


SECONDS_CELL = re.compile(r"^(│(?:[^│\n]*│){3})[^│\n]*│", re.M)
TOTAL = re.compile(r"^total \d+(\.\d+)?s$", re.M)
FIX_SECONDS = re.compile(r"(through every stage in )\d+(?:\.\d+)?s(, after the run's )\d+(?:\.\d+)?s")


def normalise(text: str) -> str:
    """A block as the comparison sees it: the seconds column and the total blanked, no trailing spaces."""
    text = _tidy(text)
    text = SECONDS_CELL.sub(lambda m: m.group(1) + " … │", text)
    text = FIX_SECONDS.sub(r"\1…s\2…s", text)
    return TOTAL.sub("total …s", text)


# -- the regions of the pages -----------------------------------------------------------------------

@dataclass
class Stale:
    page: Path
    region: str
    diff: str

    def __str__(self) -> str:
        return f"{_shown(self.page)}: {self.region} is out of date\n{self.diff}"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def outputs(text: str) -> list[Output]:
    return [parse_output(m.group(2)) for m in REGION.finditer(text) if m.group(1) == "output"]


def update(page: Path, reports: dict, write: bool) -> list[Stale]:
    """Bring the page's regions up to date (when `write`); what was out of date. `reports` maps a run
    (Output.run) to its report; an output block whose run it lacks is left as it is."""
    text = page.read_text()
    stale: list[Stale] = []

    def replace(match: re.Match) -> str:
        kind, spec, body = match.groups()
        if kind == "generated":
            if spec not in TABLES:
                raise ValueError(f"{page.name}: no generated table {spec!r}; tables are {', '.join(TABLES)}")
            new, seen = TABLES[spec]() + "\n", lambda text: text
        else:
            output = parse_output(spec)
            if output.key not in reports:
                return match.group(0)
            new, seen = block(output, reports[output.key]), normalise
        if seen(body) == seen(new):
            return match.group(0)
        diff = "".join(difflib.unified_diff(seen(body).splitlines(True), seen(new).splitlines(True), "committed",
                                            "generated"))
        stale.append(Stale(page, f"<!-- {kind}: {spec} -->", diff))
        return f"<!-- {kind}: {spec} -->\n{new}<!-- /{kind} -->"

    new_text = REGION.sub(replace, text)
    if write and new_text != text:
        page.write_text(new_text)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is out of date")
    args = parser.parse_args(argv)
    runs = sorted({output.key for page in pages() for output in outputs(page.read_text())})
    reports = {run: fresh_report(run) for run in runs}
    for run, report in reports.items():
        problem = other_torch(report)
        if problem:
            raise SystemExit(f"{shlex.join(command_of(run))}: {problem}")
    stale = [one for page in pages() for one in update(page, reports, write=not args.check)]
    for one in stale:
        print(one if args.check else f"{_shown(one.page)}: regenerated {one.region}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
