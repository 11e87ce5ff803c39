"""The turn engine: a turn from its first model request to its stored end, with no HTTP in it."""
