"""Version 1 of the Millrace wire contract (protobuf package ``millrace.wire.v1``).

Every other module in this package is generated from ``proto/millrace/wire/v1/*.proto``
by ``make proto`` (``scripts/gen_protos.py``) and must not be edited by hand:
change the ``.proto`` file and regenerate. For each ``<name>.proto`` there is
``<name>_pb2`` (messages and enums, typed by ``<name>_pb2.pyi``) and
``<name>_pb2_grpc`` (service stubs, servicer base classes and ``add_*_to_server``).
``make proto-check`` fails when the generated modules are stale.
"""
