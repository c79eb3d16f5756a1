"""Mailboxes and how they are served: the run queue, yield batches, the time slice,
asks in flight, bounded mailboxes, and tells from other threads. The one sub-package
that uses trio's scheduling primitives."""

from .._core._bounded import Bounded as Bounded
from .._core._dispatcher import Dispatcher as Dispatcher

__all__ = ["Bounded", "Dispatcher"]
