"""Orders enriched from a CDC table of customers (Debezium envelopes, ``TableJoin``).

``python -m examples.cdc_enrichment``: each order meets its customer's row as it
stood when the order arrived: through snapshot reads, inserts, updates and deletes.
"""
