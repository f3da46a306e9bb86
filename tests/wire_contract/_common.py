"""What the wire-contract tests share: where the contract lives, and its generated modules."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
PROTO_DIR = REPO_ROOT / "proto" / "millrace" / "wire" / "v1"
GENERATED_DIR = REPO_ROOT / "millrace" / "wire" / "v1"
GENERATOR = REPO_ROOT / "scripts" / "gen_protos.py"

PROTO_NAMES = ("admin", "control", "delivery", "ingest", "record", "sink", "watermark")


def pb2_module(name: str) -> ModuleType:
    """The generated message module of ``proto/.../NAME.proto``."""
    return importlib.import_module(f"millrace.wire.v1.{name}_pb2")


def pb2_grpc_module(name: str) -> ModuleType:
    """The generated service module of ``proto/.../NAME.proto``."""
    return importlib.import_module(f"millrace.wire.v1.{name}_pb2_grpc")
