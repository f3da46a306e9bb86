"""The committed generated code (``millrace/wire/v1``) is what ``make proto`` makes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.wire_contract._common import (
    GENERATED_DIR,
    GENERATOR,
    REPO_ROOT,
)


def _run_generator(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "gen_protos.py"), *args],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_generator_check_passes_on_committed_tree() -> None:
    result = _run_generator(REPO_ROOT, "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_generator_check_flags_stale_missing_and_extra_files(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy2(GENERATOR, tmp_path / "scripts" / "gen_protos.py")
    shutil.copytree(REPO_ROOT / "proto", tmp_path / "proto")
    generated = tmp_path / "millrace" / "wire" / "v1"
    shutil.copytree(GENERATED_DIR, generated, ignore=shutil.ignore_patterns("__pycache__"))

    assert _run_generator(tmp_path, "--check").returncode == 0

    stale = generated / "ingest_pb2.pyi"
    stale.write_text(stale.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    (generated / "admin_pb2_grpc.py").unlink()
    (generated / "removed_pb2.py").write_text("", encoding="utf-8")
    result = _run_generator(tmp_path, "--check")
    assert result.returncode == 1
    assert "out of date: millrace/wire/v1/ingest_pb2.pyi" in result.stderr
    assert "missing: millrace/wire/v1/admin_pb2_grpc.py" in result.stderr
    assert "millrace/wire/v1/removed_pb2.py" in result.stderr
    assert "run `make proto`" in result.stderr

    # Regenerating repairs all three, after which the check passes again.
    assert _run_generator(tmp_path).returncode == 0
    assert not (generated / "removed_pb2.py").exists()
    assert _run_generator(tmp_path, "--check").returncode == 0
    for path in GENERATED_DIR.glob("*_pb2*"):
        if path.is_file():
            assert (generated / path.name).read_bytes() == path.read_bytes(), path.name
