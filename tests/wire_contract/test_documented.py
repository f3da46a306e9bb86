"""Every declaration in the ``.proto`` files has a ``//`` comment directly above it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf import descriptor

from tests.wire_contract._common import (
    PROTO_DIR,
    PROTO_NAMES,
    pb2_module,
)

_BLOCK_DECL = re.compile(r"^(message|enum|service|oneof)\s+(\w+)\s*\{")
_RPC_DECL = re.compile(r"^rpc\s+(\w+)\s*\(")
_FIELD_DECL = re.compile(
    r"^(?:(?:repeated|optional)\s+)?(?:map\s*<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+\s*(?:\[[^\]]*\])?\s*;"
)
_ENUM_VALUE_DECL = re.compile(r"^(\w+)\s*=\s*-?\d+\s*(?:\[[^\]]*\])?\s*;")
_NOT_DECLARATIONS = re.compile(r"^(syntax|edition|package|import|option|reserved)\b|^\}")


@dataclass
class ProtoDeclarations:
    """The declarations found in one .proto file, by kind, with qualified names."""

    declared: dict[str, set[str]] = field(default_factory=dict)
    undocumented: list[str] = field(default_factory=list)

    def add(self, kind: str, name: str, documented: bool, where: str) -> None:
        """Record one declaration and whether it carries a comment."""
        self.declared.setdefault(kind, set()).add(name)
        if not documented:
            self.undocumented.append(f"{where}: {kind} {name}")


def _split_comment(line: str) -> tuple[str, str]:
    """Split a line into code and the text of its ``//`` comment (no strings contain //)."""
    code, sep, comment = line.partition("//")
    return code.strip(), comment.strip() if sep else ""


def parse_proto(path: Path) -> ProtoDeclarations:
    """Find every declaration of a .proto file and whether it is documented.

    A declaration is documented when the lines directly above it (no blank line
    in between) are ``//`` comments with some text, or when it has a trailing
    ``//`` comment. Fails on any line it does not understand, so a declaration
    cannot slip past unchecked.
    """
    result = ProtoDeclarations()
    scopes: list[tuple[str, str]] = []  # (kind, name) of the enclosing blocks
    comment_above: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path.name}:{number}"
        code, trailing = _split_comment(raw)
        if not code:
            # A comment line extends the block above the next declaration; a
            # blank line ends it.
            comment_above = [*comment_above, trailing] if raw.strip() else []
            continue
        documented = any(comment_above) or bool(trailing)
        comment_above = []
        prefix = ".".join(name for kind, name in scopes if kind != "oneof")
        enclosing = scopes[-1][0] if scopes else ""

        def qualified(name: str, prefix: str = prefix) -> str:
            return f"{prefix}.{name}" if prefix else name

        if block := _BLOCK_DECL.match(code):
            kind, name = block.groups()
            result.add(kind, qualified(name), documented, where)
            scopes.append((kind, name))
        elif rpc := _RPC_DECL.match(code):
            assert enclosing == "service", f"{where}: rpc outside a service"
            result.add("rpc", qualified(rpc.group(1)), documented, where)
            if "{" in code:
                scopes.append(("rpc", rpc.group(1)))
        elif enclosing == "enum" and (value := _ENUM_VALUE_DECL.match(code)):
            result.add("enum value", qualified(value.group(1)), documented, where)
        elif enclosing in ("message", "oneof") and (decl := _FIELD_DECL.match(code)):
            result.add("field", qualified(decl.group(1)), documented, where)
        elif not _NOT_DECLARATIONS.match(code):
            pytest.fail(f"{where}: line not understood by the doc check: {raw.strip()!r}")
        for _ in range(code.count("}")):
            assert scopes, f"{where}: unbalanced '}}'"
            scopes.pop()
    assert not scopes, f"{path.name}: unclosed block {scopes[-1]}"
    return result


def _declarations_from_descriptor(
    file_descriptor: descriptor.FileDescriptor,
) -> dict[str, set[str]]:
    """The same qualified names as ``parse_proto``, from the compiled descriptor."""
    declared: dict[str, set[str]] = {}

    def add(kind: str, name: str) -> None:
        declared.setdefault(kind, set()).add(name)

    def add_enum(enum: descriptor.EnumDescriptor, prefix: str) -> None:
        add("enum", prefix + enum.name)
        for value in enum.values:
            add("enum value", f"{prefix}{enum.name}.{value.name}")

    def add_message(message: descriptor.Descriptor, prefix: str) -> None:
        name = prefix + message.name
        add("message", name)
        for fd in message.fields:
            add("field", f"{name}.{fd.name}")
        for nested in message.nested_types:
            add_message(nested, f"{name}.")
        for enum in message.enum_types:
            add_enum(enum, f"{name}.")

    for message in file_descriptor.message_types_by_name.values():
        add_message(message, "")
    for enum in file_descriptor.enum_types_by_name.values():
        add_enum(enum, "")
    for service in file_descriptor.services_by_name.values():
        add("service", service.name)
        for method in service.methods:
            add("rpc", f"{service.name}.{method.name}")
    return declared


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_every_declaration_is_documented(name: str) -> None:
    parsed = parse_proto(PROTO_DIR / f"{name}.proto")
    assert parsed.undocumented == [], "declarations without a // comment directly above"
    # The parser saw exactly what protoc compiled, so nothing escaped the check.
    declared = {kind: names for kind, names in parsed.declared.items() if kind != "oneof"}
    assert declared == _declarations_from_descriptor(pb2_module(name).DESCRIPTOR)


def test_doc_check_catches_an_undocumented_field(tmp_path: Path) -> None:
    proto = tmp_path / "sample.proto"
    proto.write_text(
        'syntax = "proto3";\n'
        "// Documented.\n"
        "message A {\n"
        "  // Documented.\n"
        "  int64 x_ms = 1;\n"
        "\n"
        "  int64 y_ms = 2;\n"
        "  int64 z_ms = 3;  // Trailing comment counts.\n"
        "}\n"
        "\n"
        "enum E {\n"
        "  // Documented.\n"
        "  E_UNSPECIFIED = 0;\n"
        "}\n"
        "// Documented.\n"
        "service S {\n"
        "  rpc R(A) returns (A);\n"
        "}\n",
        encoding="utf-8",
    )
    parsed = parse_proto(proto)
    assert parsed.undocumented == [
        "sample.proto:7: field A.y_ms",
        "sample.proto:11: enum E",
        "sample.proto:17: rpc S.R",
    ]
