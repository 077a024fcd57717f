"""takeover's version, where every module can read it (``takeover.__version__`` is this one).

Why not read from the package itself: ``from takeover import __version__`` goes through the package's
``__init__``, which reaches the Python API on first use; a module below the API would then stand on it
(pyproject.toml, the floors).
"""

__version__ = "0.1.0"
