"""Every override of a provider SDK's private method, and only those (docs/wire.md)."""
