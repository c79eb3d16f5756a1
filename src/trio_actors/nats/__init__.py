"""A trio-native NATS client (issue 17): two sans-io layers and, on them, a trio
transport.

The protocol core (``_protocol.py``, with its values in ``_values.py``) turns the
server's bytes into events and makes the bytes of every client operation, with no
I/O and no clock. The connection (``_connection.py``) holds the state across
streams, as one table: the handshake's steps, pings and flushes, the sid table,
the request inbox and what to send again after a reconnect -- also with no I/O.
The transport (``_transport.py``) runs each stream with a reader, a writer and a
pinger task and reconnects across the server pool (``_servers.py``); the API is
``_client.py`` (``publish``, ``subscribe``, ``request``, ``flush``, ``drain``,
``close``), the outgoing side (write-through and the writer task)
``_writer.py``, events about the connection ``_events.py``; opening one stream, with
TLS and authentication, is ``_handshake.py``.

This package imports nothing else of trio-actors (the runtime's remote layer will
import it, never the other way round).
"""

from . import (
    _checks,
    _client,
    _events,
    _handshake,
    _protocol,
    _server_process,
    _servers,
    _subscription,
    _transport,
    _values,
    _writer,
)
from ._checks import *  # noqa: F403 - check_subject
from ._client import *  # noqa: F403 - the client's names: its __all__
from ._events import *  # noqa: F403 - what a client tells about its connection
from ._handshake import *  # noqa: F403 - the errors of opening a connection
from ._protocol import *  # noqa: F403 - the protocol core's names: its __all__
from ._server_process import *  # noqa: F403 - a local nats-server process
from ._servers import *  # noqa: F403 - the reconnect policy
from ._subscription import *  # noqa: F403 - Subscription, SlowConsumer
from ._transport import *  # noqa: F403 - connect
from ._values import *  # noqa: F403 - the events, headers and protocol errors
from ._writer import *  # noqa: F403 - BufferFull

__all__ = [
    *_checks.__all__,
    *_client.__all__,
    *_events.__all__,
    *_handshake.__all__,
    *_protocol.__all__,
    *_server_process.__all__,
    *_servers.__all__,
    *_subscription.__all__,
    *_transport.__all__,
    *_values.__all__,
    *_writer.__all__,
]


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.nats.Msg, not trio_actors.nats._protocol.Msg.
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) or callable(obj):
            obj.__module__ = __name__


_fix_module_names()
del _fix_module_names
