"""The pure core: standard library only, no I/O, no clock, no environment."""

__all__: list[str] = []
