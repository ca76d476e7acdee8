"""The read models: every figure and view the routes, the pages, the CLI and the exports
show, computed once here from the repositories (architecture.md, "Adapters and reports").

A report function takes the `Runtime` (core/runtime.py) or the `Database` and what the
caller asked for, and returns a response model (`reports/model.py`'s camelCase base);
adapters render it (JSON, a page, a table) and never open a transaction of their own.
"""
