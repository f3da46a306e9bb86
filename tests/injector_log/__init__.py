"""The injector's durable log: round trips, recovery, real crashes, retention, the CLI."""
