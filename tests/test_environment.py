"""pyproject.toml (the pip path) and environment.yml (conda) list the same packages."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names of packages whose pip names differ
CONDA_TO_PIP = {"pytorch": "torch"}
NOT_PACKAGES = {"python", "pip"}
# build tools the pip path takes from the system (Node's npm for MathJax, a C compiler)
SYSTEM_TOOLS = {"nodejs", "c-compiler"}


def _split(spec: str) -> tuple[str, str]:
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def pip_requirements() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        specs += extra
    return dict(_split(s) for s in specs)


def conda_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):  # the pip: section installs the project itself
            continue
        name, version = _split(dep)
        if name in NOT_PACKAGES or name in SYSTEM_TOOLS:
            continue
        out[CONDA_TO_PIP.get(name, name)] = version
    return out


def test_same_packages_and_versions():
    pip, conda = pip_requirements(), conda_requirements()
    assert sorted(set(pip) - set(conda)) == [], "in pyproject.toml but not environment.yml"
    assert sorted(set(conda) - set(pip)) == [], "in environment.yml but not pyproject.toml"
    assert {k: v for k, v in pip.items() if conda[k] != v} == {}, "different version constraints"


def test_conda_environment_brings_the_build_tools():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = {_split(d)[0] for d in env["dependencies"] if isinstance(d, str)}
    assert SYSTEM_TOOLS <= names, SYSTEM_TOOLS - names
    assert "python=3.11" in env["dependencies"]


def test_pins_that_matter():
    pip = pip_requirements()
    assert pip["torch"] == "==2.13.0"
    assert pip["jupyter-book"].startswith(">=1") and "<2" in pip["jupyter-book"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert 'requires-python = ">=3.11,<3.12"' in (ROOT / "pyproject.toml").read_text()


def _imported_modules(folder: Path) -> dict[str, str]:
    """Top-level names of the modules imported anywhere in ``folder``'s Python files -> a file that imports it."""
    import ast

    found = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path.name)
    return found


def test_every_third_party_import_is_declared():
    """What lib/, tools/ and benchmarks/ import is a declared requirement, not a package that only
    happens to arrive with another one."""
    import sys
    from importlib.metadata import packages_distributions

    dists = packages_distributions()
    ours = {"lib", "book", "tools", "benchmarks"}   # the project itself; sibling modules are found beside the importer
    declared = set(pip_requirements())
    undeclared = {}
    for folder in ("lib", "tools", "benchmarks"):
        for module, where in _imported_modules(ROOT / folder).items():
            if module in sys.stdlib_module_names or module in ours or (ROOT / folder / f"{module}.py").exists():
                continue
            names = {d.lower().replace("_", "-") for d in dists.get(module, [])}
            assert names, f"{folder}/{where} imports {module!r}, which no installed distribution provides"
            if not names & declared:
                undeclared[f"{folder}/{where}: {module}"] = sorted(names)
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"
