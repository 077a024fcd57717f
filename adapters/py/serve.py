"""Serve a Python queue class over takeover's JSON-lines protocol, from another virtual environment.

    --queue "exec:ENV/bin/python adapters/py/serve.py PATH/TO/module.py:Class"

Why: a queue library may pin what takeover's own environment cannot take (arq 0.28.0 requires redis-py
below 6). Its adapter, a class with the contract's methods as docs/adapters.md describes, then runs in an
environment of its own with this host, which needs nothing but Python's standard library: the very class
that ``--queue module:Class`` would load, unchanged (tests/system/test_user_arq_adapter.py runs the
fixture adapter written from docs/adapters.md this way, in ``.venv-arq``). The hello is read off the class:
its ``databases`` (SQLite only without it, as for ``--queue module:Class``), and ``extend`` and
``register_many`` when it has them.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from protocol import serve_blocking


def load(spec: str) -> type:
    path, sep, attr = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not attr:
        raise SystemExit(f"serve.py: usage: serve.py PATH/TO/module.py:Class, got {spec!r}")
    folder, name = os.path.split(os.path.abspath(path))
    sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name[: -len(".py")], os.path.join(folder, name))
    if module_spec is None or module_spec.loader is None:
        raise SystemExit(f"serve.py: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise SystemExit(f"serve.py: {path} has no {attr}") from None


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("serve.py: usage: serve.py PATH/TO/module.py:Class")
    factory = load(sys.argv[1])
    hello = {"databases": list(getattr(factory, "databases", ("sqlite",)))}
    for flag in ("extend", "register_many"):
        if callable(getattr(factory, flag, None)):
            hello[flag] = True
    serve_blocking(hello, factory)


if __name__ == "__main__":
    main()
