"""What `import_files` keeps of each file's size and change time, read with a DB-API connection alone, importing
nothing: `reasonlog import` of folders in which nothing changed answers from these before the store is imported
(cli/quick_import.py; the CLI holds no SQL), by the check the import's planning runs (io/unchanged.py)."""


def read_sizes(conn, schema: int) -> dict[str, dict] | None:
    """Each imported file's row by its resolved path (format, size, mtime_ns, consumed), in one read transaction of a
    SQLite file of `schema`; None when the file is of another schema (the store migrates it first)."""
    conn.execute("BEGIN")
    if conn.execute("SELECT MAX(number) FROM _reasonlog_migrations").fetchone()[0] != schema:
        return None
    return {path: {"format": fmt, "size": size, "mtime_ns": mtime_ns, "consumed": consumed}
            for path, fmt, size, mtime_ns, consumed in conn.execute(
                "SELECT path, format, size, mtime_ns, consumed FROM import_files")}
