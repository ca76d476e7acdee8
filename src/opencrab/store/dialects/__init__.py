"""Dialect-specific SQL, kept apart so another database only adds a module here."""
