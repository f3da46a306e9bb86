"""Options shared by the sub-commands.

``--config FILE`` names the deployment file (docs/configuration.md) for every
command that reads one; ``--deployment`` is its older name, kept as an alias
(same destination, ``args.deployment``). Commands that cannot run without
the file fall back to ``$MILLRACE_CONFIG``, so a container can set the file
once in its environment.
"""

from __future__ import annotations

import argparse
import os

CONFIG_ENV = "MILLRACE_CONFIG"


def add_config_argument(
    parser: argparse.ArgumentParser, *, required: bool = True, purpose: str = ""
) -> None:
    """Add ``--config FILE`` (alias ``--deployment``), stored as ``args.deployment``.

    ``required``: the command needs the file; then ``$MILLRACE_CONFIG`` is the
    default and the flag is only demanded when that is unset. Optional uses
    (``inject``, ``watermarks``: ``--injector`` may stand in) ignore the variable.
    ``purpose`` is appended to the help text, e.g. ``"finds the injector"``.
    """
    default = (os.environ.get(CONFIG_ENV) or None) if required else None
    what = "deployment configuration TOML file (docs/configuration.md)"
    if purpose:
        what += f"; {purpose}"
    if required:
        what += f"; env {CONFIG_ENV}"
    parser.add_argument(
        "--config",
        "--deployment",
        dest="deployment",
        metavar="FILE",
        default=default,
        required=required and default is None,
        help=f"{what} (--deployment is an older name)",
    )
