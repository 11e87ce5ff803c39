"""What every package stands on: the database, the error model, HTTP helpers, config files."""
