"""The half tiles' ring protocol (kernels_src/tma_gemv.cuh, C = 3), run as a model on the CPU: the producer lane
and the consumer warpgroup as interleaved programs over mbarriers with PTX's semantics (parity waits, transaction
bytes that may land before their phase is armed), every copy landing at a random later time. The model checks
what no single launch on the GPU can show for every (STAGES, n_k): consumers read slot i only when its weights and
both x boxes are slot i's, no copy is issued into a slot whose previous data is still in use, every byte lands on
the phase it was meant for, and nothing waits forever."""

import random

import pytest

IN_FLIGHT = 3  # wgmma groups a half-tile consumer keeps in flight (tma_gemv.cuh, kInFlight, STAGES > 3)
WARPS = 4  # consumer warps per CTA, each arriving once on `empty`


class Barrier:
    """An mbarrier: a phase completes when its expected arrivals have come and its transaction bytes landed."""

    def __init__(self, arrivals):
        self.arrivals, self.pending, self.tx, self.completed = arrivals, arrivals, 0, 0

    def done(self, parity):  # mbarrier.try_wait.parity: has the phase of this parity completed?
        return (self.completed & 1) != parity

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.arrivals

    def arrive(self, expect_tx=0):
        assert self.pending > 0, "an arrival on a phase that has had all its arrivals"
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes):  # before the phase is armed the count may go negative, as PTX allows
        self.tx -= nbytes
        self._maybe_complete()


class Cta:
    def __init__(self, stages):
        self.full = [Barrier(1) for _ in range(stages)]
        self.empty = [Barrier(WARPS) for _ in range(stages)]
        self.data = {}  # (kind, slot) -> the ring index whose bytes landed there
        self.owner = {}  # (kind, slot) -> the ring index last copied (or being copied) there
        self.released = set()  # ring indices this CTA's consumers are done with


W_BYTES, X_BYTES = 8, 1  # per box; a slot holds one weight box and two x boxes


def ring_walk(stages, n_k):
    """(round, slot, ring index) in the order both sides of tma_gemv.cuh walk the ring: a round of STAGES slots at
    a time, stopping at index n_k."""
    for i in range(n_k):
        yield i // stages, i % stages, i


def producer(me, stages, n_k, copy, wait_for_retire=True):
    """The producer lane, as tma_gemv.cuh writes it."""
    for rnd, s, i in ring_walk(stages, n_k):
        if rnd > 0 and wait_for_retire:
            yield me.empty[s], (rnd - 1) & 1
        me.full[s].arrive(W_BYTES + 2 * X_BYTES)
        copy(("w", s), i, s, W_BYTES)
        copy(("x0", s), i, s, X_BYTES)  # one 3-D copy lands both boxes; each counted here on its own
        copy(("x1", s), i, s, X_BYTES)


def consumer(me, stages, n_k, reads):
    for rnd, s, i in ring_walk(stages, n_k):
        yield me.full[s], rnd & 1
        assert all(me.data.get((kind, s)) == i for kind in ("w", "x0", "x1")), (i, me.data)
        reads.append(i)
        if i >= IN_FLIGHT:
            done = (s + stages - IN_FLIGHT) % stages
            me.released.add(i - IN_FLIGHT)
            for _ in range(WARPS):
                me.empty[done].arrive()


def run_ring(stages, n_k, seed, wait_for_retire=True):
    """One launch of the model; wait_for_retire=False breaks the protocol on purpose (the test that shows the
    model can fail)."""
    cta = Cta(stages)
    reads = []
    flying = []  # ((kind, slot), ring index, barrier slot, bytes, the phase it belongs to)
    rng = random.Random(seed)

    def copy(where, index, s, nbytes):
        previous = cta.owner.get(where)
        assert previous is None or previous in cta.released, f"copy of {index} over {previous}"
        cta.owner[where] = index
        flying.append((where, index, s, nbytes, index // stages))

    programs = {
        "producer": producer(cta, stages, n_k, copy, wait_for_retire),
        "consumer": consumer(cta, stages, n_k, reads),
    }
    waiting = {name: next(prog, None) for name, prog in programs.items()}
    while any(w is not None for w in waiting.values()) or flying:
        runnable = [name for name, w in waiting.items() if w is not None and w[0].done(w[1])]
        if flying and (not runnable or rng.random() < 0.5):  # a copy lands, in any order
            where, index, s, nbytes, phase = flying.pop(rng.randrange(len(flying)))
            assert (
                cta.full[s].completed == phase
            ), f"bytes of use {phase} land on phase {cta.full[s].completed}"
            cta.data[where] = index
            cta.full[s].complete_tx(nbytes)
            continue
        assert runnable, f"deadlock: {waiting}"
        name = rng.choice(runnable)
        waiting[name] = next(programs[name], None)
    assert reads == list(range(n_k))


@pytest.mark.parametrize("stages", [4, 6, 8, 12, 16])
def test_the_half_tile_ring_delivers_every_slot_without_overwrites_or_deadlock(stages):
    for n_k in sorted({1, 2, IN_FLIGHT, stages - 1, stages, stages + 1, 2 * stages + 3, 64}):
        for seed in range(4):
            run_ring(stages, n_k, seed)


def test_the_model_catches_a_producer_that_does_not_wait_for_the_slot_to_retire():
    """It re-arms a slot's barrier before its last use completed, and copies over data still in use."""
    with pytest.raises(AssertionError, match="copy of .* over|an arrival on a phase that has had all"):
        run_ring(8, 32, 0, wait_for_retire=False)
