"""The packages stay layered: no reach into another package's private modules, and
no import of a layer above (issue 16)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: dict[str, set[str]] = {
    # package: the packages it may import (besides itself and BOTTOM)
    "statestore": set(),
    "computations": {"statestore"},
    "dataflow": {"computations"},  # the public user API only
    "streamsql": {"computations", "dataflow"},  # SQL planned onto the library
    "engine": {"computations", "statestore"},
    "deployment": {"computations", "engine"},
    "delivery": {"computations", "engine", "deployment", "statestore"},
    "node": {"computations", "engine", "delivery", "deployment", "statestore"},
    "sinks": {"engine", "deployment", "statestore"},  # the sink index is a store
    "injector": {"computations", "engine", "delivery", "deployment", "statestore"},
    # Spark is a driver of the engine, like a node: backfills run IntervalDriver.
    "spark_jobs": {"statestore", "computations", "engine", "deployment", "injector", "sinks"},
    "millrace": {*["statestore", "computations", "engine", "deployment", "delivery", "node"],
                 "injector", "sinks", "spark_jobs", "streamsql"},
}  # fmt: skip
EXCEPTIONS = {
    # The user's test harness runs the engine in-process.
    "computations/testing.py": {"engine"},
    # The package's version, reported by Admin.
    "node/_admin_service.py": {"millrace"},
}
BOTTOM = ("millrace.wire", "millrace.dataplane", "millrace.event_time", "millrace.sink_lines")
"""Below every layer: the wire contract, the native data plane's public face, the
bounds of time and the sink file's line format."""


def imports(path: Path) -> list[str]:
    """Every module ``path`` imports at any level (absolute imports only)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "millrace":
            found.extend(  # a package, else the name of millrace/__init__.py it is
                f"millrace.{alias.name}" if alias.name in LAYERS else "millrace"
                for alias in node.names
            )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def layer_of(module: str) -> tuple[str | None, list[str]]:
    """The layer a module belongs to (``millrace.engine._x``: ``engine``), and the rest
    of its name; None for a module of no layer (the standard library, a dependency)."""
    parts = module.split(".")
    if parts[0] == "millrace" and len(parts) > 1 and parts[1] in LAYERS:
        return parts[1], parts[2:]
    if parts[0] == "millrace":
        return "millrace", parts[1:]
    return None, parts[1:]


def product_files() -> list[tuple[str, Path]]:
    files = []
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "wire" in parts or (package == "millrace" and parts[1] in LAYERS):
                continue  # the generated contract; a layer's link under millrace/
            files.append((package, path))
    return files


def test_no_package_imports_another_packages_private_modules() -> None:
    reaches = []
    for package, path in product_files():
        for module in imports(path):
            layer, rest = layer_of(module)
            private = any(part.startswith("_") for part in rest)
            if layer is not None and layer != package and private:
                reaches.append(f"{path.relative_to(ROOT)}: {module}")
    assert not reaches, "imports of another package's private modules:\n" + "\n".join(reaches)


def test_no_package_imports_a_layer_above_it() -> None:
    upward = []
    for package, path in product_files():
        relative = str(path.relative_to(ROOT))
        allowed = LAYERS[package] | EXCEPTIONS.get(relative, set()) | {package}
        for module in imports(path):
            layer, _ = layer_of(module)
            if layer is not None and layer not in allowed and not module.startswith(BOTTOM):
                upward.append(f"{relative}: {module}")
    assert not upward, "imports of a package above:\n" + "\n".join(upward)


def test_every_package_is_imported_through_the_millrace_namespace() -> None:
    """``millrace`` is the one top-level name installed (issue 36); an ``import engine``
    left anywhere would load a second copy of a package from a checkout's root."""
    bare = []
    folders = [*LAYERS, "tests", "bench", "examples", "scripts"]
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "wire" in parts or (folder == "millrace" and parts[1] in LAYERS):
                continue
            for module in imports(path):
                if module.split(".")[0] in LAYERS and not module.startswith("millrace"):
                    bare.append(f"{path.relative_to(ROOT)}: {module}")
    assert not bare, "imports outside the millrace namespace:\n" + "\n".join(bare)
