"""Adapters that put third-party queues behind the queue contract (harness/contract.py).

Each adapter maps a published library onto ``register / claim / finish / snapshot / close`` without
adding guarantees the library does not have: when the library does not fence a completion, the
adapter does not fence it either, because the point of stressing it is to learn what the library
itself promises. How to write one for your own queue: docs/adapters.md.
"""
