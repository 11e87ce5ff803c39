"""Uploads as a user sees them: receiving files, listing, re-ingesting and deleting them."""
