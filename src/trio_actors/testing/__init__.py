"""The testing kit: for people who test their own actors.

* :func:`run_virtual` -- ``trio.run`` under an autojumping ``MockClock``: sleeps,
  timers, restart backoffs and timeouts cost no real time, and the run is
  deterministic. In pytest-trio tests, ask for its ``autojump_clock`` fixture
  instead.
* :class:`Probe` -- an actor that records what it receives; a test awaits "the next
  message", "the next message matching X", or "no message".
* :func:`assert_dead_letters`, :func:`assert_no_dead_letters`,
  :func:`dead_letters` and :func:`assert_statistics` -- assertions whose failure
  messages say what differed.
* the ``actor_system`` pytest fixture (:mod:`trio_actors.testing.pytest_plugin`,
  registered automatically when trio-actors is installed).

>>> import trio
>>> import trio_actors as ta
>>> from trio_actors.testing import Probe, assert_no_dead_letters, run_virtual
>>> class Greeter(ta.Actor):
...     def receive(self, message):
...         name, reply_to = message
...         reply_to.tell(f"hello, {name}")
>>> async def main():
...     async with ta.open_actor_system() as system:
...         probe = Probe(system)
...         system.spawn(Greeter).tell(("Ada", probe.ref))
...         await trio.sleep(3600)  # an hour of virtual time passes at once
...         greeting = await probe.expect(str)
...         assert_no_dead_letters(system)
...         return greeting
>>> run_virtual(main)
'hello, Ada'
"""

from ._assertions import assert_dead_letters as assert_dead_letters
from ._assertions import assert_no_dead_letters as assert_no_dead_letters
from ._assertions import assert_statistics as assert_statistics
from ._assertions import dead_letters as dead_letters
from ._probe import Probe as Probe
from ._probe import matches as matches
from ._virtual import run_virtual as run_virtual

__all__ = [
    "Probe",
    "assert_dead_letters",
    "assert_no_dead_letters",
    "assert_statistics",
    "dead_letters",
    "matches",
    "run_virtual",
]
