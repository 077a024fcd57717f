"""Long soaks (``takeover soak``): segments checked at every checkpoint, a resource watch, a seed bank.

See :mod:`takeover._internal.soak.driver` for the design (why segments keep memory and disk bounded).
"""
