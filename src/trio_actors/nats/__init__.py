"""A trio-native NATS client (issue 17): a sans-io protocol core and, on it, a trio
transport.

So far the protocol core is here (:mod:`trio_actors.nats._protocol`, re-exported
below): it turns the server's bytes into events and makes the bytes of every
client operation, with no I/O and no clock. The transport -- ``connect``,
``publish``, ``subscribe``, ``request``, reconnects, TLS and authentication -- is
built on it next.

This package imports nothing else of trio-actors (the runtime's remote layer will
import it, never the other way round).
"""

from ._protocol import *  # noqa: F403 - the protocol core's names: its __all__
from ._protocol import __all__ as __all__


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.nats.Msg, not trio_actors.nats._protocol.Msg.
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) or callable(obj):
            obj.__module__ = __name__


_fix_module_names()
del _fix_module_names
