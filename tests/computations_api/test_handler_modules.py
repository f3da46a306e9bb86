"""Handler modules beside the topology file are found without ``PYTHONPATH`` (issue 31:
the backfill's workers needed it set by hand; issue 36: so did ``millrace up``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from millrace.commands.spark import submit_environment
from tests.support import ROOT

APP = """
from millrace.computations import Computation, Context, Record


class Counts(Computation):
    def process_record(self, ctx: Context, record: Record) -> None:
        pass
"""

TOPOLOGY = """
[streams.in]
[streams.out]
[computations.c]
handler = "shopapp.counts:Counts"
inputs = { in = "key" }
outputs = ["out"]
"""


def project(tmp_path: Path) -> Path:
    """A user's project: ``conf/topology.toml`` beside ``conf/shopapp/counts.py``."""
    conf = tmp_path / "conf"
    (conf / "shopapp").mkdir(parents=True)
    (conf / "shopapp" / "__init__.py").write_text("")
    (conf / "shopapp" / "counts.py").write_text(APP)
    (conf / "topology.toml").write_text(TOPOLOGY)
    (conf / "deployment.toml").write_text(
        'topology = "topology.toml"\n[nodes.c]\ncomputation = "c"\nintervals = [0]\n'
        'address = "127.0.0.1:1"\n[sinks.out]\naddress = "127.0.0.1:2"\n'
    )
    return conf


def test_the_topology_files_directory_holds_the_handler_modules(tmp_path: Path) -> None:
    conf = project(tmp_path)
    probe = (
        "from computations import Topology\n"
        f"print(Topology.load({str(conf / 'topology.toml')!r}).handler_class('c').__name__)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not the project
    result = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, cwd="/",
        env=env,
    )  # fmt: skip
    assert result.stdout.strip() == "Counts", result.stderr


def test_spark_workers_get_the_topology_files_directory(tmp_path: Path) -> None:
    conf = project(tmp_path)
    paths = submit_environment(str(conf / "deployment.toml"))["PYTHONPATH"].split(os.pathsep)
    assert str(conf.resolve()) in paths


RESOLVE = (
    "from millrace.computations import import_object\n"
    "from millrace.dataflow import WindowedAggregation\n"
    "found = import_object('dataflow:WindowedAggregation', what='handler')\n"
    "print('library' if found is WindowedAggregation else found)\n"
)


def test_a_former_top_level_name_resolves_to_the_library_from_anywhere(tmp_path: Path) -> None:
    """A topology written before the one namespace (``handler = "dataflow:..."``) still
    loads: outside a checkout, and at a checkout's root, where the folder ``dataflow/``
    must not load as a second copy of the library."""
    for cwd in (tmp_path, ROOT):
        done = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True,
                              cwd=cwd, check=True)  # fmt: skip
        assert done.stdout.strip() == "library", (cwd, done.stdout, done.stderr)


def test_a_users_own_module_of_a_former_name_wins(tmp_path: Path) -> None:
    (tmp_path / "dataflow.py").write_text("WindowedAggregation = 'mine'\n")
    done = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True,
                          cwd=tmp_path, check=True)  # fmt: skip
    assert done.stdout.strip() == "mine"
