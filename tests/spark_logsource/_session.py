"""One local Spark session for every Spark test of a pytest process (starting one takes ~15 s)."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from millrace import spark_jobs

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def require_java() -> None:
    """Fail the test unless a Java 17+ runtime is there (Spark 4 needs one)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        pytest.fail(
            "Spark needs a Java 17+ runtime and none was found: install one, "
            "e.g. `apt-get install -y openjdk-17-jre-headless`"
        )
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)', result.stderr + result.stdout)
    assert match and int(match.group(1)) >= 17, f"Spark 4 needs Java 17+: {result.stderr}"


@functools.cache
def shared_spark() -> Any:
    """A ``local[2]`` SparkSession with the ``millrace`` source registered, stopped at exit."""
    require_java()
    from pyspark.sql import SparkSession

    # The Python of the data source's planner and reader workers is the context's
    # pythonExec, which only this variable sets: this venv's, which has millrace.
    os.environ["PYSPARK_PYTHON"] = sys.executable

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("millrace-tests")
        .config("spark.driver.host", "127.0.0.1")  # CI hostnames may not resolve
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_jobs.register(spark)
    atexit.register(spark.stop)
    return spark


def spark_env() -> dict[str, str]:
    """The environment of a ``spark-submit`` child: this venv's Python, nothing from the repo."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    for variable in ("SPARK_HOME", "PYSPARK_DRIVER_PYTHON_OPTS", "PYTHONPATH", "SPARK_CONF_DIR"):
        env.pop(variable, None)
    return env
