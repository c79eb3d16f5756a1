"""The kernel: everything one actor's life is made of, in one package.

In the manner of trio's ``_core``: the modules in here know each other (the cell
calls the stop sequence, the stop sequence calls the serving loop, the serving loop
calls the failure decision, ...); the layers above use its modules, and it never
imports theirs. From outside the kernel it imports only leaf values (``_errors``,
``_policy``, ``_statistics``, ``_supervision``); what it needs of its actor system is
the :class:`~trio_actors._core._host.Host` protocol (``tests/test_layers.py``
checks both).

The modules, by concept:

* records and values -- ``_actor`` (``ActorBase``, the kernel's half of the user's
  base class), ``_ref`` (the handle), ``_cell`` and ``_bounded_cell`` (the
  runtime's record of one actor and its queue operations), ``_compaction``
  (withdrawn envelopes leave in batches), ``_kinds`` (what an actor class's
  handlers are), ``_envelope`` (an ask in flight), ``_bounded`` (senders waiting
  for room);
* rules -- ``_state`` (the lifecycle and serving tables);
* serving -- ``_dispatcher`` (the run queue, yield batches, the time slice; the one
  user of ``trio.lowlevel``), ``_round_clock``, ``_handler_call``, ``_idle_ask``
  (an ask answered in the asker's task), ``_task_serving``, ``_serving_now`` (whose
  message the trio thread handles now) and ``_turn_sampler`` (the thread that reads
  it), ``_foreign`` (tells from other threads);
* sequences -- ``_stopping``, ``_stranded``, ``_restarting``, ``_failure`` (what
  supervision decides when a handler fails), ``_watch``, ``_dead_letters``,
  ``_timers``, ``_registry`` (names);
* ``_host`` -- what the kernel needs of its actor system;
* ``_debug`` -- invariant checks installed when ``TRIO_ACTORS_DEBUG`` is set.
"""
