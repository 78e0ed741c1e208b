"""The pytest plugin (entry point `pytest11`): a `compatcheck` fixture for a team's own test suite.

    def test_exports(compatcheck):
        compatcheck.assert_deployable(MyModel().eval(), (torch.randn(2, 8),), targets=["onnx"])

`--compatcheck-report DIR` writes each check's JSON report and Markdown checklist there;
`--compatcheck-option NAME=VALUE` (repeatable) sets a `compatcheck run` option for every check of
the run, e.g. `timeout=120` or `cache=false`. Each check's verdicts go into the JUnit XML as
properties of the test suite (`compatcheck:<test id>:<stage>`), which every junit_family allows,
and, under xunit1 (or legacy), also as properties of the test's own case (`compatcheck:<stage>`),
which xunit2's schema does not allow: pytest's `record_property` warns there, an error under
`-W error`. Loading the plugin imports neither torch nor the rest of compatcheck: a run that does
not use the fixture pays nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("compatcheck")
    group.addoption("--compatcheck-report", metavar="DIR", default=None,
                    help="write each compatcheck check's JSON report and Markdown checklist into DIR")
    group.addoption("--compatcheck-option", metavar="NAME=VALUE", action="append", default=[],
                    help="a `compatcheck run` option for every check, e.g. timeout=120 or cache=false (repeatable)")


def _run_options(config) -> dict:
    """The --compatcheck-option values, by the options table's names; each is checked by check() itself."""
    from compatcheck.options import at, from_text

    known = {option.name: option for option in at("pytest")}
    options = {}
    for item in config.getoption("compatcheck_option"):
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise pytest.UsageError(f"--compatcheck-option {item!r}: expected NAME=VALUE, e.g. timeout=120")
        if name not in known:
            raise pytest.UsageError(f"--compatcheck-option {item!r}: unknown option {name!r}; options are: "
                                    f"{', '.join(known)}")
        options[name] = from_text(known[name], value)
    return options


class Checker:
    """What the `compatcheck` fixture gives a test: check() and assert_deployable() with the run's options."""

    def __init__(self, node_id: str, options: dict, report_dir: Path | None, record_suite_property,
                 case_properties: list | None):
        self.node_id = node_id
        self.options = options
        self.report_dir = report_dir
        self.record_suite_property = record_suite_property
        self.case_properties = case_properties  # the test's user_properties, where the junit family has them
        self.count = 0

    def check(self, model, inputs=None, **options):
        from compatcheck.api import check

        report = check(model, inputs, **{**self.options, **options})
        self._record(report)
        return report

    def assert_deployable(self, model, inputs=None, targets=("onnxruntime",), **options):
        from compatcheck.api import assert_deployable

        __tracebackhide__ = True
        try:
            report = assert_deployable(model, inputs, targets, **{**self.options, **options})
        except AssertionError as exc:
            self._record(exc.report)
            raise
        self._record(report)
        return report

    def _record(self, report) -> None:
        self.count += 1
        prefix = "compatcheck" if self.count == 1 else f"compatcheck[{self.count}]"
        for stage in report.stages:
            self.record_suite_property(f"{prefix}:{self.node_id}:{stage.name}", stage.status.value)
            if self.case_properties is not None:
                self.case_properties.append((f"{prefix}:{stage.name}", stage.status.value))
        if self.report_dir is not None:
            from compatcheck.report.markdown import checklist
            from compatcheck.files import write_atomically

            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.node_id).strip("_") + (
                "" if self.count == 1 else f"-{self.count}")
            self.report_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(self.report_dir / f"{stem}.json", report.model_dump_json(indent=2))
            write_atomically(self.report_dir / f"{stem}.md", checklist(report))


@pytest.fixture
def compatcheck(request, record_testsuite_property) -> Checker:
    """check(model, inputs, **options) and assert_deployable(model, inputs, targets, **options), with
    the options given to pytest (--compatcheck-option) and the reports kept (--compatcheck-report)."""
    report_dir = request.config.getoption("compatcheck_report")
    with_cases = request.config.getini("junit_family") in ("xunit1", "legacy")
    return Checker(request.node.nodeid, _run_options(request.config),
                   Path(report_dir).resolve() if report_dir else None, record_testsuite_property,
                   request.node.user_properties if with_cases else None)
