//! Per-owner counters written per thread, and the flush that aggregates them (the rule:
//! an updater never waits behind a flush; a flush that held a lock only to detach an updated
//! list, never while aggregating, would still make a pusher wait for a preempted holder, so
//! here detaching is one atomic swap and no lock is held at all, as the kernel's `llist`).
//!
//! ```text
//!  Hub (one per service)
//!   ├─ lists[i]   one per thread slot i: the lockless chain of slots updated since the flush
//!   ├─ flushing   mutex: one flush at a time; guards every slot's `last`
//!   └─ root       the root group (group.rs)
//!
//!  Tally (one per owner) ─ slots[i] ─ Slot: counts[COUNTERS], lateness cells, on_list, next,
//!                        │                  last[COUNTERS] (the flush's previous reading)
//!                        ├─ totals (mutex): everything flushed so far
//!                        └─ group: the group the owner belongs to
//! ```
//!
//! # Updating
//!
//! A thread with index `i` below [`SLOTS`] is the only writer of slot `i` of every tally (see
//! `sync::thread_index`), so it adds with a plain load and store; threads beyond share the
//! overflow slot and add atomically. Then it checks the slot's `on_list` flag and, the first
//! time since the slot was last flushed, links the slot into list `i` with a compare-exchange
//! (the push takes a strong reference to the tally, so a listed slot outlives its owner).
//! Nothing else on that path writes a line another thread writes, and nothing waits.
//!
//! # Flushing
//!
//! A flush, for each list: takes the whole chain with one swap, and walks it; then clears
//! `on_list` of every slot it took, issues one heavy fence, and only then reads each slot's
//! counts, takes the difference from `last`, and adds it to the owner's totals and to every
//! group above it. An updater never waits for a flush.
//!
//! [`Hub::flush_with`] hands each list's detach to a caller that wants to watch it (the
//! benchmark harness times it: `bench_door.rs`); [`Hub::flush`] just runs it.
//!
//! # Why no update is lost
//!
//! The updater does `store count; fence A; load on_list`; the flush does `store on_list =
//! false; fence B; load count`. With A and B both `SeqCst` fences, one of the loads sees the
//! other side's store: either the flush reads the new count, or the updater sees the flag
//! cleared and pushes the slot again, for the next flush. Fence A is on every update, so it is
//! made free: A is `sync/barrier.rs`'s light fence (a compiler fence once `membarrier` is
//! registered) and B its heavy one (the `membarrier` call, which interrupts each CPU running a
//! thread of this process, once per flush). The loom model
//! `loom_update_racing_a_flush_is_never_lost` checks the protocol with the symmetric fences.
//!
//! A slot whose flag was cleared may be pushed again while the flush still reads it; the
//! flush does not follow its `next` after clearing the flag, and `last` belongs to whoever
//! holds `flushing`. A chain is walked only by the flush that took it: no slot on it can be
//! pushed again before that flush clears its flag, so no `next` on it changes meanwhile.

use super::group::GroupNode;
use super::hist::{Buckets, Cells};
use super::totals::{Counter, Totals, COUNTERS};
use crate::alloc::{probe_arc, try_boxed_slice};
use crate::error::Error;
use crate::sync::{
    fence, rank, thread_index, AtomicBool, AtomicPtr, AtomicU64, Ordering, RankedMutex, UnsafeCell,
};
use crossbeam_utils::CachePadded;
use std::ptr;
use std::sync::{Arc, Weak};

/// Thread slots with a single writer; index `SLOTS` is the shared overflow slot.
#[cfg(not(loom))]
pub(crate) const SLOTS: usize = 64;
#[cfg(loom)]
pub(crate) const SLOTS: usize = 2;

/// The slot an update from thread index `i` goes to, and whether that slot has one writer.
#[inline]
fn slot_of(i: usize) -> (usize, bool) {
    if i < SLOTS {
        (i, true)
    } else {
        (SLOTS, false)
    }
}

/// One thread slot of one tally.
struct Slot {
    counts: [AtomicU64; COUNTERS],
    /// Lateness cells, allocated on the slot's first sample.
    late: AtomicPtr<Cells>,
    /// On its list (set by the push that lists it, cleared by a flush).
    on_list: AtomicBool,
    /// The next slot on the list: written by the push that lists the slot, before its
    /// publishing compare-exchange; read by the flush that detached the chain.
    next: AtomicPtr<Slot>,
    /// The tally this slot belongs to.
    tally: *const Tally,
    /// The counts the last flush read (under `Hub::flushing`).
    last: UnsafeCell<[u64; COUNTERS]>,
}

impl Slot {
    fn new(tally: *const Tally) -> Slot {
        Slot {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            late: AtomicPtr::new(ptr::null_mut()),
            on_list: AtomicBool::new(false),
            next: AtomicPtr::new(ptr::null_mut()),
            tally,
            last: UnsafeCell::new([0; COUNTERS]),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, nothing else can reach the slot.
        let late = self.late.load(Ordering::Relaxed);
        if !late.is_null() {
            // SAFETY: `late` is a `Box<Cells>` leaked by `Tally::late` and freed only here.
            drop(unsafe { Box::from_raw(late) });
        }
    }
}

/// An updated list: the slots of one thread index updated since the last flush. Lockless,
/// as the kernel's `llist`: a push links the slot in with a compare-exchange on `head`, a
/// flush takes the whole chain with one swap; neither waits for the other.
struct List {
    head: AtomicPtr<Slot>,
}

impl List {
    fn new() -> List {
        List {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Links `slot` in. The caller owns the slot's listing (it set `on_list`).
    fn push(&self, slot: &Slot) {
        let me = slot as *const Slot as *mut Slot;
        // Relaxed: a first guess; the compare-exchange decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release compare-exchange below.
            slot.next.store(head, Ordering::Relaxed);
            // Release: the `next` above (and the counts before the push) are visible to the
            // flush that takes the chain with Acquire; later pushes are compare-exchanges on
            // `head`, so they continue this release sequence.
            match self
                .head
                .compare_exchange_weak(head, me, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Takes the whole chain.
    fn take(&self) -> *const Slot {
        // Acquire: pairs with the Release of every push whose slot is on the chain.
        self.head.swap(ptr::null_mut(), Ordering::Acquire)
    }
}

/// How the two sides of the update/flush race are fenced (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fences {
    /// Updaters: a compiler fence; flush: `membarrier`.
    Asymmetric,
    /// `SeqCst` fences on both sides.
    Symmetric,
}

/// The statistics of one service: the updated lists and the flush.
pub(crate) struct Hub {
    pub(crate) enabled: bool,
    fences: Fences,
    lists: Box<[CachePadded<List>]>,
    /// One flush at a time; guards every slot's `last`. Nothing under it panics but an
    /// arithmetic or allocation failure that leaves `last` as consistent as a missed flush
    /// would, so a poisoned one is used as it is.
    flushing: RankedMutex<(), { rank::FLUSHING }>,
    pub(crate) root: Arc<GroupNode>,
    next_owner: AtomicU64,
    /// Every tally made here (weakly: owners are not kept alive), for the tree's members.
    /// Nothing under it panics (a push, a prune, a clone): a poisoned one is used as it is.
    members: RankedMutex<Vec<Weak<Tally>>, { rank::MEMBERS }>,
}

impl Hub {
    /// A hub; `enabled: false` makes every update a no-op.
    pub(crate) fn new(enabled: bool) -> Arc<Hub> {
        let fences = if crate::sync::barrier::asymmetric() {
            Fences::Asymmetric
        } else {
            Fences::Symmetric
        };
        Arc::new(Hub {
            enabled,
            fences,
            lists: (0..=SLOTS).map(|_| CachePadded::new(List::new())).collect(),
            flushing: RankedMutex::new(()),
            root: GroupNode::root(),
            next_owner: AtomicU64::new(1),
            members: RankedMutex::new(Vec::new()),
        })
    }

    /// The owners alive, each with its group.
    pub(crate) fn members(&self) -> Vec<Arc<Tally>> {
        self.members
            .lock_or_recover()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The next owner ID (from 1).
    pub(crate) fn next_owner_id(&self) -> u64 {
        // Relaxed: uniqueness comes from the atomic add.
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// Fence B of the flush side (module doc).
    fn fence_flush(&self) {
        match self.fences {
            Fences::Asymmetric => crate::sync::barrier::heavy(),
            Fences::Symmetric => fence(Ordering::SeqCst),
        }
    }

    /// Aggregates every update made before it started into owners' and groups' totals.
    pub(crate) fn flush(&self) {
        self.flush_with(|detach| {
            detach();
        })
    }

    /// [`Hub::flush`], handing each list's detach to `watch`, which must call it once: the
    /// detach is the one swap that takes the list's chain, and says whether it held a slot.
    pub(crate) fn flush_with(&self, mut watch: impl FnMut(&mut dyn FnMut() -> bool)) {
        let _one = self.flushing.lock_or_recover();
        let mut taken: Vec<*const Slot> = Vec::new();
        for list in self.lists.iter() {
            let mut head = ptr::null();
            watch(&mut || {
                head = list.take();
                !head.is_null()
            });
            collect(head, &mut taken);
        }
        self.settle(&taken);
    }

    /// Clears the flags of `slots`, fences, then aggregates each and drops its list's
    /// reference to its tally. The caller holds `flushing`.
    fn settle(&self, slots: &[*const Slot]) {
        if slots.is_empty() {
            return;
        }
        for &s in slots {
            // SAFETY: a detached slot is kept alive by the strong reference its push took.
            let slot = unsafe { &*s };
            // Relaxed: ordered by the fence below (module doc, "Why no update is lost").
            slot.on_list.store(false, Ordering::Relaxed);
        }
        self.fence_flush();
        for &s in slots {
            // SAFETY: as above; the reference is dropped only at the end of this iteration.
            let slot = unsafe { &*s };
            // SAFETY: `tally` outlives its slots.
            let tally = unsafe { &*slot.tally };
            let mut delta = [0u64; COUNTERS];
            slot.last.with_mut(|last| {
                // SAFETY: `last` is touched only by the holder of `flushing`, which we are.
                let last = unsafe { &mut *last };
                for (c, d) in delta.iter_mut().enumerate() {
                    // Relaxed: ordered by the fence above.
                    let now = slot.counts[c].load(Ordering::Relaxed);
                    *d = now.wrapping_sub(last[c]);
                    last[c] = now;
                }
            });
            // Acquire: pairs with the Release of the cells' installation (`Tally::late`).
            let late = slot.late.load(Ordering::Acquire);
            let mut buckets = None;
            if !late.is_null() {
                let mut b = Buckets::default();
                // SAFETY: installed cells live as long as their slot; we hold `flushing`.
                unsafe { (*late).drain_into(&mut b) };
                buckets = Some(b);
            }
            tally.absorb(&delta, buckets.as_ref());
            // SAFETY: the strong reference `Tally::push` took for this listing, given back once.
            unsafe { Arc::decrement_strong_count(slot.tally) };
        }
    }
}

impl Drop for Hub {
    /// Gives back the references the lists hold to their slots' tallies (the counts not yet
    /// flushed go with the service).
    fn drop(&mut self) {
        let mut taken = Vec::new();
        for list in self.lists.iter() {
            // `&mut self`: no push or flush runs.
            collect(list.take(), &mut taken);
        }
        for s in taken {
            // SAFETY: the listed slot's strong reference (`Tally::push`), given back once.
            unsafe { Arc::decrement_strong_count((*s).tally) };
        }
        self.root.release_children();
    }
}

/// Appends the chain from `head` to `out`. The caller detached it (`List::take`) before any
/// of its flags were cleared, so no `next` changes meanwhile.
fn collect(mut head: *const Slot, out: &mut Vec<*const Slot>) {
    while !head.is_null() {
        out.push(head);
        // SAFETY: a listed slot is alive (its push took a strong reference to its tally).
        // Relaxed: ordered by the Acquire swap that took the chain; `next` is written only by
        // a push, which needs the flag this flush has not cleared yet.
        head = unsafe { &*head }.next.load(Ordering::Relaxed);
    }
}

/// One owner's statistics.
pub(crate) struct Tally {
    /// Whether updates count at all (`Hub::enabled`, copied next to the slots).
    on: bool,
    key: u64,
    /// The hub's fence form, copied here for the update path.
    fences: Fences,
    /// Weak: a listed slot holds its tally strongly, and the hub holds the lists, so a strong
    /// reference back would keep a dropped service's hub alive (`Hub`'s `Drop`).
    hub: Weak<Hub>,
    pub(crate) group: Arc<GroupNode>,
    slots: Box<[AtomicPtr<CachePadded<Slot>>]>,
    /// Nothing under it panics (integer additions, a clone): a poisoned one is used as it is.
    totals: RankedMutex<Totals, { rank::TOTALS }>,
}

// SAFETY: slots are shared only through atomics and the locks the module doc names.
unsafe impl Send for Tally {}
// SAFETY: as above.
unsafe impl Sync for Tally {}

impl Tally {
    /// A tally for owner `key` in `group` (listed in the hub's members, for the tree).
    #[cfg_attr(not(loom), allow(dead_code))] // the loom models'; the service's is `try_new`
    pub(crate) fn new(hub: &Arc<Hub>, group: &Arc<GroupNode>, key: u64) -> Arc<Tally> {
        Tally::try_new(hub, group, key).expect("memory for a tally")
    }

    /// [`Tally::new`], or [`Error::OutOfMemory`] (nothing listed) if its memory cannot be
    /// allocated.
    pub(crate) fn try_new(
        hub: &Arc<Hub>,
        group: &Arc<GroupNode>,
        key: u64,
    ) -> Result<Arc<Tally>, Error> {
        let mut members = hub.members.lock_or_recover();
        if members.len() == members.capacity() {
            members.retain(|o| o.strong_count() > 0);
            members.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        }
        let tally = Tally::try_unlisted(hub, group, key)?;
        members.push(Arc::downgrade(&tally));
        drop(members);
        Ok(tally)
    }

    /// A tally in no member list: an owner made in a forked child of a service built before
    /// the fork, whose lists' locks may be held for ever (`timers/mod.rs`, "Fork").
    /// [`Error::OutOfMemory`] if its memory cannot be allocated (its slot table fallibly, the
    /// `Arc` after [`probe_arc`] checked its block).
    pub(crate) fn try_unlisted(
        hub: &Arc<Hub>,
        group: &Arc<GroupNode>,
        key: u64,
    ) -> Result<Arc<Tally>, Error> {
        let slots = try_boxed_slice(SLOTS + 1, || AtomicPtr::new(ptr::null_mut()))?;
        probe_arc::<Tally>()?;
        let tally = Arc::new(Tally {
            on: hub.enabled,
            key,
            fences: hub.fences,
            hub: Arc::downgrade(hub),
            group: group.clone(),
            slots,
            totals: RankedMutex::new(Totals::default()),
        });
        // The shared overflow slot now, so that `add_without_allocating` has a slot to count
        // in whatever thread calls it (left to first use if there is no memory for it now).
        if tally.on {
            let _ = tally.new_slot(SLOTS);
        }
        Ok(tally)
    }

    /// The owner's key.
    pub(crate) fn key(&self) -> u64 {
        self.key
    }

    /// Adds `n` to counter `c` for the calling thread.
    #[inline]
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if self.on {
            self.add_as(thread_index(), c, n);
        }
    }

    /// `add`, for a call a signal handler may make (`settime`): counts in the calling
    /// thread's slot if it has one, else in the shared overflow slot (made with the tally),
    /// and allocates nothing: a thread's first count in a tally would otherwise allocate its
    /// slot there, in the handler. A thread that only ever makes such calls on an owner counts
    /// with the overflow slot's atomic add.
    #[inline]
    pub(crate) fn add_without_allocating(&self, c: Counter, n: u64) {
        if !self.on {
            return;
        }
        let (i, single) = slot_of(thread_index());
        let found = match self.installed(i) {
            Some(slot) => Some((slot, i, single)),
            None => self
                .installed(SLOTS)
                .map(|overflow| (overflow, SLOTS, false)),
        };
        if let Some(found) = found {
            self.count_in(found, c, n);
        }
    }

    /// `add` for thread index `i`.
    #[inline]
    pub(crate) fn add_as(&self, i: usize, c: Counter, n: u64) {
        let (i, single) = slot_of(i);
        if let Some(found) = self.slot(i, single) {
            self.count_in(found, c, n);
        }
    }

    /// Adds `n` to counter `c` in a slot found by `slot` or `installed` (with its index and
    /// whether the caller is its only writer), and lists the slot for the next flush.
    #[inline]
    fn count_in(&self, (slot, i, single): (&Slot, usize, bool), c: Counter, n: u64) {
        bump(&slot.counts[c as usize], n, single);
        self.mark(slot, i);
    }

    /// Counts an expiration `late_ns` after its expiry, for the calling thread: the
    /// `Expired` counter and the lateness histogram, one slot lookup and one mark.
    #[inline]
    pub(crate) fn expired(&self, late_ns: u64) {
        if !self.on {
            return;
        }
        let (i, single) = slot_of(thread_index());
        let Some((slot, i, single)) = self.slot(i, single) else {
            return;
        };
        bump(&slot.counts[Counter::Expired as usize], 1, single);
        // Acquire: pairs with the Release of the installation below.
        let mut cells = slot.late.load(Ordering::Acquire);
        if cells.is_null() {
            cells = install_cells(&slot.late);
        }
        // A sample that finds no memory for the slot's histogram is not recorded (the
        // expiration is counted): the `timers` module doc, "Memory".
        if !cells.is_null() {
            // SAFETY: installed cells live as long as their slot.
            unsafe { &*cells }.record(late_ns, single);
        }
        self.mark(slot, i);
    }

    /// Counts an event handed to the application with `overrun`, for the calling thread:
    /// `Delivered` and `Overruns`, one slot lookup and one mark.
    #[inline]
    pub(crate) fn delivered(&self, overrun: i32) {
        if !self.on {
            return;
        }
        let (i, single) = slot_of(thread_index());
        let Some((slot, i, single)) = self.slot(i, single) else {
            return;
        };
        bump(&slot.counts[Counter::Delivered as usize], 1, single);
        if overrun > 0 {
            bump(
                &slot.counts[Counter::Overruns as usize],
                overrun as u64,
                single,
            );
        }
        self.mark(slot, i);
    }

    /// Pushes `slot` on list `i` if this is its first update since it was flushed.
    #[inline]
    fn mark(&self, slot: &Slot, i: usize) {
        crate::sync::barrier::light_as(self.fences == Fences::Asymmetric);
        // Relaxed: ordered by the fences (module doc).
        if !slot.on_list.load(Ordering::Relaxed) {
            self.push(slot, i);
        }
    }

    #[cold]
    fn push(&self, slot: &Slot, i: usize) {
        // The service is gone: nobody flushes any more.
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        // Relaxed: the flag only says who lists the slot (the overflow slot has several
        // writers); the list's compare-exchange publishes.
        if slot.on_list.swap(true, Ordering::Relaxed) {
            return; // another overflow writer listed it
        }
        // SAFETY: every tally lives in an `Arc` (`Tally::new`); the list keeps this strong
        // reference until a flush settles the slot.
        unsafe { Arc::increment_strong_count(self as *const Tally) };
        hub.lists[i].push(slot);
    }

    /// Slot `i` (`single`: the caller is its only writer), allocated on first use, with its
    /// index and whether the caller is its only writer. If slot `i` cannot be allocated, the
    /// shared overflow slot (allocated the same way); `None`, and the count is not made, if
    /// neither can be (the `timers` module doc, "Memory").
    #[inline]
    fn slot(&self, i: usize, single: bool) -> Option<(&Slot, usize, bool)> {
        if let Some(slot) = self.installed(i) {
            return Some((slot, i, single));
        }
        match self.new_slot(i) {
            Some(slot) => Some((slot, i, single)),
            None => self
                .new_slot(SLOTS)
                .map(|overflow| (overflow, SLOTS, false)),
        }
    }

    /// Slot `i` if it is installed; never allocates.
    #[inline]
    fn installed(&self, i: usize) -> Option<&Slot> {
        // Acquire: pairs with the Release of the installing compare-exchange.
        let p = self.slots[i].load(Ordering::Acquire);
        // SAFETY: installed slots are freed only when the tally is dropped.
        (!p.is_null()).then(|| &**unsafe { &*p })
    }

    /// Slot `i`, installed now if no other thread did first; `None` if it cannot be
    /// allocated.
    #[cold]
    fn new_slot(&self, i: usize) -> Option<&Slot> {
        if let Some(slot) = self.installed(i) {
            return Some(slot);
        }
        let fresh = CachePadded::new(Slot::new(self as *const Tally));
        let fresh = Box::into_raw(crate::alloc::try_box(fresh).ok()?);
        // AcqRel: publishes the slot (Release); sees a winner's (Acquire).
        match self.slots[i].compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: installed; freed only when the tally is dropped.
            Ok(_) => Some(unsafe { &*fresh }),
            Err(winner) => {
                // SAFETY: `fresh` was never shared; `winner` is installed.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above.
                Some(unsafe { &*winner })
            }
        }
    }

    /// Adds flushed deltas to the owner's totals and to each group above it.
    fn absorb(&self, delta: &[u64; COUNTERS], late: Option<&Buckets>) {
        if delta.iter().all(|&d| d == 0) && late.is_none_or(|b| b.total() == 0) {
            return;
        }
        self.totals.lock_or_recover().add(delta, late);
        let mut g = Some(&self.group);
        while let Some(group) = g {
            group.absorb(delta, late);
            g = group.parent.as_ref();
        }
    }

    /// The flushed totals (flush first for current ones).
    pub(crate) fn totals(&self) -> Totals {
        self.totals.lock_or_recover().clone()
    }
}

/// Adds `n` to a slot's counter; `single`: the caller is the slot's only writer.
#[inline]
fn bump(cell: &AtomicU64, n: u64, single: bool) {
    if single {
        // Relaxed: this thread is the slot's only writer (module doc); the flush reads after
        // its fence.
        cell.store(
            cell.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    } else {
        // Relaxed: as above, with other overflow writers.
        cell.fetch_add(n, Ordering::Relaxed);
    }
}

#[cold]
/// The installed cells (null if none are and none can be allocated).
fn install_cells(at: &AtomicPtr<Cells>) -> *mut Cells {
    let Some(fresh) = Cells::try_new() else {
        return ptr::null_mut();
    };
    let fresh = Box::into_raw(fresh);
    // AcqRel: publishes the cells (Release); sees a winner's (Acquire).
    match at.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: `fresh` was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            winner
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        // No slot is listed (a listed slot holds a strong reference), so every update was
        // flushed into the totals and the groups'.
        for p in self.slots.iter() {
            // Relaxed: `&mut self`, nothing else can reach the tally.
            let p = p.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: installed by `new_slot`, freed once, here.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}
