"""Shared pytest configuration (helpers live in each folder's *_kit / toolkit module)."""
