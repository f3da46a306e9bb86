"""The standard streaming benchmark's queries (Nexmark q0-q8, q11) on the ``dataflow``
library, each checked against a plain-Python computation: ``python -m examples.nexmark``.
"""
