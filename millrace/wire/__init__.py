"""Millrace's gRPC/protobuf wire contract, one sub-package per major version.

``millrace.wire.v1`` is the current contract. A breaking change is published as
a new sibling package (``v2``) served side by side with ``v1``; see
``proto/README.md``.
"""
