"""HTTP caching (RFC 9111) as a shared cache does it: pure decisions, and the stored form."""
