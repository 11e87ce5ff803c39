"""The database engine, the declarative base, column types and migrations at start-up."""
