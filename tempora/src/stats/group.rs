//! Groups of owners: a tree whose nodes sum their subtree's statistics and may cap the timers
//! living in it (`max_timers`, like a cgroup's `pids.max`).
//!
//! # Sums
//!
//! A flush adds each owner's deltas to its own totals and to every group on its path to the
//! root (`Tally::absorb`), so a group's totals are the sum over its subtree of everything ever
//! flushed, deleted owners included, and a flush touches only the paths that had updates.
//!
//! # Limits
//!
//! Every group but the root keeps `live`, the exact number of timers in its subtree: a create
//! charges each group on its owner's path (O(depth) atomic updates, no lock), a delete gives
//! it back. In a group with a limit the charge is a compare-and-swap that adds only while
//! `live` is below the limit, so `live` never exceeds it, even for an instant, however many
//! creators race. A charge that finds a group full undoes what it added below it and fails;
//! meanwhile that undone add holds room, so a racing create may be refused while there would
//! be room a moment later (as with `pids.max`). Groups without a limit count with a plain
//! atomic add.
//! Owners directly under the root pay nothing: the root keeps no count and has no limit.

use super::hist::Buckets;
use super::totals::{Totals, COUNTERS};
use crate::sync::{rank, AtomicU64, Ordering, RankedMutex};
use std::sync::Arc;

/// No limit.
const UNLIMITED: u64 = u64::MAX;

/// A node of the group tree.
pub(crate) struct GroupNode {
    /// The name given at creation; "" for the root.
    pub(crate) name: String,
    /// The names from below the root, joined by `/` ("" for the root).
    pub(crate) path: String,
    pub(crate) parent: Option<Arc<GroupNode>>,
    /// Nothing panics under it (a push, a clone, a take): a poisoned one is used as it is.
    children: RankedMutex<Vec<Arc<GroupNode>>, { rank::CHILDREN }>,
    /// Nothing panics under it (integer additions, a clone): a poisoned one is used as it is.
    totals: RankedMutex<Totals, { rank::TOTALS }>,
    /// Timers living in the subtree (not kept by the root).
    live: AtomicU64,
    max: AtomicU64,
}

impl GroupNode {
    pub(crate) fn root() -> Arc<GroupNode> {
        Arc::new(GroupNode::new(String::new(), String::new(), None))
    }

    fn new(name: String, path: String, parent: Option<Arc<GroupNode>>) -> GroupNode {
        GroupNode {
            name,
            path,
            parent,
            children: RankedMutex::new(Vec::new()),
            totals: RankedMutex::new(Totals::default()),
            live: AtomicU64::new(0),
            max: AtomicU64::new(UNLIMITED),
        }
    }

    /// Whether this is the root.
    pub(crate) fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    /// The child named `name`, made if it does not exist.
    pub(crate) fn child(self: &Arc<GroupNode>, name: &str) -> Arc<GroupNode> {
        let mut children = self.children.lock_or_recover();
        if let Some(c) = children.iter().find(|c| c.name == name) {
            return c.clone();
        }
        let path = if self.is_root() {
            name.to_owned()
        } else {
            format!("{}/{}", self.path, name)
        };
        let c = Arc::new(GroupNode::new(name.to_owned(), path, Some(self.clone())));
        children.push(c.clone());
        c
    }

    /// Lets go of the subtree's downward links (each child's of its children, then its own),
    /// for a service being dropped: a child holds its parent, so a tree whose parents also
    /// held their children would never be freed. Nodes still held (by an owner's tally or a
    /// `Group` handle) keep their path up.
    pub(crate) fn release_children(&self) {
        let children = std::mem::take(&mut *self.children.lock_or_recover());
        for c in &children {
            c.release_children();
        }
    }

    /// The children, in creation order.
    pub(crate) fn children(&self) -> Vec<Arc<GroupNode>> {
        self.children.lock_or_recover().clone()
    }

    pub(crate) fn absorb(&self, delta: &[u64; COUNTERS], late: Option<&Buckets>) {
        self.totals.lock_or_recover().add(delta, late);
    }

    /// The flushed totals.
    pub(crate) fn totals(&self) -> Totals {
        self.totals.lock_or_recover().clone()
    }

    /// The limit, if one is set.
    pub(crate) fn max_timers(&self) -> Option<u64> {
        // Relaxed: a setting; charges read it again.
        let max = self.max.load(Ordering::Relaxed);
        (max != UNLIMITED).then_some(max)
    }

    /// Sets or clears the limit. Lowering it below `live` refuses creates until deletes bring
    /// the subtree under it; no timer is deleted.
    pub(crate) fn set_max_timers(&self, max: Option<u64>) {
        // Relaxed: a setting; a create racing it is judged by either value.
        self.max.store(max.unwrap_or(UNLIMITED), Ordering::Relaxed);
    }

    /// Timers living in the subtree right now (exact; the root keeps no count).
    pub(crate) fn live(&self) -> Option<u64> {
        // Relaxed: a reading.
        (!self.is_root()).then(|| self.live.load(Ordering::Relaxed))
    }

    /// Charges one timer to every group from this one up to the root, or to none: the path
    /// of the group that is at its limit.
    pub(crate) fn charge(self: &Arc<GroupNode>) -> Result<(), String> {
        let mut g = self;
        while let Some(parent) = &g.parent {
            // Relaxed (all): the count's atomicity is all the limit needs; nothing is
            // published through it.
            let max = g.max.load(Ordering::Relaxed);
            if max == UNLIMITED {
                g.live.fetch_add(1, Ordering::Relaxed);
            } else if g
                .live
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                    (live < max).then_some(live + 1)
                })
                .is_err()
            {
                self.uncharge_until(g);
                return Err(g.path.clone());
            }
            g = parent;
        }
        Ok(())
    }

    /// Gives back one timer's charge from this group up to the root.
    pub(crate) fn uncharge(self: &Arc<GroupNode>) {
        let mut g = self;
        while let Some(parent) = &g.parent {
            // Relaxed: as in `charge`.
            g.live.fetch_sub(1, Ordering::Relaxed);
            g = parent;
        }
    }

    /// Gives back the charges from this group up to `stop` (not included).
    fn uncharge_until(self: &Arc<GroupNode>, stop: &GroupNode) {
        let mut g = self;
        while !std::ptr::eq(&**g, stop) {
            // Relaxed: as in `charge`.
            g.live.fetch_sub(1, Ordering::Relaxed);
            g = g.parent.as_ref().expect("`stop` is above");
        }
    }
}
