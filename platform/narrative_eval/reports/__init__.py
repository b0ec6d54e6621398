"""Report writers: the tables and figures of a finished sweep (or of imported score records)."""
