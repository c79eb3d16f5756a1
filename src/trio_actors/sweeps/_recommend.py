"""What the sweep compares and how it chooses: candidates, results, the rule, the JSON.

Pure data and decisions, no measuring: the sweep driver fills :class:`CandidateResult`
records (contracts from the suite, speeds from pyperf) and this module turns them
into a recommendation and into the pinned JSON of the sweep specification.

The recommendation rule
    Among the candidates that pass **every** contract, the one with the highest
    throughput wins. Candidates whose interval overlaps the best one's count as ties
    (the measurements cannot tell them apart), and a tie goes to the smaller batch
    -- less latency for the same speed. A candidate that fails any contract is never
    recommended, however fast; if no batch candidate passes, there is no
    recommendation.

    Each dimension is decided among its own candidates (the sweep varies one at a
    time around the defaults): the batch among the batch sizes, by tell throughput;
    the cleanup batch among the cleanup batches, by cleanup rate (S7); the time
    slice among the slices, by tell throughput. Candidates of different dimensions
    never race each other: a cleanup batch does not change S1's work, so a
    difference there is only noise. In those two dimensions a tie goes to the
    default, else to the smaller cleanup batch or the shorter slice (``None``, no
    slice, counts as the longest). The winners' combination is recommended; it is
    a measured candidate whenever at most one dimension moved away from its default,
    and otherwise the batch winner with the other two defaults is recommended.
    Without an all-defaults candidate to sweep around, all candidates race by tell
    throughput under the same tie rules.

    The interval is of throughput *relative to the reference* -- the all-defaults
    candidate (else the first one) -- measured in the same round: the sweep measures
    every candidate once per round, one after the other, so each round gives each
    candidate a ratio to the reference taken seconds apart, and the interval is the
    range of those ratios over the rounds (their first to third quartile from five
    rounds on). On a shared machine whose speed drifts from one process to the next
    (tens of percent on the 2-core development VM) this pairing is what makes a
    difference between candidates mean something; the reference's own interval is
    exactly 1. With a single round, or without per-round values, the interval of
    the candidate's own pyperf values (divided by the reference's median) is used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .. import DEFAULT_BATCH, DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE, ServingPolicy

DEFAULT_BATCHES = (16, 32, 64, 128, 256, 512)
DEFAULT_CLEANUP_BATCHES = (16, 32, 64)
DEFAULT_TIME_SLICES: tuple[float | None, ...] = (None, 0.004, 0.016, 0.064)


@attrs.frozen(order=False)
class Candidate:
    """One serving policy the sweep tries."""

    batch: int
    cleanup_batch: int
    time_slice: float | None

    def policy(self) -> ServingPolicy:
        return ServingPolicy(self.batch, self.cleanup_batch, self.time_slice)

    def describe(self) -> str:
        return self.policy().describe()

    @property
    def is_batch_candidate(self) -> bool:
        """In the batch dimension: cleanup batch and slice at their defaults."""
        return self.cleanup_batch == DEFAULT_CLEANUP_BATCH and self.time_slice == DEFAULT_TIME_SLICE

    @property
    def is_slice_candidate(self) -> bool:
        """In the time-slice dimension: batch and cleanup batch at their defaults."""
        return self.batch == DEFAULT_BATCH and self.cleanup_batch == DEFAULT_CLEANUP_BATCH

    @property
    def is_cleanup_candidate(self) -> bool:
        """Whether it is in the cleanup dimension (batch and slice at their defaults,
        the all-defaults candidate included): S7 is measured for these."""
        return self.batch == DEFAULT_BATCH and self.time_slice == DEFAULT_TIME_SLICE


def candidates(
    batches: Sequence[int] = DEFAULT_BATCHES,
    cleanup_batches: Sequence[int] = DEFAULT_CLEANUP_BATCHES,
    time_slices: Sequence[float | None] = DEFAULT_TIME_SLICES,
) -> list[Candidate]:
    """Each dimension swept around the defaults, the other two held at theirs.

    The all-defaults policy appears once (first among the batches), whatever the
    lists hold; order: the batches, then the cleanup batches, then the time slices,
    each in the order given.
    """
    found: list[Candidate] = []
    for batch in batches:
        found.append(Candidate(batch, DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE))
    for cleanup_batch in cleanup_batches:
        found.append(Candidate(DEFAULT_BATCH, cleanup_batch, DEFAULT_TIME_SLICE))
    for time_slice in time_slices:
        found.append(Candidate(DEFAULT_BATCH, DEFAULT_CLEANUP_BATCH, time_slice))
    unique: list[Candidate] = []
    for candidate in found:
        if candidate not in unique:
            unique.append(candidate)
    return unique


@attrs.frozen
class Spread:
    """A measured value: its median and the interval the sweep compares (low, high)."""

    median: float
    low: float
    high: float

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high


@attrs.frozen
class Measurement:
    """What pyperf measured for one candidate (``None``: not measured)."""

    tell_per_second: Spread
    ask_round_trip_seconds: Spread
    probe_delay_p99_seconds: Spread
    cleanup_per_second: Spread | None = None
    cleanup_probe_delay_p99_seconds: Spread | None = None
    # Tells per second in each interleaved round (one worker process per round), in
    # round order: what the rule compares, paired with the reference's rounds.
    tell_per_second_rounds: tuple[float, ...] = ()
    cleanup_per_second_rounds: tuple[float, ...] = ()


@attrs.frozen
class CandidateResult:
    """One candidate: its contracts (id -> passed, with reasons) and its speed."""

    candidate: Candidate
    contracts: Mapping[str, bool]
    reasons: Mapping[str, str] = attrs.field(factory=dict)  # failed id -> why
    measurement: Measurement | None = None

    @property
    def passed(self) -> bool:
        return bool(self.contracts) and all(self.contracts.values())

    @property
    def failed(self) -> list[str]:
        return [cid for cid, ok in self.contracts.items() if not ok]


def _slice_rank(time_slice: float | None) -> float:
    return math.inf if time_slice is None else time_slice


def _preference(result: CandidateResult) -> tuple[Any, ...]:
    """Among ties: the smaller batch, then the default (else smaller) cleanup batch,
    then the default (else shorter) time slice."""
    c = result.candidate
    return (
        c.batch,
        c.cleanup_batch != DEFAULT_CLEANUP_BATCH,
        c.cleanup_batch,
        c.time_slice != DEFAULT_TIME_SLICE,
        _slice_rank(c.time_slice),
    )


def reference_of(results: Sequence[CandidateResult]) -> CandidateResult | None:
    """The candidate others are compared with: the all-defaults one, else the first."""
    measured = [r for r in results if r.measurement is not None]
    default = Candidate(DEFAULT_BATCH, DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE)
    for result in measured:
        if result.candidate == default:
            return result
    return measured[0] if measured else None


def _paired(
    own: Spread, rounds: tuple[float, ...], base: Spread | None, base_rounds: tuple[float, ...]
) -> Spread:
    if base is None or len(rounds) < 2 or len(rounds) != len(base_rounds):
        ref = 1.0 if base is None else base.median
        return Spread(own.median / ref, own.low / ref, own.high / ref)
    ratios = sorted(a / b for a, b in zip(rounds, base_rounds, strict=True))
    if len(ratios) >= 5:
        quartiles = statistics.quantiles(ratios, n=4)
        low, high = quartiles[0], quartiles[2]
    else:
        low, high = ratios[0], ratios[-1]
    return Spread(statistics.median(ratios), low, high)


def relative_tell(result: CandidateResult, reference: CandidateResult | None) -> Spread:
    """``result``'s tell throughput relative to ``reference``'s, paired by round."""
    m = result.measurement
    assert m is not None
    base = None if reference is None else reference.measurement
    return _paired(
        m.tell_per_second,
        m.tell_per_second_rounds,
        None if base is None else base.tell_per_second,
        () if base is None else base.tell_per_second_rounds,
    )


def relative_cleanup(result: CandidateResult, reference: CandidateResult | None) -> Spread:
    """The cleanup rate relative to ``reference``'s, paired by round (else the tell)."""
    m = result.measurement
    base = None if reference is None else reference.measurement
    if m is None or m.cleanup_per_second is None or base is None or base.cleanup_per_second is None:
        return relative_tell(result, reference)
    return _paired(
        m.cleanup_per_second,
        m.cleanup_per_second_rounds,
        base.cleanup_per_second,
        base.cleanup_per_second_rounds,
    )


def _winner(
    results: Sequence[CandidateResult],
    metric: Callable[[CandidateResult], Spread],
    preference: Callable[[CandidateResult], tuple[Any, ...]],
) -> CandidateResult | None:
    """The rule within one set of candidates: best median; overlaps tie; preference."""
    eligible = [(r, metric(r)) for r in results if r.passed and r.measurement is not None]
    if not eligible:
        return None
    best = max((value for _, value in eligible), key=lambda value: value.median)
    return min((r for r, value in eligible if value.overlaps(best)), key=preference)


def recommend(results: Sequence[CandidateResult]) -> CandidateResult | None:
    """The recommended candidate by the rule of the module docstring, or ``None``."""
    reference = reference_of(results)
    if reference is None or reference.candidate != Candidate(
        DEFAULT_BATCH, DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE
    ):
        # No all-defaults candidate to sweep around: one race over all of them.
        return _winner(results, lambda r: relative_tell(r, reference), _preference)
    batches = [r for r in results if r.candidate.is_batch_candidate]
    cleanups = [r for r in results if r.candidate.is_cleanup_candidate]
    slices = [r for r in results if r.candidate.is_slice_candidate]
    batch = _winner(batches, lambda r: relative_tell(r, reference), _preference)
    cleanup = _winner(cleanups, lambda r: relative_cleanup(r, reference), _preference)
    time_slice = _winner(slices, lambda r: relative_tell(r, reference), _preference)
    if batch is None:
        return None  # no batch size keeps every contract
    combined = Candidate(
        batch.candidate.batch,
        (cleanup or reference).candidate.cleanup_batch,
        (time_slice or reference).candidate.time_slice,
    )
    for result in results:
        if result.candidate == combined and result.passed:
            return result
    return batch  # the winners' combination was not measured: the batch decides


def _spread_json(spread: Spread | None) -> dict[str, float] | None:
    if spread is None:
        return None
    return {"median": spread.median, "low": spread.low, "high": spread.high}


def to_json(
    results: Sequence[CandidateResult],
    recommended: CandidateResult | None,
    environment: Mapping[str, Any],
) -> dict[str, Any]:
    """The sweep's JSON document, with the keys pinned by the sweep specification.

    Each measured number is the median; ``*_spread`` keys (extra to the pinned ones)
    hold the median and the interval the rule compared.
    """

    reference = reference_of(results)

    def candidate_json(result: CandidateResult) -> dict[str, Any]:
        c = result.candidate
        m = result.measurement
        entry: dict[str, Any] = {
            "batch": c.batch,
            "cleanup_batch": c.cleanup_batch,
            "time_slice": c.time_slice,
            "contracts": dict(result.contracts),
            "passed": result.passed,
            "failure_reasons": dict(result.reasons),
            "tell_per_second": m.tell_per_second.median if m else None,
            "ask_round_trip_seconds": m.ask_round_trip_seconds.median if m else None,
            "probe_delay_p99_seconds": m.probe_delay_p99_seconds.median if m else None,
        }
        if m is not None:
            entry["tell_per_second_spread"] = _spread_json(m.tell_per_second)
            entry["tell_per_second_rounds"] = list(m.tell_per_second_rounds)
            entry["tell_relative_to_reference"] = _spread_json(relative_tell(result, reference))
            entry["ask_round_trip_seconds_spread"] = _spread_json(m.ask_round_trip_seconds)
            entry["probe_delay_p99_seconds_spread"] = _spread_json(m.probe_delay_p99_seconds)
            if m.cleanup_per_second is not None:
                entry["cleanup_per_second"] = m.cleanup_per_second.median
                entry["cleanup_probe_delay_p99_seconds"] = (
                    m.cleanup_probe_delay_p99_seconds.median
                    if m.cleanup_probe_delay_p99_seconds is not None
                    else None
                )
        return entry

    return {
        "recommended": (
            None
            if recommended is None
            else {
                "batch": recommended.candidate.batch,
                "cleanup_batch": recommended.candidate.cleanup_batch,
                "time_slice": recommended.candidate.time_slice,
            }
        ),
        "candidates": [candidate_json(r) for r in results],
        "environment": dict(environment),
    }


__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_CLEANUP_BATCHES",
    "DEFAULT_TIME_SLICES",
    "Candidate",
    "CandidateResult",
    "Measurement",
    "Spread",
    "candidates",
    "recommend",
    "reference_of",
    "relative_tell",
    "to_json",
]
