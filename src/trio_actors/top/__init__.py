"""``trio-actors top``: a live view of a running cluster in the terminal
(``docs/observing.rst``).

It asks every node's statistics service (``trio_actors/_monitoring.py``; the nodes
answer in ``remote/_monitoring.py``) and shows one row per node, and a selected
node's busiest actors. One concept per module:

* ``_command.py`` -- the command: its options, the connection, the live view's two
  tasks (polls and keys), ``--once`` and ``--json``;
* ``_poll.py`` -- the monitor on the connection: requests and their answers;
* ``_model.py`` -- what the screen shows, as a value, and how answers and keys
  change it (pure);
* ``_view.py`` -- how rich draws it (pure);
* ``_terminal.py`` -- the keyboard: cbreak mode and keys read in a thread.

Imported only by the ``top`` command; the live view and ``--once`` need rich (the
``top`` extra), ``--json`` does not.
"""

from ._command import run_top as run_top

__all__ = ["run_top"]
