"""Differentiation and batching rules, written once against :class:`~tensorplay.ops.Ops`.

* :mod:`tensorplay.rules.vjp`: ``VJP_RULES[name](ops, g, inputs, output, **params)`` gives one
  cotangent per input of primitive ``name`` (``None`` where an input has none).
* :mod:`tensorplay.rules.util`: helpers the rules share (``sum_to``, ``zeros_like``, ...).

Rules call only ``ops`` methods, so the same rule runs on the eager tape, inside
graph transforms, and (recorded with ``create_graph=True``) gives higher derivatives.
"""
