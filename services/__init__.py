"""kotae's stages, one folder each: a thin bus edge (handlers.py) over plain logic."""
