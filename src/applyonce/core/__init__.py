"""The pure core: what a call *is* and what it would do, computed without touching anything.

Paths and their safety rules (``paths``), the call's identity (``identity``), the tree plan of a
patch over a base tree read through a protocol (``plan``), the commit message and its trailers
(``message``), the receipt model and its self-verification (``receipt``), the built-in checks
(``checks``), and every text the agent reads (``texts``).

May import :mod:`applyonce.patch` and :mod:`applyonce.errors` only: no I/O, no Git, no ledger.
"""
