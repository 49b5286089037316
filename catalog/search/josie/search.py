"""JOSIE: exact top-k overlap set search that picks, at each step, the cheaper of reading the next
batch of posting lists or reading a candidate set (Zhu et al., SIGMOD 2019, Algorithm 1).

Follows Algorithm 1 (§3.4), 0-based, with the corrections listed in docs/algorithms/josie.md:
- partial overlaps *accumulate* (`partial += r`), never reset (erratum B2: the reference code's first release reset it);
- duplicate groups: only the last list of each run of equal group ids is read and credits the run
  length r; a candidate first met there starts at i0 = i − s, j0 = j − s (erratum A11);
- the search starts at position 0 (the printed pseudo-code starts at x_2), keeps an ignore set of
  read or pruned candidates so later lists never recreate them, stops creating candidates once no
  unseen set can beat the k-th overlap but keeps updating pending ones, and pushes every pending
  candidate with its (then exact) count when all lists are read (errata A2, A3);
- Eq. 9 uses the observed-window density, estimates are capped at the upper bound, costs are
  clamped at a floor, and the prefix-shrink benefit counts only unread, distinct lists (errata A4–A6).
Read decisions are taken at batch boundaries (λ distinct lists, default 20), as in the reference
implementation, except that a decision that reads no set doubles the distance to the next one (up
to 16 batches; back to one batch after a read). Big queries over a skewed lake read thousands of
short lists with nothing worth a set read, and a decision every 20 lists there cost more than the
lists; when decisions happen changes only the cost, never the answer, which stays exact. Tie
handling: see `results.TopK`.

Three steps go beyond Algorithm 1.

First, filling the heap. Algorithm 1 reads a candidate set after every list until k sets are
known, on estimates made from one or two lists; on real lakes (short lists, big sets) those reads
were mostly wasted, and JOSIE then read every list anyway. We *rent before buying* (`_rent`): read
lists only, counting them as MergeList does, until they have cost what the k set reads that fill
the heap would (k·S(0)); then weigh those reads, plus settling the candidates that tie with them,
against reading every list left (`_fill_or_lists`). If the lists win, every list is read and
counted ("lists"): the counts are exact and no set is read. If the sets win, the rented lists become
candidates and the k best are read. Before any list, a query whose lists cost no more than three
times k·S(0) is merged at once ("merge", the small-query path): a set path would cost at least the
rent, the reads and turning the rented lists into candidates.

Second, once discovery has ended (no unseen set can reach the k-th overlap), what is left is
settling the pending candidates; Algorithm 1 reads only those whose estimate beats the k-th
overlap, so a few whose estimates do not (but whose bounds still do) keep it reading lists to the
end of the query, and in a large query those are the longest lists. When the cost model prices
reading all pending sets below reading the unread lists, we read the sets and stop
(`_settle_by_sets`); each read gives an exact overlap, as any candidate read does.

Third, candidate state lives in numpy arrays indexed by set id, and the lists between two decision
points are merged in one vectorised step: while the heap is full nothing changes the k-th overlap
between decision points, so Algorithm 1's per-entry order (create a candidate at first sight while
unseen sets can still win, accumulate r, keep the latest position) yields the same state.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from catalog.search.josie.cost_model import DEFAULT_COSTS, CostModel
from catalog.search.josie.mergelist import EntryCounter, mergelist_counts, one_entry_each
from catalog.search.josie.query_plan import ListReader, PackedLists, QueryPlan, count_matches
from catalog.search.josie.reader import IndexReader
from catalog.search.josie.results import SearchStats, TopK

_UNSEEN, _PENDING, _DONE = 0, 1, 2
_MAX_BACKOFF = 16  # decisions that read nothing stretch the next interval up to this many batches


class _Candidates:
    """Candidates in arrays indexed by set id: status, partial overlap, i0 (query position of the first
    match), j0 (set position of the first match), j (set position of the latest match), set size.

    The arrays span every set id, so a big query touches most of their pages; fresh zeroed arrays
    would page-fault on each of those (about 5 ms for 100,000 sets, a fifth of a large search).
    Each thread therefore keeps one set of arrays: `release` zeroes the entries this search wrote and
    hands them back. A search that raises never releases, so the next one just allocates anew.
    """

    _FIELDS = ("status", "partial", "i0", "j0", "j", "size")
    _pool = threading.local()

    def __init__(self, ignore: frozenset[int]) -> None:
        arrays = getattr(self._pool, "arrays", None)
        self._pool.arrays = None
        cap = max(1024, 2 * (max(ignore) + 1) if ignore else 0)
        if arrays is None:
            arrays = (np.zeros(cap, dtype=np.int8), *(np.zeros(cap, dtype=np.int64) for _ in range(5)))
        self.status, self.partial, self.i0, self.j0, self.j, self.size = arrays
        self.fit(cap - 1)
        self.order = np.empty(0, dtype=np.int64)  # pending set ids in creation order (done ones dropped lazily)
        self.created: list[np.ndarray] = []  # every id written to, for `release`
        self.count = 0  # pending candidates
        if ignore:
            ignored = np.fromiter(ignore, dtype=np.int64, count=len(ignore))
            self.status[ignored] = _DONE
            self.created.append(ignored)

    def fit(self, max_id: int) -> None:
        cap = len(self.status)
        if max_id < cap:
            return
        new = max(2 * cap, max_id + 1)
        for name in self._FIELDS:
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[:cap] = old
            setattr(self, name, grown)

    def create(self, ids: np.ndarray) -> None:
        """`ids` (new, in creation order) become pending; the caller has set their i0, j0 and size."""
        self.status[ids] = _PENDING
        self.order = np.concatenate((self.order, ids))
        self.created.append(ids)
        self.count += len(ids)

    def release(self) -> None:
        """Zero what this search wrote and return the arrays to the thread's pool. Only status, partial
        and j need it: i0, j0 and size are written when a set becomes a candidate, before any read."""
        if self.created:
            touched = np.concatenate(self.created)
            for name in ("status", "partial", "j"):
                getattr(self, name)[touched] = 0
        self._pool.arrays = tuple(getattr(self, name) for name in self._FIELDS)

    def pending(self) -> np.ndarray:
        """Pending set ids in creation order."""
        order = self.order[self.status[self.order] == _PENDING]
        self.order = order
        return order

    def upper_bounds(self, ids: np.ndarray, n: int, i: int) -> np.ndarray:
        return self.partial[ids] + np.minimum(n - 1 - i, self.size[ids] - 1 - self.j[ids])

    def finish(self, ids: np.ndarray | int) -> None:
        """Read or pruned: never a candidate again."""
        self.status[ids] = _DONE
        self.count -= 1 if isinstance(ids, int) else len(ids)


def _below(values: np.ndarray, kth: int, exact_ties: bool) -> np.ndarray:
    """`TopK.prunable` elementwise."""
    return values < kth if exact_ties else values <= kth


def _set_costs(costs: CostModel, m: np.ndarray) -> np.ndarray:
    """`CostModel.set_cost` elementwise."""
    return np.maximum(costs.floor, costs.read_set_a + costs.read_set_b * np.maximum(0, m))


def josie_top_k(
    reader: IndexReader,
    plan: QueryPlan,
    k: int,
    *,
    costs: CostModel = DEFAULT_COSTS,
    batch_size: int = 20,
    ignore: frozenset[int] = frozenset(),
    exact_ties: bool = True,
    stats: SearchStats | None = None,
    estimation_budget: int = 2_000_000,
) -> TopK:
    """The exact top-k sets by overlap with the query (see `results.TopK.results` for the answer)."""
    stats = stats if stats is not None else SearchStats()
    n = plan.n
    if n == 0:
        return TopK(k, exact_ties=exact_ties)
    fill_cost = min(k, plan.list_entries) * costs.set_cost(0)  # the fewest set reads that fill the heap
    if costs.lists_cost(len(plan.run_ends), plan.list_entries) <= 3 * fill_cost:
        # The search would first read lists worth `fill_cost` (the rent, `_rent`); a set path then
        # costs at least `fill_cost` in reads plus about as much again to turn the rented lists into
        # candidates (bookkeeping costs about twice as much per entry as counting). So when all the
        # lists cost no more than three times that, merge them at once with no per-step machinery
        # (this test and the ranking cost what MergeList's do: a small query's search takes ~0.5 ms).
        stats.shortcut = "merge"
        return TopK.of_counts(k, *mergelist_counts(reader, plan, ignore=ignore, stats=stats), exact_ties=exact_ties)
    q_ids = plan.token_ids
    run_i = np.asarray(plan.run_ends, dtype=np.int64)
    run_s = np.asarray(plan.skipped, dtype=np.int64)
    n_runs = len(run_i)
    # list_cost_upto[t]: cost of the distinct lists at query positions <= t (skipped lists cost nothing)
    per_pos = np.zeros(n)
    freqs = np.asarray(plan.frequencies, dtype=np.float64)[run_i]
    per_pos[run_i] = np.maximum(costs.floor, costs.read_list_a + costs.read_list_b * freqs)
    list_cost_upto = np.cumsum(per_pos)
    top = TopK(k, exact_ties=exact_ties)
    cand = _Candidates(ignore)
    lists = ListReader(reader, plan, stats, block=batch_size)
    start = _rent(reader, cand, top, costs, lists, plan, fill_cost, list_cost_upto, stats)
    if start == n_runs:  # every list was read and counted: `top` holds the answer
        cand.release()
        return top
    since_decision = start
    interval = batch_size  # lists between decisions: backs off while decisions read nothing
    budget = estimation_budget
    run_start = run_i - run_s  # first query position of each run, ascending
    while start < n_runs:  # the heap is full from here on
        discovery_end = _discovery_end(run_start, n, top)
        if start >= discovery_end:  # no unseen set can enter the top k: only pending candidates are left
            if not cand.count:
                break
            i = int(run_i[start - 1])
            if _settle_by_sets(
                reader, cand, top, costs, q_ids, n, i, float(list_cost_upto[-1] - list_cost_upto[i]), stats
            ):
                break
        stop = min(n_runs, start + max(1, interval - since_decision))
        if start < discovery_end < stop:
            stop = discovery_end  # end the segment where discovery ends: settling by sets may pay from there
        n_discover = stop - start if start < discovery_end else 0
        _merge(
            cand,
            lists.segment(start, stop, fetch_until=discovery_end if n_discover else n_runs),
            start,
            n_discover,
            run_i,
            run_s,
            stats,
        )
        last = stop - 1
        i = int(run_i[last])
        if i == n - 1:
            break
        since_decision += stop - start
        start = stop
        if since_decision < interval or not cand.count:
            continue
        since_decision = 0
        interval = min(_MAX_BACKOFF * batch_size, 2 * interval)  # until a decision reads a set
        next_end = int(run_i[min(last + batch_size, n_runs - 1)])
        cost_batch = float(list_cost_upto[next_end] - list_cost_upto[i])
        use_benefits = budget > 0
        qualified, benefit_batch = _assess(cand, top, costs, n, i, next_end, batch_size, with_benefit=use_benefits)
        budget -= cand.count
        if not qualified or qualified[0][0] <= top.kth:
            continue
        benefit_is_current = True  # until a candidate is finished: same kth, same pending sets
        for est, x in qualified:
            if cand.status[x] != _PENDING:  # pruned while assessing an earlier read
                continue
            if est <= top.kth:
                break
            partial, j, size = int(cand.partial[x]), int(cand.j[x]), int(cand.size[x])
            cost_x = costs.set_cost(size - 1 - j)
            if top.full:
                if use_benefits and not benefit_is_current:  # kth may have risen, candidates gone
                    _, benefit_batch = _assess(
                        cand, top, costs, n, i, next_end, batch_size, with_benefit=True, estimate=False
                    )
                    budget -= 2 * cand.count
                benefit_x = _read_benefit(x, est, cand, top, costs, n, i, list_cost_upto, with_candidates=use_benefits)
                if benefit_x - cost_x < benefit_batch - cost_batch:
                    break
                use_benefits = budget > 0
            benefit_is_current = False
            if top.prunable(partial + min(n - 1 - i, size - 1 - j)):
                cand.finish(x)
                continue
            _read_candidate(reader, cand, top, q_ids, x, stats)
            interval = batch_size
    # Either every list was read (pending counts are exact) or nothing is pending.
    ids = cand.pending()
    top.push_many(ids, cand.partial[ids])
    cand.release()
    return top


def _merge(
    cand: _Candidates,
    seg: PackedLists,
    start: int,
    n_discover: int,
    run_i: np.ndarray,
    run_s: np.ndarray,
    stats: SearchStats,
) -> None:
    """Apply the lists of runs start, start+1, … (concatenated in `seg`) to the candidates: pending
    ones gain r per list they are in and move their latest position; an unseen set becomes a
    candidate in the first run it appears in if that is one of the first `n_discover` runs.

    Runs hold each set at most once, so a set's first entry in the segment is its first run; the
    discovery runs are a prefix of the segment, so creation looks at that prefix only, and the
    sets it creates are then applied with the pending ones (their first entry included). New sets
    are found without sorting (a sort of the entries cost as much as the rest of a middling search):
    each one's first entry is the least entry index `np.minimum.at` writes for it."""
    if len(seg.set_ids) == 0:
        return
    sid = seg.set_ids.astype(np.int64)
    cand.fit(int(sid.max()))
    offsets = seg.offsets
    if n_discover:
        head = sid[: offsets[n_discover]]
        new = np.flatnonzero(cand.status[head] == _UNSEEN)
        if len(new):
            at = _first_entries(cand, head[new], new)  # each new set's first entry, in segment order
            made = head[at]
            run = np.searchsorted(offsets, at, side="right") - 1  # its run, from start
            s = run_s[start + run]
            cand.i0[made] = run_i[start + run] - s
            cand.j0[made] = seg.positions[at] - s
            cand.size[made] = seg.sizes[at]
            cand.create(made)  # creation order: run, then set id (each list is sorted by set id)
            stats.n_candidates += len(made)
    apply = np.flatnonzero(cand.status[sid] == _PENDING)
    if len(apply) == 0:
        return
    ids = sid[apply]
    skipped = run_s[start : start + len(offsets) - 1]
    if skipped.any():
        gain = skipped[np.searchsorted(offsets, apply, side="right") - 1] + 1
        np.add.at(cand.partial, ids, gain)
    else:  # no duplicate runs here: every list credits 1
        np.add.at(cand.partial, ids, 1)
    # int64 like cand.j: ufunc.at is an order of magnitude slower when it has to cast
    np.maximum.at(cand.j, ids, seg.positions[apply].astype(np.int64))


def _rent(
    reader: IndexReader,
    cand: _Candidates,
    top: TopK,
    costs: CostModel,
    lists: ListReader,
    plan: QueryPlan,
    fill_cost: float,
    list_cost_upto: np.ndarray,
    stats: SearchStats,
) -> int:
    """Rent before buying: read lists only until they have cost `fill_cost`, what the fewest set
    reads that fill the heap would; then weigh those reads against reading every list left
    (`_fill_or_lists`). Too few candidates to fill the heap: rent again for twice as long (kth stays
    0 meanwhile, so every list read is needed anyway). Returns the next run to read: every run when
    the lists won and `top` holds the answer; else the heap is full (its sets read) and the rented
    lists are candidates.

    The rented lists are only counted (`EntryCounter`, as MergeList counts) and their sets' latest
    positions and sizes noted, which is all the choice needs; if the sets win, the rented lists are
    then applied to the candidate arrays (`_merge`). Candidate bookkeeping costs about twice as much
    per entry as counting, and when the lists win (ties at the top, common values) it was all waste."""
    run_i = np.asarray(plan.run_ends, dtype=np.int64)
    run_s = np.asarray(plan.skipped, dtype=np.int64)
    run_cost = list_cost_upto[run_i]  # cost of the lists up to and including each run's
    n, n_runs = plan.n, len(run_i)
    counter = EntryCounter()
    rented: list[tuple[int, PackedLists]] = []
    met: list[np.ndarray] = []
    start, rent = 0, fill_cost
    while True:
        spent = float(run_cost[start - 1]) if start else 0.0
        stop = min(n_runs, max(start + 1, int(np.searchsorted(run_cost, spent + rent, side="right"))))
        seg = lists.segment(start, stop)
        sid = counter.add(seg, run_s[start:stop] + 1)
        if len(sid):
            cand.fit(int(sid.max()))
            np.maximum.at(cand.j, sid, seg.positions.astype(np.int64))  # positions rise run by run
            cand.size[sid] = seg.sizes
            cand.created.append(sid)  # j is zeroed by `release`
            met.append(sid)
        rented.append((start, seg))
        start, i = stop, int(run_i[stop - 1])
        if stop == n_runs:
            stats.shortcut = "lists"
            _push_counted(counter, cand, top, stats)
            return n_runs
        seen = np.concatenate(met) if met else np.empty(0, dtype=np.int64)
        ids = seen[one_entry_each(seen, cand.i0)]  # i0 is scratch until a set becomes a candidate
        ids = ids[cand.status[ids] == _UNSEEN]  # ignored sets are done
        if len(ids) >= top.k:
            break
        rent *= 2
    fill = _fill_or_lists(ids, counter.counts(ids), cand.size[ids], cand.j[ids], top, costs, n, i, list_cost_upto)
    if fill is None:
        stats.shortcut = "lists"
        counter.add(lists.segment(start, n_runs), run_s[start:] + 1)
        _push_counted(counter, cand, top, stats)
        return n_runs
    counter.discard()
    for at, seg in rented:  # the sets win: the rented lists become candidates, as if read one by one
        _merge(cand, seg, at, len(seg.offsets) - 1, run_i, run_s, stats)
    for x in fill.tolist():
        _read_candidate(reader, cand, top, plan.token_ids, x, stats)
    return start


def _push_counted(counter: EntryCounter, cand: _Candidates, top: TopK, stats: SearchStats) -> None:
    """Every list has been counted: push each set's count (its exact overlap), leaving out the done
    ones (ignored, or read and pushed already)."""
    ids, counts = counter.take()
    if len(ids):
        cand.fit(int(ids.max()))
        keep = cand.status[ids] != _DONE
        ids, counts = ids[keep], counts[keep]
    stats.n_candidates += len(ids)
    top.push_many(ids, counts)


def _first_entries(cand: _Candidates, ids: np.ndarray, entries: np.ndarray) -> np.ndarray:
    """Of `entries` (ascending) holding set `ids` (unseen, so their `j` slots are free), the first
    entry of each set. `cand.j` serves as scratch and is zeroed again."""
    mark = cand.j
    mark[ids] = int(entries[-1]) + 1  # above every entry index
    np.minimum.at(mark, ids, entries)
    first = entries[mark[ids] == entries]
    mark[ids] = 0
    return first


def _discovery_end(run_start: np.ndarray, n: int, top: TopK) -> int:
    """Runs [0, end) can still create candidates: a set first met in run r has overlap at most
    n − run_start[r], which falls run by run, so the runs that can beat the k-th overlap are a prefix."""
    if not top.full:
        return len(run_start)
    # not prunable: n − start >= kth (exact ties) or > kth (the paper's)
    return int(np.searchsorted(run_start, n - top.kth, side="right" if top.exact_ties else "left"))


def _best_first(cand: _Candidates, ids: np.ndarray, n: int, i: int) -> list[int]:
    """Pending `ids` by estimated overlap (Eq. 4, capped at the bound), then bound, then set id."""
    partial, i0 = cand.partial[ids], cand.i0[ids]
    ub = cand.upper_bounds(ids, n, i)
    est = np.minimum(ub, (partial / (i - i0 + 1) * (n - i0)).astype(np.int64))
    return ids[np.lexsort((ids, -ub, -est))].tolist()


def _fill_or_lists(
    ids: np.ndarray,
    partial: np.ndarray,
    size: np.ndarray,
    j: np.ndarray,
    top: TopK,
    costs: CostModel,
    n: int,
    i: int,
    list_cost_upto: np.ndarray,
) -> np.ndarray | None:
    """With the heap empty, after the lists up to position i: the k sets to read now to fill it (best
    first), or None when reading every list left costs no more than the least the set path can cost.
    That least is the reads themselves plus settling the other candidates whose estimates reach
    kth', the k-th estimate of the sets read (by their own sets or by the lists left, the cheaper):
    when most candidates tie at the top, as a few common values make them, no read can prune them.
    The lists the prefix still needs are not counted: candidates not met yet can raise kth' far
    above what the ones met so far say (a query of 350,000 real tokens met 54 sets in its rent, and
    its true k-th overlap was 1,000 times their k-th estimate; counting those lists sent it through
    all 57,000 of its lists, 3× slower than ProbeSet), and reading sets leaves the search free to
    read the lists later, while reading every list now is final. `ids` are the candidates, with
    their counts, sizes and latest positions.

    Estimates here count a set's matches over *every* list read (all were, and a set is absent from
    those before its first match), not from its first match as Eq. 4 does: after the rent, Eq. 4
    rates a set met once, in the last list read, at the whole rest of the query, and such sets
    crowded out the ones met in every list."""
    ub = partial + np.minimum(n - 1 - i, size - 1 - j)
    est = np.minimum(ub, (partial * n) // (i + 1))
    k = top.k
    cut = len(est) - k
    best = np.flatnonzero(est >= np.partition(est, cut)[cut])  # the k-th best estimate and its ties
    best = best[np.lexsort((ids[best], -ub[best], -est[best]))[:k]]
    rest = float(list_cost_upto[-1] - list_cost_upto[i])
    suffix = size - 1 - j
    cost = float(_set_costs(costs, suffix[best]).sum())
    others = ~_below(est, int(est[best].min()), top.exact_ties)
    others[best] = False
    if others.any():
        cost += min(rest, float(_set_costs(costs, suffix[others]).sum()))
    return None if rest <= cost else ids[best]


def _read_candidate(
    reader: IndexReader, cand: _Candidates, top: TopK, q_ids: np.ndarray, x: int, stats: SearchStats
) -> None:
    """Read the rest of set x (after its latest match) and push its exact overlap."""
    cand.finish(x)
    suffix = reader.read_set_suffix(x, int(cand.j[x]) + 1)
    stats.n_sets_read += 1
    stats.n_set_tokens_read += len(suffix)
    top.push(x, int(cand.partial[x]) + count_matches(q_ids, suffix))


def _suffixes(cand: _Candidates, ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """Tokens after each candidate's latest match: what reading its set costs."""
    return cand.size[ids] - 1 - cand.j[ids]


def _settle_by_sets(
    reader: IndexReader,
    cand: _Candidates,
    top: TopK,
    costs: CostModel,
    q_ids: np.ndarray,
    n: int,
    i: int,
    cost_lists: float,
    stats: SearchStats,
) -> bool:
    """Once discovery has ended, finish by reading every pending set when that costs less than
    reading the lists still unread (`cost_lists`); True when done so, and the search is over.

    Algorithm 1 reads only candidates whose estimate beats the k-th overlap; one whose estimate does
    not, but whose bound still does, keeps the search reading lists to the end of the query, and in a
    large query those last lists are the longest. Reading its set instead settles it as exactly."""
    ids, _ = _prune(cand, top, n, i)
    if float(_set_costs(costs, _suffixes(cand, ids)).sum()) > cost_lists:
        return False
    for x in _best_first(cand, ids, n, i):
        # the k-th overlap rises as sets are read: re-check each bound (no list is read from here on)
        if top.prunable(int(cand.partial[x]) + min(n - 1 - i, int(cand.size[x] - 1 - cand.j[x]))):
            cand.finish(x)
        else:
            _read_candidate(reader, cand, top, q_ids, x, stats)
    return True


def _prune(cand: _Candidates, top: TopK, n: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Finish the pending candidates whose bound at position i cannot reach the k-th overlap; the
    others' ids and bounds."""
    ids = cand.pending()
    ub = cand.upper_bounds(ids, n, i)
    pruned = _below(ub, top.kth, top.exact_ties)
    if pruned.any():
        cand.finish(ids[pruned])
        ids, ub = ids[~pruned], ub[~pruned]
    return ids, ub


def _assess(
    cand: _Candidates,
    top: TopK,
    costs: CostModel,
    n: int,
    i: int,
    next_end: int,
    batch_size: int,
    *,
    with_benefit: bool,
    estimate: bool = True,
) -> tuple[list[tuple[int, int]], float]:
    """Prune dominated candidates; estimate the others' overlaps (Eq. 4) and the benefit of reading
    the next batch of lists (Eqs. 9–12). Returns ([(est, set_id)] best first, benefit of the batch);
    when estimating and no estimate beats the k-th overlap (nothing will be read), ([], 0.0)."""
    ids, ub = _prune(cand, top, n, i)
    kth = top.kth
    i0 = cand.i0[ids]
    window = i - i0 + 1
    watched = window > batch_size  # fewer lists watched are too few to estimate (released code's rule)
    ids, ub, i0, window = ids[watched], ub[watched], i0[watched], window[watched]
    partial = cand.partial[ids]
    if estimate:
        est = np.minimum(ub, (partial / window * (n - i0)).astype(np.int64))  # Eq. 4, capped at the bound
        if not len(est) or int(est.max()) <= kth:  # no read can qualify: the caller needs nothing else
            return [], 0.0
    benefit = 0.0
    if with_benefit and len(ids):
        d = next_end - i
        j0, j, size = cand.j0[ids], cand.j[ids], cand.size[ids]
        suffix = size - 1 - j
        matches = (partial / window * d).astype(np.int64)  # Eq. 9 with the observed-window density
        trunc = (d * (size - j0) / (n - i0)).astype(np.int64)  # Eq. 10: how far the read start moves
        ub_next = partial + matches + np.minimum(n - 1 - next_end, size - 1 - (j + trunc))  # Eq. 11
        cost = _set_costs(costs, suffix)
        gain = np.where(
            _below(ub_next, kth, top.exact_ties), cost, cost - _set_costs(costs, np.maximum(0, suffix - trunc))
        )
        benefit = float(gain.sum())
    if not estimate:
        return [], benefit
    o = np.lexsort((ids, -est))
    return list(zip(est[o].tolist(), ids[o].tolist(), strict=True)), benefit


def _read_benefit(
    x: int,
    est: int,
    cand: _Candidates,
    top: TopK,
    costs: CostModel,
    n: int,
    i: int,
    list_cost_upto: np.ndarray,
    *,
    with_candidates: bool,
) -> float:
    """Eq. 7: lists the prefix would no longer need plus candidates the raised k-th overlap prunes."""
    kth, kth_new = top.kth, top.kth_after(est)
    if kth_new <= kth:
        return 0.0
    # A set first met at position t can reach n − t; the prefix ends where that falls under kth.
    slack = 0 if top.exact_ties else 1
    end_now = n - 1 if kth == 0 else min(n - 1, n - kth - slack)
    end_new = min(n - 1, n - kth_new - slack)
    lo, hi = max(i, end_new), end_now
    benefit = float(list_cost_upto[hi] - list_cost_upto[lo]) if hi > lo else 0.0
    if not with_candidates:  # over the estimation budget: the prefix term only (released code's fast mode)
        return benefit
    ids = cand.pending()
    ids = ids[ids != x]
    ub = cand.upper_bounds(ids, n, i)
    gone = _below(ub, kth_new, top.exact_ties)
    if gone.any():
        benefit += float(_set_costs(costs, _suffixes(cand, ids))[gone].sum())
    return benefit
