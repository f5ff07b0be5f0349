//! The ID registries the seed suite compares, behind one trait: tempora's registry, the live
//! kernel's POSIX timers, one global lock around a hash map (Linux before 6.15), a per-owner
//! array indexed by ID (the xarray alternative the kernel rejected for memory), and dashmap.
//!
//! Every in-process peer stores the same per-timer state tempora keeps in its timer object
//! ([`PeerTimer`]: status, base, sequence, expiry, interval, overrun counts, wheel key, clock,
//! notify kind), so memory and speed compare like for like.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};

pub use tempora_kernel::Errno;

/// A timer ID registry with per-owner ID namespaces.
pub trait Registry: Sync + Sized {
    const NAME: &'static str;
    type Owner: Send + Sync;
    fn new() -> Self;
    fn owner(&self) -> Self::Owner;
    /// Creates a timer with the next free ID.
    fn create(&self, o: &Self::Owner) -> Result<i32, Errno>;
    /// Creates a timer with exactly `id` (restore mode), for the sparse-ID memory case.
    fn create_exact(&self, o: &Self::Owner, id: i32) -> Result<(), Errno>;
    /// Lookup plus reading the overrun count.
    fn getoverrun(&self, o: &Self::Owner, id: i32) -> Result<i32, Errno>;
    fn delete(&self, o: &Self::Owner, id: i32) -> Result<(), Errno>;
    /// Deletes the owner's timers `ids` and the owner (untimed clean-up between runs).
    fn release(&self, o: Self::Owner, ids: &[i32]) {
        for &id in ids {
            let _ = self.delete(&o, id);
        }
    }
}

/// The state every peer keeps per timer (what tempora's timer object holds).
#[derive(Debug, Default, Clone, Copy)]
#[allow(dead_code)] // written, never read: the peers carry it so memory compares like for like
pub struct PeerTimer {
    status: u8,
    clock: u8,
    notify: u8,
    base: u16,
    signal_seq: u32,
    expiry: u64,
    interval: u64,
    overrun: i64,
    overrun_last: i32,
    wheel_key: u64,
}

/// tempora's registry on its own (`tempora::bench_door`: the service's registry and timer
/// objects, driven through the registry's calls).
pub struct Tempora(tempora::bench_door::Registry);

impl Registry for Tempora {
    const NAME: &'static str = "tempora";
    type Owner = tempora::bench_door::BareOwner;
    fn new() -> Self {
        Tempora(tempora::bench_door::Registry::new())
    }
    fn owner(&self) -> Self::Owner {
        self.0.owner()
    }
    #[inline]
    fn create(&self, o: &Self::Owner) -> Result<i32, Errno> {
        o.create().map(|id| id.get()).map_err(|e| e.errno())
    }
    fn create_exact(&self, o: &Self::Owner, id: i32) -> Result<(), Errno> {
        o.set_restore_ids(true);
        let r = o.create_with_id(id);
        o.set_restore_ids(false);
        r.map(drop).map_err(|e| e.errno())
    }
    #[inline]
    fn getoverrun(&self, o: &Self::Owner, id: i32) -> Result<i32, Errno> {
        let id = tempora::TimerId::new(id).ok_or(libc::EINVAL)?;
        o.getoverrun(id).map_err(|e| e.errno())
    }
    #[inline]
    fn delete(&self, o: &Self::Owner, id: i32) -> Result<(), Errno> {
        let id = tempora::TimerId::new(id).ok_or(libc::EINVAL)?;
        o.delete(id).map_err(|e| e.errno())
    }
    fn release(&self, o: Self::Owner, _ids: &[i32]) {
        // Deleting the owner deletes its timers.
        drop(o);
    }
}

/// The live kernel's POSIX timers through raw syscalls: CLOCK_MONOTONIC, SIGEV_NONE. The owner
/// is this process.
pub struct Kernel;

impl Registry for Kernel {
    const NAME: &'static str = "kernel";
    type Owner = ();
    fn new() -> Self {
        Kernel
    }
    fn owner(&self) -> Self::Owner {}
    #[inline]
    fn create(&self, _: &()) -> Result<i32, Errno> {
        tempora_kernel::timer_create_none(0)
    }
    fn create_exact(&self, _: &(), _id: i32) -> Result<(), Errno> {
        Err(libc::ENOTSUP)
    }
    #[inline]
    fn getoverrun(&self, _: &(), id: i32) -> Result<i32, Errno> {
        tempora_kernel::timer_getoverrun(id)
    }
    #[inline]
    fn delete(&self, _: &(), id: i32) -> Result<(), Errno> {
        tempora_kernel::timer_delete(id)
    }
}

/// One mutex around one hash map for all owners, IDs from a per-owner counter: the pre-6.15
/// kernel design (global `hash_lock`).
pub struct GlobalLock {
    map: Mutex<hashbrown::HashMap<(u64, i32), PeerTimer>>,
    owners: OwnerKeys,
}

pub struct CounterOwner {
    key: u64,
    next: AtomicU32,
}

/// Hands out owner keys for the peers whose owners are a key and an ID counter.
struct OwnerKeys(AtomicU64);

impl OwnerKeys {
    fn new() -> OwnerKeys {
        OwnerKeys(AtomicU64::new(1))
    }

    fn owner(&self) -> CounterOwner {
        CounterOwner {
            key: self.0.fetch_add(1, Ordering::Relaxed),
            next: AtomicU32::new(0),
        }
    }
}

impl CounterOwner {
    /// Linux's ID allocation: counter values in turn (wrapping at `i32::MAX`), each tried once
    /// with `insert_if_vacant`, until one is free; EAGAIN when none is.
    #[inline]
    fn allocate(&self, mut insert_if_vacant: impl FnMut(i32) -> bool) -> Result<i32, Errno> {
        for _ in 0..=i32::MAX as u32 {
            let id = (self.next.fetch_add(1, Ordering::Relaxed) & i32::MAX as u32) as i32;
            if insert_if_vacant(id) {
                return Ok(id);
            }
        }
        Err(libc::EAGAIN)
    }

    /// Exact-ID create's counter rule: the next ID follows the restored one.
    fn restored(&self, id: i32) {
        self.next.store(id as u32 + 1, Ordering::Relaxed);
    }
}

impl Registry for GlobalLock {
    const NAME: &'static str = "global-lock";
    type Owner = CounterOwner;
    fn new() -> Self {
        GlobalLock {
            map: Mutex::new(hashbrown::HashMap::new()),
            owners: OwnerKeys::new(),
        }
    }
    fn owner(&self) -> CounterOwner {
        self.owners.owner()
    }
    #[inline]
    fn create(&self, o: &CounterOwner) -> Result<i32, Errno> {
        let mut map = self.map.lock();
        o.allocate(|id| match map.entry((o.key, id)) {
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(PeerTimer::default());
                true
            }
            hashbrown::hash_map::Entry::Occupied(_) => false,
        })
    }
    fn create_exact(&self, o: &CounterOwner, id: i32) -> Result<(), Errno> {
        match self.map.lock().entry((o.key, id)) {
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(PeerTimer::default());
                o.restored(id);
                Ok(())
            }
            hashbrown::hash_map::Entry::Occupied(_) => Err(libc::EBUSY),
        }
    }
    #[inline]
    fn getoverrun(&self, o: &CounterOwner, id: i32) -> Result<i32, Errno> {
        self.map
            .lock()
            .get(&(o.key, id))
            .map(|t| t.overrun_last)
            .ok_or(libc::EINVAL)
    }
    #[inline]
    fn delete(&self, o: &CounterOwner, id: i32) -> Result<(), Errno> {
        self.map
            .lock()
            .remove(&(o.key, id))
            .map(drop)
            .ok_or(libc::EINVAL)
    }
}

/// A per-owner array indexed by ID (pointers to timer objects, as an xarray holds), behind a
/// per-owner reader-writer lock.
pub struct SparseArray;

#[derive(Default)]
pub struct ArrayOwner {
    inner: RwLock<ArrayInner>,
}

#[derive(Default)]
struct ArrayInner {
    slots: Vec<Option<Box<PeerTimer>>>,
    next: u32,
}

impl Registry for SparseArray {
    const NAME: &'static str = "sparse-array";
    type Owner = ArrayOwner;
    fn new() -> Self {
        SparseArray
    }
    fn owner(&self) -> ArrayOwner {
        ArrayOwner::default()
    }
    #[inline]
    fn create(&self, o: &ArrayOwner) -> Result<i32, Errno> {
        let mut g = o.inner.write();
        loop {
            let id = g.next & i32::MAX as u32;
            g.next = g.next.wrapping_add(1);
            let i = id as usize;
            if i >= g.slots.len() {
                g.slots.resize_with(i + 1, || None);
            }
            if g.slots[i].is_none() {
                g.slots[i] = Some(Box::default());
                return Ok(id as i32);
            }
        }
    }
    fn create_exact(&self, o: &ArrayOwner, id: i32) -> Result<(), Errno> {
        let mut g = o.inner.write();
        let i = id as usize;
        if i >= g.slots.len() {
            g.slots.resize_with(i + 1, || None);
        }
        if g.slots[i].is_some() {
            return Err(libc::EBUSY);
        }
        g.slots[i] = Some(Box::default());
        g.next = id as u32 + 1;
        Ok(())
    }
    #[inline]
    fn getoverrun(&self, o: &ArrayOwner, id: i32) -> Result<i32, Errno> {
        o.inner
            .read()
            .slots
            .get(id as usize)
            .and_then(|s| s.as_ref())
            .map(|t| t.overrun_last)
            .ok_or(libc::EINVAL)
    }
    #[inline]
    fn delete(&self, o: &ArrayOwner, id: i32) -> Result<(), Errno> {
        o.inner
            .write()
            .slots
            .get_mut(id as usize)
            .and_then(Option::take)
            .map(drop)
            .ok_or(libc::EINVAL)
    }
}

/// dashmap (a sharded `RwLock<HashMap>`) keyed by (owner, ID), IDs from a per-owner counter.
pub struct Dash {
    map: DashMap<(u64, i32), PeerTimer>,
    owners: OwnerKeys,
}

impl Registry for Dash {
    const NAME: &'static str = "dashmap";
    type Owner = CounterOwner;
    fn new() -> Self {
        Dash {
            map: DashMap::new(),
            owners: OwnerKeys::new(),
        }
    }
    fn owner(&self) -> CounterOwner {
        self.owners.owner()
    }
    #[inline]
    fn create(&self, o: &CounterOwner) -> Result<i32, Errno> {
        o.allocate(|id| match self.map.entry((o.key, id)) {
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(PeerTimer::default());
                true
            }
            dashmap::mapref::entry::Entry::Occupied(_) => false,
        })
    }
    fn create_exact(&self, o: &CounterOwner, id: i32) -> Result<(), Errno> {
        match self.map.entry((o.key, id)) {
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(PeerTimer::default());
                o.restored(id);
                Ok(())
            }
            dashmap::mapref::entry::Entry::Occupied(_) => Err(libc::EBUSY),
        }
    }
    #[inline]
    fn getoverrun(&self, o: &CounterOwner, id: i32) -> Result<i32, Errno> {
        self.map
            .get(&(o.key, id))
            .map(|t| t.overrun_last)
            .ok_or(libc::EINVAL)
    }
    #[inline]
    fn delete(&self, o: &CounterOwner, id: i32) -> Result<(), Errno> {
        self.map.remove(&(o.key, id)).map(drop).ok_or(libc::EINVAL)
    }
}
