"""Users: the one path that creates them, and their schemas."""
