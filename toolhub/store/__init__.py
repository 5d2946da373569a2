"""Where records and runtime state live: files when embedded, Redis when distributed."""
