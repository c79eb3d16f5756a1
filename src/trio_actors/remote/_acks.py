"""Tells across nodes, accounted for: nothing lost silently (T21 across nodes).

A remote tell ends in one of three ways its sender can know of: it is **handled**,
it is a **dead letter** (on the receiving node: the actor had stopped; on the
sending node: nothing served the node, NATS's no-responders), or its fate is
**unknown** because the receiving node died with it -- counted in
``Node.unconfirmed``, never silently gone.

So that the last case is counted, and only it, the receiving node *acknowledges*
what it took: for each sending node it counts the tells it took in (queued in a
mailbox, or made a dead letter there), and every few milliseconds while tells come
it publishes the count to the sender's ``P.a.<node>.<incarnation>``. The sender keeps
a :class:`Link` per node it tells: how many tells it sent, how many came back
unreachable, how many were acknowledged. When that node is declared down, the
sender waits until its server has routed everything sent before (a flush: the
no-responders answers come first), and counts ``told - acknowledged - bounced`` as
unconfirmed.

What "acknowledged" promises: the tell was in the receiving node's hands -- in a
mailbox there. A node killed with messages in its mailboxes loses them, as a
crashed process does; a node that leaves in order handles them or makes them dead
letters while its actors stop, and sends its last acknowledgements before it says
``bye``.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ACK_EVERY", "Link", "TakenIn"]

ACK_EVERY: Final = 0.005  # seconds between acknowledgements while tells come in


class Link:
    """This node's tells to one node (one incarnation of it)."""

    __slots__ = ("acked", "bounced", "closed_after", "told")

    def __init__(self) -> None:
        self.told = 0  # sent (and not counted unconfirmed by a lost connection)
        self.acked = 0  # acknowledged by the receiving node (its cumulative count)
        self.bounced = 0  # came back: nothing served it (dead letters "unreachable")
        # The node was declared down after the tell with this number: tells after it
        # are not accounted here (they bounce: dead letters).
        self.closed_after: int | None = None

    def counts(self, number: int) -> bool:
        """Whether tell ``number`` (the node's sequence) is accounted on this link."""
        return self.closed_after is None or number <= self.closed_after

    def lost(self, told: int) -> int:
        """Of the first ``told`` tells, those neither acknowledged nor bounced."""
        return max(0, told - self.acked - self.bounced)


class TakenIn:
    """The receiving side: tells taken in per sending node, and what was said."""

    __slots__ = ("_said", "counts")

    def __init__(self) -> None:
        # By the sender's unreachable-subject prefix (``P.u.<node>.<incarnation>``,
        # the tell's reply subject without its number): no parsing per tell.
        self.counts: dict[str, int] = {}
        self._said: dict[str, int] = {}

    def take(self, reply: str, tells: int) -> None:
        """``tells`` tells came in, in a message with reply subject ``reply``."""
        prefix, dot, _number = reply.rpartition(".")
        if not dot:
            return  # (not a node's tell: nothing to acknowledge)
        counts = self.counts
        counts[prefix] = counts.get(prefix, 0) + tells

    def unsaid(self) -> list[tuple[str, int]]:
        """The (sender prefix, count) pairs not yet acknowledged; marks them said."""
        news = [(prefix, n) for prefix, n in self.counts.items() if self._said.get(prefix) != n]
        for prefix, count in news:
            self._said[prefix] = count
        return news

    def forget(self, prefix: str) -> None:
        """The sending node is gone: nothing more to acknowledge to it."""
        self.counts.pop(prefix, None)
        self._said.pop(prefix, None)
