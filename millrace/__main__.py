"""``python -m millrace`` runs the CLI."""

from millrace.cli import main

raise SystemExit(main())
