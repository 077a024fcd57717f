"""Mutation testing of a queue module: mechanically generated mutants (:mod:`.generate`, :mod:`.sql`), each run
through takeover's own stages (:mod:`.runner`), judged against a small reviewed table of equivalent mutants
(:mod:`.equivalent`). ``takeover mutate`` is the command; ``takeover bench --detection`` reports its score."""
