"""Every ``literalinclude`` of a chapter names a file of the repository and, with ``:pyobject:``,
a function or class defined in it -- a renamed function fails here in a second, not in the strict
HTML build at the end of ``make test``."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r"```\{literalinclude\}\s+(\S+)\n((?::[a-z-]+:.*\n)*)")


def includes():
    for page in sorted((ROOT / "book").glob("*.md")):
        for m in INCLUDE.finditer(page.read_text()):
            opts = dict(re.findall(r":([a-z-]+):\s*(.*)", m.group(2)))
            yield page.name, m.group(1), opts.get("pyobject")


def defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


CASES = list(includes())


def test_the_chapters_include_code():
    assert len(CASES) >= 10


@pytest.mark.parametrize("page,target,pyobject", CASES, ids=[f"{p}:{o or t}" for p, t, o in CASES])
def test_include_resolves(page, target, pyobject):
    # "/lib/x.py" is relative to the book's root, "../lib/x.py" to the page (in book/)
    path = ROOT / target.lstrip("/") if target.startswith("/") else (ROOT / "book" / target).resolve()
    assert path.is_file(), f"{page} includes {target}, which does not exist"
    if pyobject is not None:
        assert pyobject.split(".")[-1] in defined(path), f"{page} includes {pyobject} from {target}, which does not define it"


def test_a_renamed_function_is_caught(tmp_path):
    # the control: the name before the rename is not found
    assert "_forgetting" not in defined(ROOT / "lib" / "linear_ff.py")
