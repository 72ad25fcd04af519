"""One module per importable format; each exposes `importer` (see io/importing.py for the contract)."""
