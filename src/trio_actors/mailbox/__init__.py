"""Mailboxes and how they are served: the run queue, yield batches, the time slice,
asks in flight, and stranded cleanup. The one sub-package that uses trio's
scheduling primitives."""

from ._bounded import Bounded as Bounded
from ._serving import Dispatcher as Dispatcher
from ._stranded import CleanupCadence as CleanupCadence

__all__ = ["Bounded", "CleanupCadence", "Dispatcher"]
