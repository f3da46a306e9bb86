"""Generate the Python gRPC/protobuf code of the Millrace wire contract.

Runs ``grpc_tools.protoc`` over every ``proto/millrace/wire/v1/*.proto`` with
``-I proto --python_out=. --pyi_out=. --grpc_python_out=.``, producing
``millrace/wire/v1/<name>_pb2.py``, ``<name>_pb2.pyi`` and ``<name>_pb2_grpc.py``
next to the hand-written ``__init__.py``. Generated files whose ``.proto`` has
been deleted are removed.

``--check`` writes nothing: it generates into a temporary directory, compares
the result byte-for-byte with the committed files (including generated files
that are missing or should no longer exist) and exits 1 if anything is stale.

Usage (from anywhere; paths are resolved against the repository root)::

    python scripts/gen_protos.py          # regenerate (what `make proto` runs)
    python scripts/gen_protos.py --check  # fail if stale (what `make proto-check` runs)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository root: protoc's working directory and output root."""

PROTO_ROOT = Path("proto")
"""The protoc include root, relative to the repository root."""

PACKAGE_PATH = Path("millrace/wire/v1")
"""The contract's package directory, both under PROTO_ROOT and in the Python tree."""

GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
"""File-name endings of the files protoc generates for one ``.proto`` file."""


def proto_files(repo_root: Path = REPO_ROOT) -> list[Path]:
    """The contract's ``.proto`` files, sorted, relative to ``repo_root``."""
    proto_dir = repo_root / PROTO_ROOT / PACKAGE_PATH
    return sorted(path.relative_to(repo_root) for path in proto_dir.glob("*.proto"))


def is_generated(name: str) -> bool:
    """Whether a file name in the package directory is one protoc generates."""
    return name.endswith(GENERATED_SUFFIXES)


def generated_files(out_root: Path) -> dict[str, bytes]:
    """The generated files under ``out_root``'s package directory, by file name."""
    package_dir = out_root / PACKAGE_PATH
    if not package_dir.is_dir():
        return {}
    return {
        path.name: path.read_bytes()
        for path in sorted(package_dir.iterdir())
        if path.is_file() and is_generated(path.name)
    }


def run_protoc(out_root: Path, repo_root: Path = REPO_ROOT) -> dict[str, bytes]:
    """Generate the code for every contract ``.proto`` under ``out_root``.

    ``out_root`` plays the role of the repository root: the files land in
    ``out_root/millrace/wire/v1``. Returns the generated files by file name.
    Raises ``RuntimeError`` if there are no ``.proto`` files or protoc fails.
    """
    # Imported here so `--help` works without the dev dependencies installed.
    import importlib.resources

    from grpc_tools import protoc

    protos = proto_files(repo_root)
    if not protos:
        raise RuntimeError(f"no .proto files found in {repo_root / PROTO_ROOT / PACKAGE_PATH}")
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    (out_root / PACKAGE_PATH).mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{repo_root / PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(repo_root / proto) for proto in protos),
    ]
    status = int(protoc.main(args))
    if status != 0:
        raise RuntimeError(f"protoc failed with exit status {status}")
    return generated_files(out_root)


def stale_files(expected: dict[str, bytes], actual: dict[str, bytes]) -> list[str]:
    """Describe every difference between freshly generated and committed files.

    Returns one line per file that is missing, differs, or should not exist;
    an empty list means the committed files are up to date.
    """
    problems: list[str] = []
    for name in sorted(expected.keys() | actual.keys()):
        path = PACKAGE_PATH / name
        if name not in actual:
            problems.append(f"missing: {path}")
        elif name not in expected:
            problems.append(f"extra (no .proto generates it): {path}")
        elif expected[name] != actual[name]:
            problems.append(f"out of date: {path}")
    return problems


def check(repo_root: Path = REPO_ROOT) -> int:
    """Compare freshly generated code with the committed files; 0 if identical."""
    with tempfile.TemporaryDirectory(prefix="millrace-protos-") as tmp:
        expected = run_protoc(Path(tmp), repo_root)
    problems = stale_files(expected, generated_files(repo_root))
    if not problems:
        print(f"generated code in {PACKAGE_PATH} is up to date ({len(expected)} files)")
        return 0
    print(f"generated code in {PACKAGE_PATH} is stale:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    print("run `make proto` to regenerate it", file=sys.stderr)
    return 1


def generate(repo_root: Path = REPO_ROOT) -> int:
    """Regenerate the committed code, removing files no ``.proto`` generates; returns 0."""
    with tempfile.TemporaryDirectory(prefix="millrace-protos-") as tmp:
        expected = run_protoc(Path(tmp), repo_root)
    package_dir = repo_root / PACKAGE_PATH
    actual = generated_files(repo_root)
    changed = 0
    for name, content in expected.items():
        if actual.get(name) != content:
            (package_dir / name).write_bytes(content)
            print(f"wrote {PACKAGE_PATH / name}")
            changed += 1
    for name in sorted(actual.keys() - expected.keys()):
        (package_dir / name).unlink()
        print(f"removed {PACKAGE_PATH / name}")
        changed += 1
    print(f"{len(expected)} generated files in {PACKAGE_PATH}, {changed} changed")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and regenerate or check; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the committed generated code is stale",
    )
    args = parser.parse_args(argv)
    try:
        return check() if args.check else generate()
    except RuntimeError as error:
        print(f"gen_protos: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
