"""T21 and T31 as a hypothesis property: any drawn program keeps the nothing-lost
invariant, and the runtime's statistics account for every message it was sent.

Hypothesis draws whole programs (see ``trio_actors.contracts._nothing_lost``), each
run as one ``trio.run`` under a ``MockClock``. The default profile runs 300 examples,
CI's (``HYPOTHESIS_PROFILE=ci``, set by ``.ci/run``) 2,000 and
``HYPOTHESIS_PROFILE=soak`` 50,000 (``tests/conftest.py``).
"""

import pytest
from hypothesis import given

from strategies import policies, programs
from trio_actors import ServingPolicy
from trio_actors.contracts._nothing_lost import Program, conserved, run_program


@pytest.mark.timeout(600)  # 2,000 programs take ~13 s alone; the soak's 50,000 longer
@given(programs(), policies)
def test_no_message_is_ever_lost(program: Program, policy: ServingPolicy) -> None:
    conserved(run_program(program, policy))  # T21, then T31 on the same run
