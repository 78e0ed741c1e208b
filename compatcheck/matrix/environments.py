"""One virtual environment per matrix environment, built once and reused while its key is unchanged.

The key hashes what decides an environment's contents: its requirements, its index options, the
interpreter, and compatcheck's own dependency list. compatcheck itself is not installed there: each
cell puts the running compatcheck on PYTHONPATH (see cells.py), so one environment serves every
checkout and always runs the code that reads its reports back.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import compatcheck
from packaging.requirements import Requirement

from compatcheck.files import write_atomically
from compatcheck.matrix.config import Environment, package_name

MARKER = "compatcheck-env.json"  # written last: an environment without it is a half-built one
IN_USE = ".in-use"  # held shared by every matrix running on a build, so a refresh never removes it


class BuildError(Exception):
    """An environment could not be built; its cells cannot run."""


@dataclass
class Built:
    name: str
    path: Path
    key: str
    reused: bool
    seconds: float  # what building it took (the first time, when reused): what reusing it saves
    installer: str
    resolved: dict[str, str] = field(default_factory=dict)  # versions installed of what its requirements name
    _held: object = None

    def hold(self) -> "Built":
        """Hold the build for as long as this process runs, so a refresh elsewhere never removes it."""
        self._held = open(self.path / IN_USE, "a")
        fcntl.flock(self._held, fcntl.LOCK_SH)
        return self

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def default_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compatcheck" / "envs"


# The extra a cell's environment gets besides the core: the matrix runs on the CPU, with CPU onnxruntime.
EXTRA = "cpu"


def compatcheck_requirements() -> list[str]:
    """compatcheck's runtime dependencies and its `cpu` extra: from pyproject.toml in a source checkout (an
    editable install's metadata goes stale when they change), else from the installed package's metadata."""
    pyproject = Path(compatcheck.__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if project.get("name") == "compatcheck":
            return [*project["dependencies"], *project["optional-dependencies"][EXTRA]]
    found = []
    for text in importlib.metadata.requires("compatcheck") or []:
        requirement = Requirement(text)
        if requirement.marker is None:
            found.append(text)
        elif "extra" in str(requirement.marker) and requirement.marker.evaluate({"extra": EXTRA}):
            requirement.marker = None
            found.append(str(requirement))
    return found


def requirements(env: Environment) -> list[str]:
    """The environment's requirements, then compatcheck's for every package they do not name:
    resolved in one install, so `torch==2.14.1` wins over compatcheck's own torch range."""
    named = {package_name(r) for r in env.requirements}
    return env.requirements + [r for r in compatcheck_requirements() if package_name(r) not in named]


def interpreter(env: Environment) -> tuple[str, str]:
    """(path of the base interpreter, its full version) for the environment's python."""
    found = shutil.which(env.python or sys.executable)
    if not found:
        raise BuildError(f"python {env.python!r} not found")
    probe = "import os, sys; print(os.path.realpath(sys._base_executable)); print(sys.version)"
    out = subprocess.run([found, "-c", probe], capture_output=True, text=True)
    if out.returncode:
        raise BuildError(f"python {found} does not run: {out.stderr.strip()[-300:]}")
    base, version = out.stdout.split("\n", 1)
    return base, version.strip()


def key_inputs(env: Environment) -> dict:
    base, version = interpreter(env)
    return {
        "requirements": requirements(env), "index_url": env.index_url, "extra_index_urls": env.extra_index_urls,
        "find_links": env.find_links, "pre": env.pre, "python": base, "python_version": version,
    }


def env_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def uv() -> str | None:
    """uv on PATH, or beside this interpreter (installed into the same virtual environment)."""
    beside = Path(sys.executable).parent / "uv"
    return shutil.which("uv") or (str(beside) if os.access(beside, os.X_OK) else None)


def installer() -> str:
    """uv when it is there (many times faster), pip otherwise; COMPATCHECK_INSTALLER picks one."""
    chosen = os.environ.get("COMPATCHECK_INSTALLER") or ("uv" if uv() else "pip")
    if chosen not in ("uv", "pip"):
        raise BuildError(f"COMPATCHECK_INSTALLER must be uv or pip, not {chosen!r}")
    return chosen


def pip_config() -> dict[str, list[str]]:
    """pip's effective settings (its config files, then PIP_* variables), for uv, which reads neither."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    found: dict[str, dict[str, list[str]]] = {"global": {}, "install": {}, ":env:": {}}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        name, _, value = line.partition("=")
        section, _, option = name.partition(".")
        if section in found:
            found[section][option] = value.strip("'\"").split()
    return {**found["global"], **found["install"], **found[":env:"]}  # pip's own precedence


def constraints(env: Environment, config: dict[str, list[str]], into: Path) -> Path:
    """pip's configured constraint files as one file at `into`, less the lines for packages the
    environment's requirements name: `torch==2.15.0` in matrix.yaml is an explicit choice that a
    machine-wide cap such as `torch<=2.14.1` must not overrule (the build would fail to resolve).
    Every other constraint still applies; a configured file that does not exist is passed over."""
    named = {package_name(r) for r in env.requirements}
    kept = []
    for source in config.get("constraint", []):
        try:
            lines = Path(source).read_text().splitlines()
        except OSError:
            continue
        kept += [line for line in lines if package_name(line.split("#", 1)[0]) not in named | {""}]
    into.write_text("".join(f"{line}\n" for line in kept))
    return into


def uv_options(env: Environment, config: dict[str, list[str]], constraint: Path) -> list[str]:
    """uv flags that install from where pip would: the user's pip settings, then the environment's."""
    options = ["--index-strategy", "unsafe-best-match"]  # pip weighs every index; uv stops at the first by default
    index_url = [env.index_url] if env.index_url else config.get("index-url", [])[:1]
    for flag, values in (("--index-url", index_url),
                         ("--extra-index-url", config.get("extra-index-url", []) + env.extra_index_urls),
                         ("--find-links", config.get("find-links", []) + env.find_links),
                         ("--constraint", [str(constraint)])):
        for value in values:
            options += [flag, value]
    return options + (["--prerelease", "allow"] if env.pre else [])


def pip_options(env: Environment) -> list[str]:
    """pip reads the user's configuration itself; these add the environment's own options."""
    options = ["--index-url", env.index_url] if env.index_url else []
    for flag, values in (("--extra-index-url", env.extra_index_urls), ("--find-links", env.find_links)):
        for value in values:
            options += [flag, value]
    return options + (["--pre"] if env.pre else [])


def commands(env: Environment, path: Path, python: str, tool: str,
             constraint: Path) -> tuple[list[list[str]], dict[str, str]]:
    """The commands that build the environment at `path`, and the variables they run with; the
    constraints pip is configured with go through `constraint` (see constraints())."""
    wanted = requirements(env)
    config = pip_config()
    constraints(env, config, constraint)
    if tool == "uv":
        variables = {"SSL_CERT_FILE": config["cert"][0]} if config.get("cert") else {}
        return [[uv(), "venv", "--python", python, str(path)],
                [uv(), "pip", "install", "--python", str(path / "bin" / "python"),
                 *uv_options(env, config, constraint), *wanted]], variables
    return [[python, "-m", "venv", str(path)],
            [str(path / "bin" / "python"), "-m", "pip", "install", *pip_options(env), *wanted]
            ], {"PIP_CONSTRAINT": str(constraint)}  # replaces the configured files, as the variable does


def unreachable(env: Environment, timeout: float = 15) -> str | None:
    """The first of the environment's own indexes that does not answer, with why; None if all do.
    Only an optional environment is asked: for it, an index off this network is not a failure."""
    import ssl
    import urllib.error
    import urllib.request

    config = pip_config()
    context = ssl.create_default_context(cafile=config["cert"][0] if config.get("cert") else None)
    for url in filter(None, [env.index_url, *env.extra_index_urls]):
        if not url.startswith(("http://", "https://")):
            continue
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout, context=context).close()
        except urllib.error.HTTPError:
            continue  # it answered
        except (OSError, ValueError) as exc:
            return f"{url} cannot be reached ({getattr(exc, 'reason', exc)})"
    return None


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def pinned(env: Environment) -> bool:
    """Whether the environment's own requirements name exact versions; compatcheck's own ranges do not
    count. An unpinned one (`torch>=2.14`, nightlies with `pre`) resolves differently as releases appear."""
    if env.pre:
        return False
    for requirement in env.requirements:
        specifiers = list(Requirement(requirement).specifier)
        if len(specifiers) != 1 or specifiers[0].operator not in ("==", "===") or "*" in specifiers[0].version:
            return False
    return True


def resolved(path: Path, env: Environment) -> dict[str, str]:
    """The versions installed in the environment of the packages its requirements name."""
    named = {package_name(r) for r in env.requirements}
    found = {}
    for info in path.glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        if package_name(name) in named:
            found[package_name(name)] = version
    return dict(sorted(found.items()))


def _release_unused(env_dir: Path, key: str, current: Path) -> None:
    """Remove earlier builds of this key that no running matrix holds (see Built.hold)."""
    for build in env_dir.glob(f"{key}.build-*"):
        if build == current or not build.is_dir():
            continue
        with open(build / IN_USE, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(build, ignore_errors=True)


def ensure(name: str, env: Environment, env_dir: Path, on_build=None, refresh: bool = False) -> Built:
    """The environment for `env`, built now unless a finished one with its key is there and still fresh.

    `env_dir/KEY` is a link to the current build (`KEY.build-N`). A rebuild, when asked (`refresh`) or
    when an unpinned environment is older than its `refresh_after`, goes into a new folder and the link
    is swapped atomically: a matrix still running on the previous build keeps it, and it is removed
    only once no running matrix holds it.
    """
    inputs = key_inputs(env)
    key = env_key(inputs)
    link = env_dir / key
    env_dir.mkdir(parents=True, exist_ok=True)
    with open(env_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building the same environment right now
        if (link / MARKER).is_file():
            marker = json.loads((link / MARKER).read_text())
            age = time.time() - (link / MARKER).stat().st_mtime
            stale = not pinned(env) and age > env.refresh_after * 3600
            if not refresh and not stale:
                return Built(name, link.resolve(), key, True, marker["build_seconds"], marker["installer"],
                             marker.get("resolved", {})).hold()
        elif link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)  # what a build that stopped half-way left
        tool = installer()
        if on_build:
            on_build(name, key, tool)
        path = env_dir / f"{key}.build-{time.time_ns()}"
        started = time.monotonic()
        steps, variables = commands(env, path, inputs["python"], tool, env_dir / f"{key}.constraints.txt")
        log = env_dir / f"{key}.log"
        with log.open("w") as out:
            for command in steps:
                out.write(f"$ {shlex.join(command)}\n")
                out.flush()
                code = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      env={**os.environ, **variables}).returncode
                if code:
                    shutil.rmtree(path, ignore_errors=True)
                    raise BuildError(f"`{shlex.join(command[:4])} ...` exited with status {code}; "
                                     f"the end of {log}:\n{_tail(log)}")
        seconds = round(time.monotonic() - started, 1)
        versions = resolved(path, env)
        write_atomically(path / MARKER, json.dumps({
            "name": name, "key": key, "inputs": inputs, "installer": tool, "build_seconds": seconds,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "resolved": versions,
        }, indent=2))
        if link.is_dir() and not link.is_symlink():  # a build from before links: keep it beside the new ones
            os.replace(link, env_dir / f"{key}.build-0")
        swap = env_dir / f".{key}.link-{os.getpid()}"
        swap.unlink(missing_ok=True)
        swap.symlink_to(path.name)
        os.replace(swap, link)
        built = Built(name, path, key, False, seconds, tool, versions).hold()
        _release_unused(env_dir, key, path)
        return built
