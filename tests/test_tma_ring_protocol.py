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


# ---- The multicast ring (tma_gemm, MC): a cluster of C CTAs on neighbouring row tiles of one split. Each rank
# copies its own weights and its piece of x into every rank's slot; each consumer warp hands a slot back to every
# rank; no CTA leaves before the cluster barrier that every thread reaches once done with the ring.
GEMM_IN_FLIGHT = 1  # tma_gemv.cuh, kInFlight for full tiles


def mc_producer(me, ranks, rank, live, stages, n_k, copy):
    """Rank `rank`'s producer lane: the first round's weights before the start barrier, its x pieces after it
    (the model starts every rank's barriers initialised), then the steady rounds."""
    for rnd, s, i in ring_walk(stages, n_k):
        if rnd > 0:
            yield me.empty[s], (rnd - 1) & 1
        me.full[s].arrive(W_BYTES + live * X_BYTES)
        copy(rank, ("w", s), i, s, W_BYTES)
        if rank < live:  # this rank's piece holds a token: into every rank's slot, counted on each one's barrier
            for dest in range(ranks):
                copy(dest, (f"x{rank}", s), i, s, X_BYTES)


def mc_consumer(me, cluster, live, stages, n_k, reads, release_all=True):
    for rnd, s, i in ring_walk(stages, n_k):
        yield me.full[s], rnd & 1
        kinds = ["w"] + [f"x{r}" for r in range(live)]
        assert all(me.data.get((kind, s)) == i for kind in kinds), (i, me.data)
        reads.append(i)
        if i >= GEMM_IN_FLIGHT:
            done = (s + stages - GEMM_IN_FLIGHT) % stages
            for other in cluster if release_all else [me]:  # lane r of each warp: rank r's copy of the barrier
                assert not other.exited, "an arrival on a CTA that has left"
                other.released.add((id(me), i - GEMM_IN_FLIGHT))
                for _ in range(WARPS):
                    other.empty[done].arrive()


def run_cluster(ranks, live, stages, n_k, seed, end_barrier=True, release_all=True):
    """One launch of a cluster; end_barrier=False lets each CTA leave as soon as its own ring is done, and
    release_all=False hands each slot back to its own rank only (the tests that show both are needed)."""
    cluster = [Cta(stages) for _ in range(ranks)]
    for cta in cluster:
        cta.empty = [Barrier(WARPS * (ranks if release_all else 1)) for _ in range(stages)]
        cta.exited = False
    reads = [[] for _ in range(ranks)]
    flying = []  # (dest, (kind, slot), ring index, barrier slot, bytes, phase)
    rng = random.Random(seed)

    def copy(dest, where, index, s, nbytes):
        cta = cluster[dest]
        assert not cta.exited, "a copy into a CTA that has left"
        previous = cta.owner.get(where)
        # free only once every rank's consumers are done with it
        assert previous is None or all(
            (id(c), previous) in cta.released for c in cluster
        ), f"copy of {index} over {previous} into rank {dest}"
        cta.owner[where] = index
        flying.append((dest, where, index, s, nbytes, index // stages))

    programs = {}
    for r, cta in enumerate(cluster):
        programs[("producer", r)] = mc_producer(cta, ranks, r, live, stages, n_k, copy)
        programs[("consumer", r)] = mc_consumer(cta, cluster, live, stages, n_k, reads[r], release_all)
    waiting = {name: next(prog, None) for name, prog in programs.items()}
    while any(w is not None for w in waiting.values()) or flying:
        for r, cta in enumerate(cluster):  # a CTA leaves when its programs are done (or all of the cluster's)
            finished = waiting[("producer", r)] is None and waiting[("consumer", r)] is None
            if finished and (not end_barrier or all(w is None for w in waiting.values())):
                cta.exited = True
        runnable = [name for name, w in waiting.items() if w is not None and w[0].done(w[1])]
        if flying and (not runnable or rng.random() < 0.5):
            dest, where, index, s, nbytes, phase = flying.pop(rng.randrange(len(flying)))
            cta = cluster[dest]
            assert not cta.exited, "bytes land in a CTA that has left"
            assert cta.full[s].completed == phase, f"bytes of use {phase} land on phase {cta.full[s].completed}"
            cta.data[where] = index
            cta.full[s].complete_tx(nbytes)
            continue
        assert runnable, f"deadlock: {waiting}"
        name = rng.choice(runnable)
        waiting[name] = next(programs[name], None)
    assert all(r == list(range(n_k)) for r in reads)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("stages", [4, 6, 8])
def test_the_multicast_ring_delivers_every_slot_to_every_rank(ranks, stages):
    for live in sorted({1, ranks - 1, ranks} - {0}):  # pieces wholly past m are neither copied nor counted
        for n_k in sorted({1, 2, stages - 1, stages, stages + 1, 2 * stages + 3, 40}):
            for seed in range(3):
                run_cluster(ranks, live, stages, n_k, seed)


def test_the_model_catches_a_cta_that_leaves_before_its_cluster():
    """Without the cluster barrier at the end a fast rank leaves while a slower one still arrives on its
    barriers: the arrivals for the last slots, which no producer waits for."""
    with pytest.raises(AssertionError, match="has left"):
        for seed in range(20):
            run_cluster(4, 4, 4, 16, seed, end_barrier=False)


def test_the_model_catches_a_rank_that_refills_a_slot_another_rank_still_reads():
    """A producer that waits only for its own consumers multicasts over a slot a slower rank has not finished."""
    with pytest.raises(AssertionError, match="copy of .* over"):
        for seed in range(20):
            run_cluster(2, 2, 4, 32, seed, release_all=False)
