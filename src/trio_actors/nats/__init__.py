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

from ._protocol import MAX_CONTROL_LINE as MAX_CONTROL_LINE
from ._protocol import NEED_DATA as NEED_DATA
from ._protocol import ClientProtocol as ClientProtocol
from ._protocol import Err as Err
from ._protocol import Event as Event
from ._protocol import Headers as Headers
from ._protocol import Info as Info
from ._protocol import MaxPayloadExceeded as MaxPayloadExceeded
from ._protocol import Msg as Msg
from ._protocol import Ok as Ok
from ._protocol import Ping as Ping
from ._protocol import Pong as Pong
from ._protocol import ProtocolError as ProtocolError
from ._protocol import check_subject as check_subject

__all__ = [
    "MAX_CONTROL_LINE",
    "NEED_DATA",
    "ClientProtocol",
    "Err",
    "Event",
    "Headers",
    "Info",
    "MaxPayloadExceeded",
    "Msg",
    "Ok",
    "Ping",
    "Pong",
    "ProtocolError",
    "check_subject",
]


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.nats.Msg, not trio_actors.nats._protocol.Msg.
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) or callable(obj):
            obj.__module__ = __name__


_fix_module_names()
del _fix_module_names
