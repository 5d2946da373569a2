"""The ``toolhub`` command line (typer + rich)."""
