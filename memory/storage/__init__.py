"""Storage: the two engines (SQLite, PostgreSQL), their migrations and search plumbing, and one repository per
table or aggregate. The only layer whose modules hold SQL (tests/test_architecture.py names each table's owner)."""
