"""The spec's scenarios, one concept in one room: the file format (:mod:`.file`), the engine that drives a
queue a step at a time (:mod:`.engine`), two calls at once (:mod:`.overlap`), the replay of a whole file
or of the spec's five (:mod:`.replay`) and what a replay concluded (:mod:`.results`).

Why ``scenario`` and not ``scenarios``: importing a submodule sets it on its package, and
``takeover.scenarios`` is the API function (see :mod:`takeover`).
"""
