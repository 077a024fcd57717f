"""Code that tests of every tier share; tests import it as ``from tests.helpers.<module> import ...``.

- ``processes``: run the ``takeover`` command as a real subprocess, read the history it left, and
  find (and kill) any process of a run that outlived it.
- ``queues``: where the fixture queues live and how a process finds them by module name.

``tests`` is a package, so these absolute imports work however pytest is started (see
tests/README.md); no test edits ``sys.path`` itself.
"""
