"""Sketches of keyed streams, over keys as ``Grouper.route`` reads them.

Each ``update`` takes a column of keys (a Polars Series, a PyArrow Array or ChunkedArray,
a NumPy integer array or a list) with the same null policy as routing; each key enters as
its 64-bit :func:`fingerprint`. These are the sketches the groupers keep:

- :class:`CountMin`: a frequency upper bound for every key, optionally with conservative
  update (Cormode and Muthukrishnan 2005; Estan and Varghese 2002).
- :class:`SpaceSaving`: the heaviest keys with per-key error bounds (Metwally et al. 2005).
- :class:`HyperLogLog`: distinct counts in 5-bit registers, with a "maybe seen" probe
  (Flajolet et al. 2007).
- :class:`SlidingWindowCounter`: exact counts over the last ``window`` keys (Pd-Stream).
"""

from keysplit._core import CountMin, HyperLogLog, SlidingWindowCounter, SpaceSaving, fingerprint

__all__ = ["CountMin", "HyperLogLog", "SlidingWindowCounter", "SpaceSaving", "fingerprint"]
