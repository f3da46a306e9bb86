"""PySpark jobs over the durable log, submitted with ``spark-submit`` (issue #4 onwards)."""
