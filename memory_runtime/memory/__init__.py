"""The triplet memory: a store of (subject, relation, object) facts per namespace, kept in SQLite or
PostgreSQL (``location``), found exactly and then by MinHash-LSH (``fuzzy``), copied between
databases (``migrate``), and guarded against call syntax that came from outside the model
(``injection``). ``relations.yaml`` is the shipped relation table."""
