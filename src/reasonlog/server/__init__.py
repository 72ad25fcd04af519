"""`reasonlog serve`: the query API over HTTP (FastAPI). Needs the `server` extra: pip install 'reasonlog[server]'."""
