"""Readers: ask a model about one round's prompt and return validated citations."""
