"""Loading one module of another framework's installed package without importing the package (its
``__init__`` pulls GPU stacks): the file is found through the distribution's record and executed
under its own name, with the parent packages (and any named import the module needs but the test
does not) as empty stand-ins. A missing package skips the test, saying how to install it.

These packages are test dependencies only (``make install`` installs them, pinned, without their
dependencies: Makefile, ``FRAMEWORK_PACKAGES``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

INSTALL = "make install installs it (Makefile, FRAMEWORK_PACKAGES)"


def package_file(distribution: str, relative: str) -> Path:
    """The installed file ``relative`` of ``distribution`` (skips the test when it is missing)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{distribution} is not installed: {INSTALL}")
    for entry in dist.files or ():
        if str(entry).replace("\\", "/").endswith(relative):
            return Path(str(dist.locate_file(entry)))
    pytest.skip(f"{distribution} {dist.version} has no {relative}")


def installed_version(distribution: str) -> str:
    return importlib.metadata.version(distribution)


@contextmanager
def isolated_modules(
    stubs: Mapping[str, Mapping[str, Any]] = {}, roots: tuple[str, ...] = ()
) -> Iterator[None]:
    """Stand-ins for ``stubs`` (module name → attributes) while the block runs; afterwards every
    module under the stubs' and ``roots``' top-level packages that the block added is removed
    again, and any it replaced is put back (modules of other packages imported meanwhile, e.g.
    omegaconf, stay: removing them would import them twice)."""
    tops = {name.split(".")[0] for name in stubs} | {name.split(".")[0] for name in roots}
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in tops}
    try:
        for name, attributes in stubs.items():
            module = ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
        yield
    finally:
        for key in [k for k in sys.modules if k.split(".")[0] in tops]:
            del sys.modules[key]
        sys.modules.update(saved)


def load_module(name: str, path: Path) -> ModuleType:
    """Executes ``path`` as module ``name``, its parent packages empty stand-ins (inside
    :func:`isolated_modules` naming its top-level package in ``roots``)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            package = ModuleType(parent)
            package.__path__ = []
            sys.modules[parent] = package
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main_block_parser(path: Path, namespace: Mapping[str, Any]) -> Any:
    """The ``argparse`` parser a script builds under ``if __name__ == "__main__":``: the block's
    statements up to ``args = parser.parse_args()``, executed as written (the script's other
    imports, which start GPU stacks, are not executed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    block = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
    ][-1]
    body = []
    for statement in block.body:
        if isinstance(statement, ast.Assign) and "parse_args" in ast.unparse(statement.value):
            break
        body.append(statement)
    scope = dict(namespace)
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), scope)
    return scope["parser"]


def class_from_source(path: Path, class_name: str, namespace: Mapping[str, Any]) -> Any:
    """A class of a module executed alone, as written, where the module's imports cannot be."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    scope = dict(namespace)
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), scope)
    return scope[class_name]
