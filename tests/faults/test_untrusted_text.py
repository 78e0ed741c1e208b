"""A model whose messages, output names and file name carry every control character, escape sequences
that repaint the terminal, a lone surrogate, bidi overrides, HTML, table pipes and GitHub workflow
commands: none of it acts on the terminal, the CI runner, a JUnit reader or a Markdown viewer, and
compatcheck's own colours are untouched."""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.conftest import ROOT, verdicts

CONTROLS = "".join(chr(c) for c in range(1, 32)) + "\x7f\x85\x9b"
REPAINT = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[32mall stages pass\x1b[0m"
BIDI = "\u202aa\u202bb\u202cc\u202dd\u202ee\u2066f\u2067g\u2068h\u2069"
HOSTILE = f"{CONTROLS}{REPAINT}\ud800{BIDI}<img src=x onerror=alert(1)>|cell|\n::error::forged\n  ::warning::too"
# A file name may hold every byte but NUL and '/'.
FILE_NAME = f"m{CONTROLS}\x1b[2J\u202e\n::error::name.py"
# Code points that must never reach a reader raw: the C0 and C1 controls but tab and newline, surrogates, bidi.
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
CODE_SPAN = re.compile(r"(`+).+?\1")  # Markdown shows what is inside as written
OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's colours
OWN_ANNOTATION = re.compile(r"^::(error|warning) (file=[^,:]*,line=\d+,)?title=compatcheck [a-z_]+%3A [a-z-]+::")

MODEL = f"""\
import torch

HOSTILE = {HOSTILE!r}


class Net(torch.nn.Module):
    def forward(self, x):
        if torch.jit.is_tracing():
            raise RuntimeError(HOSTILE)
        return {{HOSTILE: x * 2}}


def get_model():
    return Net()


def get_inputs():
    return torch.ones(2, 3)
"""


def test_hostile_text_acts_on_no_terminal_ci_runner_junit_reader_or_markdown_viewer(tmp_path):
    model = tmp_path / FILE_NAME
    model.write_text(MODEL)
    junit, markdown, report = tmp_path / "junit.xml", tmp_path / "checklist.md", tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "compatcheck", "run", str(model), "--stages", "jit_trace", "--annotations", "github",
         "--junit", str(junit), "--markdown", str(markdown), "--json", str(report), "--quiet"],
        cwd=ROOT, capture_output=True, timeout=300, env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"})
    stdout, stderr = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in stderr, stdout + stderr
    assert verdicts(json.loads(report.read_text())) == {"eager": "pass", "jit_trace": "fail"}

    assert OWN_SGR.search(stdout), "the console was to be coloured"
    assert "\x1b[32mall stages pass" not in stdout and "\x1b[2J" not in stdout and "\x1b]0;" not in stdout
    assert "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07" in stdout, "shown, as escapes"
    assert ACTIVE.findall(OWN_SGR.sub("", stdout)) == [] and ACTIVE.findall(stderr) == []
    commands = [line for line in stdout.splitlines() if line.lstrip().startswith("::")]
    assert commands and all(OWN_ANNOTATION.match(line) for line in commands), commands

    cases = ET.fromstring(junit.read_text()).findall("testcase")  # expat: strict about XML 1.0's characters
    assert [case.get("name") for case in cases] == ["eager", "jit_trace"]
    assert ACTIVE.findall(junit.read_text()) == []
    assert "all stages pass" in cases[1].find("failure").get("message")

    text = markdown.read_text()
    assert ACTIVE.findall(text) == [] and "\\<img src=x" in text
    assert not re.search(r"(?<!\\)<img", CODE_SPAN.sub("", text)), "HTML outside code"
    assert not re.search(r"^\s*::", text, re.MULTILINE)
    numerics = [line for line in text.splitlines() if line.startswith("| `eager` | `")]  # the output's row
    assert numerics and all(len(re.findall(r"(?<!\\)\|", line)) == 9 for line in numerics), \
        "an output name made table cells of its own"

    checklist = subprocess.run([sys.executable, "-m", "compatcheck", "checklist", str(report)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert checklist.returncode == 0 and checklist.stdout == text
