//! The hash table of all owners' timers: 32-byte buckets, each a bit lock, a chain and three shortcuts.
//!
//! A bucket's `head` word holds the chain's first timer pointer, or a *nulls marker* when the
//! chain is empty; bit 0 is the bucket's lock. Timer objects are 64-byte aligned, so a pointer's
//! low six bits are free:
//!
//! ```text
//!  head / hash_next word
//!  ┌──────────────────────────────────────────────┬──┬──┐
//!  │ timer pointer (64-byte aligned)              │ 0│ L│   L = LOCKED (heads only)
//!  ├────────────────────────────┬─────────────────┼──┼──┤
//!  │ bucket index               │ table bits (6)  │ 1│ 0│   nulls marker: end of chain
//!  └────────────────────────────┴─────────────────┴──┴──┘
//!  0 (in a head)  = empty chain, read as nulls(this table, this bucket)
//!  MOVED          = all ones but bit 0: the bucket was split into the next table
//! ```
//!
//! Every chain ends in the nulls marker of its own (table, bucket). A lock-free walker that
//! reaches the end of a chain compares the marker with the one it expects: a different marker
//! means it was carried into another chain (the timer it stood on was deleted and re-created
//! elsewhere, or moved by a resize) and it restarts. This is the kernel's `hlist_nulls`
//! technique for type-stable (`SLAB_TYPESAFE_BY_RCU`) objects.
//!
//! # Growth
//!
//! Bucket index = `hash & mask`. A table grows by doubling: each of its buckets is split in
//! turn into a `future` table of twice the size, and a split bucket's head reads `MOVED`
//! (`table/growth.rs`, which holds the split and argues the order of its stores). A walker
//! follows `future` through `MOVED` buckets and misses ([`find`]).

pub(crate) mod growth;

use super::timer::{Service, Timer};
use crate::sync::{backoff, rank, AtomicPtr, AtomicUsize, Ordering, RankToken};

/// Bucket head bit 0: the bucket's lock.
pub(crate) const LOCKED: usize = 1;
/// Bit 1 of a chain word: this is a nulls marker, not a pointer.
pub(crate) const NULLS: usize = 2;
/// Head of a bucket that has been split into the next table. Its table-bits field (63) is
/// larger than any table's, so it never equals a real nulls marker.
pub(crate) const MOVED: usize = !LOCKED;
/// Largest table: 2^MAX_BITS buckets (a nulls marker stores the index above 8 bits).
pub(crate) const MAX_BITS: u32 = 40;
/// Blocks of memory at least this large are given back to the kernel in steps
/// (`Buckets::release_pages`) and, when freed by a deferred function, on a thread of their own
/// (`drop_deferred`).
pub(crate) const LARGE_FREE_BYTES: usize = 16 << 20;

/// `2^RUN_BITS` consecutive timer IDs of one owner land in consecutive buckets (see
/// [`hash`]): 256 IDs, an 8 KiB stretch of buckets. Runs of 16 (512 bytes) would leave a
/// sweep over a million IDs with a fresh random stretch every 16 lookups, most of whose lines
/// miss before the hardware prefetcher catches the stream (BENCHMARKS.md, "Design
/// measurements").
pub(crate) const RUN_BITS: u32 = 8;

/// The nulls marker ending chain `idx` of a table of `2^bits` buckets.
#[inline]
pub(crate) fn nulls(bits: u32, idx: usize) -> usize {
    (idx << 8) | ((bits as usize) << 2) | NULLS
}

/// The splitmix64 finalizer (Steele, Lea and Flood): two multiply-xorshift rounds after
/// which every input bit affects every output bit with probability close to 1/2.
#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The *run-linear keyed hash* of (owner key, timer ID).
///
/// The owner key (spread by a multiply with the golden-ratio constant), the ID's run number
/// (`id >> RUN_BITS`) and the registry's random salt are combined and put through the
/// [`splitmix64`] finalizer; the ID's low `RUN_BITS` bits are then *added*. So the 256
/// consecutive IDs of a run fall into 256 consecutive buckets from a random start (an 8 KiB
/// stretch of the table: a sweep over an owner's IDs in order, such as creating, setting or
/// reading its timers in ID order, or a restore, walks the table sequentially and the
/// hardware prefetcher hides the misses), while distinct runs, owners and strides (IDs 512
/// apart, say) scatter uniformly. In a table of at least 256 buckets each bucket gets at most one ID of a
/// run, so the chain lengths are those of a random hash; lookups in random order gain
/// nothing from the runs. A smaller table (only by [`Builder::initial_buckets`]: the default
/// is 512 per CPU) is wrapped by a run, so IDs of one run spaced by the table's size share a
/// bucket (at most 256 / size of them) until the table grows past 2 timers per bucket.
/// The salt is drawn per registry, so a caller who picks IDs
/// (exact-ID mode) cannot aim them at one bucket.
///
/// [`Builder::initial_buckets`]: crate::timers::Builder::initial_buckets
#[inline]
pub(crate) fn hash(salt: [u64; 2], owner_key: u64, id: i32) -> u64 {
    hash_seeded(owner_seed(salt, owner_key), id)
}

/// The part of [`hash`] that depends on the owner alone, for [`hash_seeded`]: an owner keeps
/// it beside its key, so a by-ID call's hash starts from one load of the owner's own line
/// instead of a multiply after loads of the owner key and of the registry's salt.
#[inline]
pub(crate) fn owner_seed(salt: [u64; 2], owner_key: u64) -> [u64; 2] {
    [
        owner_key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt[0],
        salt[1],
    ]
}

/// [`hash`] of an ID of the owner whose [`owner_seed`] is `seed`.
#[inline]
pub(crate) fn hash_seeded(seed: [u64; 2], id: i32) -> u64 {
    let id = u64::from(id as u32);
    let run = splitmix64(seed[0] ^ (id >> RUN_BITS).wrapping_add(seed[1]));
    // Added, not appended: appending would confine IDs with a stride that is a multiple of
    // 2^RUN_BITS (all with the same low bits) to one bucket in 2^RUN_BITS.
    run.wrapping_add(id & ((1 << RUN_BITS) - 1))
}

/// Shortcut entries per bucket (see [`Bucket::near`]).
pub(crate) const NEAR: usize = 3;

/// One bucket, half a cache line (two share a line):
///
/// ```text
///  0  head     lock bit + first chain word
///  8  near[3]  recent chain members, each one word:
///              ┌──────────────────┬──────────────────────────────────────┬────────┐
///              │ tag: hash >> 48  │ timer pointer (64-byte aligned)      │ 0      │
///              └──────────────────┴──────────────────────────────────────┴────────┘
///               63             48  47                                  6  5      0
///  0 = empty entry
/// ```
///
/// `near` holds the most recently linked members of the chain with a 16-bit tag of their hash
/// each, so a lookup usually finds its timer from the bucket alone instead of reading every
/// newer timer ahead of it in the chain (at millions of timers each such read is a cache miss;
/// BENCHMARKS.md, "Design measurements"). It is only a hint: written under the bucket lock,
/// read without it, possibly stale (tag and pointer are one word, so never torn), and every
/// hit is validated on the timer itself (`Timer::is`); "not found" is only ever decided by
/// walking the chain. A timer whose address does not fit 48 bits is simply not recorded.
///
/// Half a line, not a whole one: the table's share of an armed timer's bytes is a bucket per
/// `max_load` timers (and up to twice that just after a doubling): 16-32 bytes at the default
/// load of 2, against 32-64 with a line per bucket. The chain length is not kept: growth is
/// checked from the registry's count (`Tables::maybe_grow`).
#[derive(Debug, Default)]
#[repr(C, align(32))]
pub(crate) struct Bucket {
    pub(crate) head: AtomicUsize,
    pub(crate) near: [AtomicUsize; NEAR],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 32);

/// Bits of a `near` word below the tag: the pointer's.
const NEAR_PTR_BITS: u32 = 48;
const NEAR_PTR_MASK: usize = (1 << NEAR_PTR_BITS) - 1;

/// The `near` tag of a hash: its top 16 bits (the bucket index comes from its low bits).
#[inline]
pub(crate) fn tag(hash: u64) -> usize {
    (hash >> NEAR_PTR_BITS) as usize
}

/// The `near` word for `timer` with tag `tag`, or `None` if its address does not fit.
#[inline]
pub(crate) fn near_word(tag: usize, timer: usize) -> Option<usize> {
    (timer & !NEAR_PTR_MASK == 0).then_some(timer | tag << NEAR_PTR_BITS)
}

/// The timer a `near` word names if its tag is `tag` (0 for an empty entry or another tag).
#[inline]
pub(crate) fn near_match(word: usize, tag: usize) -> usize {
    if word >> NEAR_PTR_BITS == tag {
        word & NEAR_PTR_MASK
    } else {
        0
    }
}

impl Bucket {
    /// Locks the bucket (rank BUCKET of `sync::rank`), or returns `None` if it was split
    /// (`MOVED`): the caller goes to the future table.
    #[inline]
    pub(crate) fn lock(&self) -> Option<BucketGuard<'_>> {
        self.lock_ranked(RankToken::enter())
    }

    /// Locks the bucket while the caller holds `outer`'s: a table split's future buckets,
    /// under the old bucket (the one case of two locks of one rank). `None` as in `lock`.
    #[inline]
    pub(crate) fn lock_nested(&self, outer: &BucketGuard<'_>) -> Option<BucketGuard<'_>> {
        self.lock_ranked(RankToken::nested(&outer.rank))
    }

    #[inline]
    fn lock_ranked(&self, rank: RankToken<{ rank::BUCKET }>) -> Option<BucketGuard<'_>> {
        let mut spins = 0;
        loop {
            // Relaxed: a hint; the compare-exchange is the synchronising access.
            let h = self.head.load(Ordering::Relaxed);
            if h == MOVED {
                // Acquire: pairs with the Release store of MOVED in `split_bucket`, so the
                // future table's new chains are visible to this writer.
                let _ = self.head.load(Ordering::Acquire);
                return None;
            }
            if h & LOCKED == 0 {
                // Acquire: pairs with the Release store of the previous holder's unlock.
                if self
                    .head
                    .compare_exchange_weak(h, h | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(BucketGuard {
                        bucket: self,
                        head: h,
                        rank,
                    });
                }
                continue;
            }
            backoff(&mut spins);
        }
    }

    /// With the lock held: records `timer` (hash tag `tag`), just linked at the chain's head,
    /// as the newest near entry, dropping the oldest.
    #[inline]
    pub(crate) fn near_push(&self, tag: usize, timer: usize) {
        let Some(word) = near_word(tag, timer) else {
            return;
        };
        for i in (1..NEAR).rev() {
            // Relaxed (all): a hint validated on the timer; the lock orders writers.
            self.near[i].store(self.near[i - 1].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.near[0].store(word, Ordering::Relaxed);
    }

    /// With the lock held: forgets `timer` if it is a near entry (it left the chain).
    #[inline]
    pub(crate) fn near_remove(&self, timer: usize) {
        for i in 0..NEAR {
            if self.near[i].load(Ordering::Relaxed) & NEAR_PTR_MASK == timer {
                self.near[i].store(0, Ordering::Relaxed);
            }
        }
    }

    /// With the lock held: forgets every near entry (the chain moved away).
    pub(crate) fn near_clear(&self) {
        for i in 0..NEAR {
            self.near[i].store(0, Ordering::Relaxed);
        }
    }
}

/// A held bucket lock: the bucket, and its head word as the lock found it (lock bit clear).
/// [`BucketGuard::unlock`] releases it, publishing the new head. The bucket lock has no
/// poisoned state (the registry's module doc, "Locking"): a guard dropped without `unlock`,
/// which only unwinding out of a broken chain invariant does, leaves the bucket locked (its
/// rank mark is cleared).
#[must_use]
pub(crate) struct BucketGuard<'a> {
    bucket: &'a Bucket,
    head: usize,
    rank: RankToken<{ rank::BUCKET }>,
}

impl<'a> BucketGuard<'a> {
    /// The chain's first word when the lock was taken (0 for an empty bucket).
    #[inline]
    pub(crate) fn head(&self) -> usize {
        self.head
    }

    /// The locked bucket.
    #[inline]
    pub(crate) fn bucket(&self) -> &'a Bucket {
        self.bucket
    }

    /// Unlocks the bucket, publishing `head` as the chain's first word (`MOVED` for a split
    /// bucket).
    #[inline]
    pub(crate) fn unlock(self, head: usize) {
        debug_assert_eq!(head & LOCKED, 0);
        // Release: publishes the chain changes (and a new timer's fields) made under the lock;
        // pairs with the Acquire loads of walkers and the next locker.
        self.bucket.head.store(head, Ordering::Release);
    }
}

/// One generation of the hash table.
pub(crate) struct Table {
    pub(crate) buckets: Buckets,
    pub(crate) bits: u32,
    pub(crate) mask: usize,
    /// The hash salt (every table generation of a registry uses the same).
    pub(crate) salt: [u64; 2],
    /// The table this one is being split into, or null. Set once, never cleared.
    pub(crate) future: AtomicPtr<Table>,
    /// Next old bucket to split (claimed in `MIGRATE_BATCH` steps) and buckets split so far.
    pub(crate) claimed: crossbeam_utils::CachePadded<AtomicUsize>,
    pub(crate) split: crossbeam_utils::CachePadded<AtomicUsize>,
}

/// Where a walk found a timer.
pub(crate) enum Walk<'a, S: Service> {
    Found(&'a Timer<S>),
    /// Not in this table's chain; `future` holds it if anything does.
    Absent,
    /// The walk was carried into a foreign chain: start again.
    Restart,
    /// The bucket was split: continue in `future`.
    Moved,
}

impl Table {
    /// An empty table of `2^bits` buckets (the tests' tables).
    #[cfg(test)]
    pub(crate) fn new(bits: u32, salt: [u64; 2]) -> Table {
        Table::try_new(bits, salt).expect("the registry's first table")
    }

    /// An empty table of `2^bits` buckets; `None` if the buckets cannot be allocated.
    pub(crate) fn try_new(bits: u32, salt: [u64; 2]) -> Option<Table> {
        let len = 1usize << bits;
        Some(Table {
            buckets: new_buckets(len)?,
            bits,
            mask: len - 1,
            salt,
            future: AtomicPtr::new(std::ptr::null_mut()),
            claimed: Default::default(),
            split: Default::default(),
        })
    }

    #[inline]
    pub(crate) fn index(&self, hash: u64) -> usize {
        hash as usize & self.mask
    }

    /// The first chain word of bucket `idx` as a walker sees it (empty reads as its marker).
    #[inline]
    fn first(&self, idx: usize) -> usize {
        // Acquire: pairs with the Release in `Bucket::unlock` / `split_bucket`, so the fields
        // of the first timer are visible.
        let h = self.buckets[idx].head.load(Ordering::Acquire) & !LOCKED;
        if h == 0 {
            nulls(self.bits, idx)
        } else {
            h
        }
    }

    /// Starts loading the bucket of `hash`: a hint (`Exclusive::prefetch`).
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        crate::sync::prefetch(&self.buckets[self.index(hash)] as *const Bucket as usize);
    }

    /// Walks the chain of `hash` looking for the visible timer (owner, id), without locks.
    ///
    /// A `Found` timer matched when it was read; the caller must re-check under the timer's
    /// lock (it may have been deleted and reused since).
    #[inline]
    pub(crate) fn walk<S: Service>(&self, hash: u64, owner_word: u64, id: i32) -> Walk<'_, S> {
        let idx = self.index(hash);
        let mut p = self.first(idx);
        if p == MOVED {
            return Walk::Moved;
        }
        let b = &self.buckets[idx];
        let tag = tag(hash);
        for i in 0..NEAR {
            let n = near_match(b.near[i].load(Ordering::Relaxed), tag);
            if n != 0 {
                // SAFETY: as for chain pointers below: `near` only ever holds pointers to
                // timers in slot pages.
                let t = unsafe { &*(n as *const Timer<S>) };
                if t.is(owner_word, id) {
                    return Walk::Found(t);
                }
            }
        }
        while p & NULLS == 0 {
            // SAFETY: `p` came from a bucket head or a `hash_next` word, which only ever hold
            // pointers to `Timer`s in slot pages. Slot pages are never freed while their
            // registry exists (a deleted owner's pages are pooled for reuse, after an epoch
            // grace period), and the caller holds a handle to the registry (or, in loom tests,
            // the timers outlive the model).
            let t = unsafe { &*(p as *const Timer<S>) };
            // Acquire: pairs with the Release store that made the timer visible at create.
            if t.hot.owner.load(Ordering::Acquire) == owner_word
                && t.hot.id.load(Ordering::Relaxed) == id
            {
                return Walk::Found(t);
            }
            // Acquire: pairs with the Release stores of links in insert/unlink/split.
            p = t.hot.hash_next.load(Ordering::Acquire);
        }
        if p == nulls(self.bits, idx) {
            Walk::Absent
        } else {
            Walk::Restart
        }
    }

    /// The table this one is being split into, if a resize is in progress.
    ///
    /// A future table becomes current before its predecessor is retired and is itself retired
    /// only after that (through the registry's epoch), so it lives at least as long as `self`
    /// is reachable by the caller.
    #[inline]
    pub(crate) fn future(&self) -> Option<&Table> {
        // Acquire: pairs with the Release compare-exchange that attached it (`maybe_grow`).
        let f = self.future.load(Ordering::Acquire);
        // SAFETY: see above; `f` came from `Box::into_raw` and is freed only after it stops
        // being reachable from the current table and every pinned walker has left.
        (!f.is_null()).then(|| unsafe { &*f })
    }

    /// Walks a *locked* chain starting at `head` for any timer holding (owner, id), visible or
    /// pending: the ID is taken either way (the kernel masks bit 0 for its collision check).
    pub(crate) fn taken<S: Service>(&self, head: usize, owner_key: u64, id: i32) -> bool {
        let mut p = head;
        while p != 0 && p & NULLS == 0 {
            // SAFETY: the bucket lock is held, so the chain is stable and every pointer in it is
            // a hashed, live timer.
            let t = unsafe { &*(p as *const Timer<S>) };
            if t.hot.owner.load(Ordering::Relaxed) >> 1 == owner_key
                && t.hot.id.load(Ordering::Relaxed) == id
            {
                return true;
            }
            p = t.hot.hash_next.load(Ordering::Relaxed);
        }
        false
    }

    /// Links `timer` at the head of bucket `idx`, locked by `locked`, and unlocks it.
    pub(crate) fn link_and_unlock<S: Service>(
        &self,
        idx: usize,
        locked: BucketGuard<'_>,
        timer: &Timer<S>,
        hash: u64,
    ) {
        debug_assert!(std::ptr::eq(locked.bucket(), &self.buckets[idx]));
        let head = locked.head();
        let next = if head == 0 {
            nulls(self.bits, idx)
        } else {
            head
        };
        // Relaxed: published by the Release unlock below.
        timer.hot.hash_next.store(next, Ordering::Relaxed);
        let ptr = timer as *const Timer<S> as usize;
        locked.bucket().near_push(tag(hash), ptr);
        locked.unlock(ptr);
    }

    /// Removes `timer` from bucket `idx`, locked by `locked`, and unlocks it. Returns false
    /// (and changes nothing) if the timer is not in the chain.
    pub(crate) fn unlink_and_unlock<S: Service>(
        &self,
        idx: usize,
        locked: BucketGuard<'_>,
        timer: &Timer<S>,
    ) -> bool {
        debug_assert!(std::ptr::eq(locked.bucket(), &self.buckets[idx]));
        let head = locked.head();
        let target = timer as *const Timer<S> as usize;
        let b = locked.bucket();
        // Relaxed: we hold the bucket lock, which orders every write to this chain.
        let next = timer.hot.hash_next.load(Ordering::Relaxed);
        let mut found = false;
        let mut new_head = head;
        if head == target {
            new_head = next;
            found = true;
        } else {
            let mut p = head;
            while p != 0 && p & NULLS == 0 {
                // SAFETY: the bucket lock is held; every pointer in the chain is a live timer.
                let t = unsafe { &*(p as *const Timer<S>) };
                let n = t.hot.hash_next.load(Ordering::Relaxed);
                if n == target {
                    // Release: a walker that reads the new link sees a consistent successor.
                    // The unlinked timer keeps its own `hash_next`, so a walker standing on it
                    // continues along the chain.
                    t.hot.hash_next.store(next, Ordering::Release);
                    found = true;
                    break;
                }
                p = n;
            }
        }
        if found {
            b.near_remove(target);
        }
        locked.unlock(new_head);
        found
    }
}

/// The lock-free lookup of the visible timer (owner, id) with hash `hash`, starting (and
/// restarting) from the table `current` returns and following `future` tables through split
/// buckets and misses. A found timer matched when it was read: re-check it under its lock.
#[inline(always)]
pub(crate) fn find<'a, S: Service>(
    current: impl Fn() -> &'a Table,
    hash: u64,
    owner_word: u64,
    id: i32,
) -> Option<&'a Timer<S>> {
    let mut spins = 0;
    'restart: loop {
        let mut t = current();
        loop {
            match t.walk(hash, owner_word, id) {
                Walk::Found(timer) => return Some(timer),
                Walk::Restart => {
                    // The chain changed under the walk (a split in progress, or the timer we
                    // stood on re-created elsewhere): let the writer finish.
                    backoff(&mut spins);
                    continue 'restart;
                }
                Walk::Absent | Walk::Moved => match t.future() {
                    Some(f) => t = f,
                    None => return None,
                },
            }
        }
    }
}

/// Drops a retired table (`value`, which owns about `bytes` of memory) from a deferred
/// function: once no by-ID walk may stand on it (such a walk takes no pin, `sync/pin.rs`;
/// while one is open the drop moves to a thread of its own that waits it out: if no thread
/// can be started, the value is leaked rather than freed under the walk), as [`drop_large`].
pub(crate) fn drop_deferred<T: Send + 'static>(value: T, bytes: usize) {
    if let Err(open) = crate::sync::walks_done() {
        let value = std::mem::ManuallyDrop::new(value);
        drop(crate::sync::spawn_blocking_signals(
            "tempora-free".into(),
            move || {
                open.wait();
                drop(std::mem::ManuallyDrop::into_inner(value));
            },
        ));
        return;
    }
    drop_large(value, bytes);
}

/// Drops `value`, which owns about `bytes` of memory, from a deferred function, where no walk
/// can reach it. A large value is dropped on a thread of its own: returning hundreds of MiB to
/// the kernel takes milliseconds, which would otherwise land inside whichever unrelated create
/// or delete happened to run the epoch's deferred functions.
pub(crate) fn drop_large<T: Send + 'static>(value: T, bytes: usize) {
    if bytes >= LARGE_FREE_BYTES {
        // If no thread can be started, `spawn` drops the closure: the value is freed here.
        drop(crate::sync::spawn_blocking_signals(
            "tempora-free".into(),
            move || drop(value),
        ));
    }
}

/// A table's bucket array.
#[cfg(loom)]
pub(crate) type Buckets = Box<[Bucket]>;

#[cfg(loom)]
fn new_buckets(len: usize) -> Option<Buckets> {
    crate::alloc::try_boxed_slice(len, Bucket::default).ok()
}

/// A table's bucket array: zeroed memory from the global allocator, aligned by hand to a
/// bucket's alignment (32 bytes).
///
/// Why by hand: asking the allocator for more than 16-byte alignment makes Rust's system allocator use
/// `posix_memalign` and then write the zeroes itself, touching every page of the table at
/// once (BENCHMARKS.md, "Design measurements"). With
/// 16-byte alignment the request becomes `calloc`, which for a large block maps fresh
/// zero pages from the kernel and writes nothing, so a new table costs nothing until the
/// incremental split touches its buckets, spread over many creates.
#[cfg(not(loom))]
pub(crate) struct Buckets {
    raw: std::ptr::NonNull<u8>,
    first: std::ptr::NonNull<Bucket>,
    len: usize,
}

// SAFETY: `Buckets` owns its memory like a `Box<[Bucket]>`, and `Bucket` (atomics only) is
// `Send` and `Sync`.
#[cfg(not(loom))]
unsafe impl Send for Buckets {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for Buckets {}

#[cfg(not(loom))]
impl Buckets {
    fn layout(len: usize) -> std::alloc::Layout {
        let bytes = len
            .checked_mul(std::mem::size_of::<Bucket>())
            .and_then(|b| b.checked_add(std::mem::align_of::<Bucket>()))
            .expect("table size");
        std::alloc::Layout::from_size_align(bytes, 16).expect("table layout")
    }
}

#[cfg(not(loom))]
impl Buckets {
    /// Returns the bucket memory's pages to the kernel, 2 MiB at a time, without unmapping
    /// them (each `MADV_DONTNEED` call holds the memory-map lock only for reading, so other
    /// threads' page faults go on). The buckets read as zero afterwards, which is still a
    /// valid (empty) bucket array; `drop` frees it next. Without this, the one `munmap` of a
    /// large table held the memory-map lock for writing while it freed every page, and every
    /// page fault of every other thread waited (BENCHMARKS.md, "Design measurements").
    fn release_pages(&self) {
        const STEP: usize = 2 << 20;
        const PAGE: usize = 4096;
        let start = (self.raw.as_ptr() as usize).next_multiple_of(PAGE);
        let end = (self.raw.as_ptr() as usize + Buckets::layout(self.len).size()) & !(PAGE - 1);
        let mut at = start;
        while at < end {
            let len = STEP.min(end - at);
            // SAFETY: [at, at + len) is page-aligned and inside this allocation, which nothing
            // else uses any more (the table is retired); MADV_DONTNEED on private anonymous
            // memory makes it read back as zeroes, a valid empty bucket.
            unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_DONTNEED) };
            at += len;
        }
    }
}

#[cfg(not(loom))]
impl std::ops::Deref for Buckets {
    type Target = [Bucket];
    fn deref(&self) -> &[Bucket] {
        // SAFETY: `first` points to `len` zero-initialised buckets inside the allocation,
        // which lives as long as `self`; all-zero is a valid `Bucket` (see `new_buckets`).
        unsafe { std::slice::from_raw_parts(self.first.as_ptr(), self.len) }
    }
}

#[cfg(not(loom))]
impl Drop for Buckets {
    fn drop(&mut self) {
        if std::mem::size_of_val::<[Bucket]>(self) >= LARGE_FREE_BYTES {
            self.release_pages();
        }
        // SAFETY: `raw` was allocated in `new_buckets` with exactly this layout.
        unsafe { std::alloc::dealloc(self.raw.as_ptr(), Buckets::layout(self.len)) };
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("buckets", &self.buckets.len())
            .field("bits", &self.bits)
            .finish()
    }
}

/// `len` empty buckets (see [`Buckets`]); `None` if the allocator has no memory for them.
#[cfg(not(loom))]
fn new_buckets(len: usize) -> Option<Buckets> {
    let layout = Buckets::layout(len);
    // SAFETY: the layout is non-zero-sized.
    let raw = std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
    let offset = raw.as_ptr().align_offset(std::mem::align_of::<Bucket>());
    // SAFETY: the allocation has `align_of::<Bucket>()` spare bytes, so the aligned start plus
    // `len` buckets stays inside it; every byte is zero, a valid `Bucket` (atomics holding 0,
    // and 0 is also the "empty chain, unlocked" head).
    let first = unsafe { std::ptr::NonNull::new_unchecked(raw.as_ptr().add(offset).cast()) };
    Some(Buckets { raw, first, len })
}

#[cfg(all(test, not(loom)))]
mod tests;
