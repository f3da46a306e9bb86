"""Ingestion, the durable log and the low-watermark authority (issue #4)."""
