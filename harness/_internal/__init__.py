"""takeover's internals: everything the public modules of the package stand on.

Why a package of its own: what a user may import is what the reference documents (the API, its result
types, the contract, the pytest plugin, the command line, the exit codes, summary.json's types, the
queues and adapters by MODULE:ATTR); everything here may change between versions without notice, as
pytest keeps its internals in ``_pytest``.
"""
