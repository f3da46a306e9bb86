"""The ``millrace`` sub-commands, one module each."""
