"""The rule catalogue: rewrite rules as bidirectional kanren relations with metadata."""
