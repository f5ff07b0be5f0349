//! The model-based property tests, run on both storages: the slab [`Wheel`] and
//! [`NodeWheel`] (the same core over the intrusive storage).
//!
//! For random sequences of insert / remove / reschedule / advance (single ticks and huge
//! jumps, bounded and unbounded), against a `BTreeMap` model:
//! 1. every live entry fires exactly once, in the first advance whose target reaches its
//!    fire tick, and never before its expiry;
//! 2. a coarse entry fires within the documented slack (less than one granule of the level its
//!    delta selects, hence below 8/63 of the delta), a precise one at its exact expiry tick;
//! 3. stale keys (removed, fired, entry reused) are rejected by remove, reschedule and get;
//! 4. `next_expiry()` equals the model's earliest visit tick of a non-deferrable entry, so
//!    deferrable entries never move it.
//!
//! And `next_fire` is never late, and exact while nothing is removed.

use super::*;

/// What the model tests drive: the slab [`Wheel`] and [`NodeWheel`] (the same core over the
/// intrusive storage), so the properties hold for both storages.
trait UnderTest: Sized {
    fn make(levels: usize, start: u64) -> Self;
    fn now(&self) -> u64;
    fn len(&self) -> usize;
    fn insert_with(&mut self, expiry: u64, mode: Mode, value: u64) -> Key;
    fn remove(&mut self, key: Key) -> Option<u64>;
    fn reschedule(&mut self, key: Key, expiry: u64) -> Result<(), StaleKey>;
    fn advance(&mut self, now: u64, max: usize, f: &mut dyn FnMut(Expired<u64>)) -> Advance;
    fn poll(&mut self, now: u64) -> Option<Expired<u64>>;
    fn next_expiry(&self) -> Option<u64>;
    fn next_fire(&self) -> Option<u64>;
    /// The tick the storage keeps for an expiry (the intrusive storage folds the last ticks
    /// before the clock's end into one).
    fn kept(expiry: u64) -> u64;
}

impl UnderTest for Wheel<u64> {
    fn make(levels: usize, start: u64) -> Self {
        Wheel::builder()
            .levels(levels)
            .start(start)
            .build()
            .unwrap()
    }
    fn now(&self) -> u64 {
        Wheel::now(self)
    }
    fn len(&self) -> usize {
        Wheel::len(self)
    }
    fn insert_with(&mut self, expiry: u64, mode: Mode, value: u64) -> Key {
        Wheel::insert_with(self, expiry, mode, value)
    }
    fn remove(&mut self, key: Key) -> Option<u64> {
        Wheel::remove(self, key)
    }
    fn reschedule(&mut self, key: Key, expiry: u64) -> Result<(), StaleKey> {
        Wheel::reschedule(self, key, expiry)
    }
    fn advance(&mut self, now: u64, max: usize, f: &mut dyn FnMut(Expired<u64>)) -> Advance {
        Wheel::advance(self, now, max, f)
    }
    fn poll(&mut self, now: u64) -> Option<Expired<u64>> {
        Wheel::poll(self, now)
    }
    fn next_expiry(&self) -> Option<u64> {
        Wheel::next_expiry(self)
    }
    fn next_fire(&self) -> Option<u64> {
        Wheel::next_fire(self)
    }
    fn kept(expiry: u64) -> u64 {
        expiry
    }
}

/// An object with its own node, as a timer object is.
#[derive(Default)]
struct TestObject {
    node: Node,
    slot: u32,
    value: u64,
}

struct TestLocate;

// SAFETY: every address a `NodeWheel`'s core holds is a boxed `TestObject` that the wheel's
// `slots` own until it is removed or fired, and `node` is its first field.
unsafe impl Locate for TestLocate {
    unsafe fn node<'a>(r: usize) -> &'a Node {
        // SAFETY: the caller passes a live `TestObject`'s address (see the impl's comment).
        unsafe { &(*(r as *const TestObject)).node }
    }
}

/// The wheel's core over the intrusive storage, with keys like [`Wheel`]'s (slot and
/// generation) so the same model drives it.
struct NodeWheel {
    core: Core<Intrusive<TestLocate>>,
    slots: Vec<(u32, Option<Box<TestObject>>)>,
    free: Vec<u32>,
}

impl NodeWheel {
    fn addr(o: &TestObject) -> usize {
        o as *const TestObject as usize
    }

    fn live(&self, key: Key) -> Option<usize> {
        let (generation, o) = self.slots.get(key.index() as usize)?;
        let o = o.as_ref().filter(|_| *generation == key.generation())?;
        Some(Self::addr(o))
    }

    /// Gives up the object in `slot` (unlinked): its key, tick and value.
    fn take(&mut self, slot: u32) -> (Key, u64, u64) {
        let (generation, o) = &mut self.slots[slot as usize];
        let o = o.take().expect("a held object");
        assert!(!o.node.is_linked());
        let key = Key::new(slot, *generation);
        *generation += 1;
        self.free.push(slot);
        (key, o.node.tick(), o.value)
    }

    /// Runs the core to `now` with its `budget` and `max_fires`, giving up each fired object
    /// to `f`.
    fn run(
        &mut self,
        now: u64,
        budget: usize,
        max_fires: usize,
        f: &mut dyn FnMut(Expired<u64>),
    ) -> Advance {
        let mut fired = Vec::new();
        let ran = self.core.run(now, budget, max_fires, &mut |_, r| {
            // SAFETY: a fired ref is a `TestObject` the slots still own.
            fired.push(unsafe { (*(r as *const TestObject)).slot });
        });
        for slot in fired {
            let (key, expiry, value) = self.take(slot);
            f(Expired { key, expiry, value });
        }
        ran
    }
}

impl UnderTest for NodeWheel {
    fn make(levels: usize, start: u64) -> Self {
        NodeWheel {
            core: Core::new(Intrusive::default(), levels, start),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
    fn now(&self) -> u64 {
        self.core.now()
    }
    fn len(&self) -> usize {
        self.core.len()
    }
    fn insert_with(&mut self, expiry: u64, mode: Mode, value: u64) -> Key {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push((0, None));
            self.slots.len() as u32 - 1
        });
        let o = Box::new(TestObject {
            node: Node::default(),
            slot,
            value,
        });
        let r = Self::addr(&o);
        self.slots[slot as usize].1 = Some(o);
        self.core.link(r, expiry, mode);
        let kept = self.slots[slot as usize].1.as_ref().map(|o| o.node.tick());
        let want = if expiry >= MAX_TICK - 1 {
            u64::MAX
        } else {
            expiry
        };
        assert_eq!(kept, Some(want), "the node keeps the tick");
        Key::new(slot, self.slots[slot as usize].0)
    }
    fn remove(&mut self, key: Key) -> Option<u64> {
        let r = self.live(key)?;
        self.core.unlink(r);
        Some(self.take(key.index()).2)
    }
    fn reschedule(&mut self, key: Key, expiry: u64) -> Result<(), StaleKey> {
        let r = self.live(key).ok_or(StaleKey)?;
        self.core.reschedule(r, expiry);
        Ok(())
    }
    fn advance(&mut self, now: u64, max: usize, f: &mut dyn FnMut(Expired<u64>)) -> Advance {
        self.run(now, max, usize::MAX, f)
    }
    fn poll(&mut self, now: u64) -> Option<Expired<u64>> {
        let mut out = None;
        self.run(now, usize::MAX, 1, &mut |e| out = Some(e));
        out
    }
    fn next_expiry(&self) -> Option<u64> {
        self.core.next_expiry()
    }
    fn next_fire(&self) -> Option<u64> {
        self.core.next_fire(0)
    }
    fn kept(expiry: u64) -> u64 {
        <Intrusive<TestLocate> as Links>::kept(expiry)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Insert at `now + delta` (delta may be 0: ready).
    Insert {
        delta: u64,
        precise: bool,
        deferrable: bool,
    },
    /// Remove the n-th key ever handed out (live or stale).
    Remove(usize),
    /// Reschedule the n-th key to `now + delta`.
    Reschedule(usize, u64),
    /// Advance the clock by `step` and drain everything due.
    Advance(u64),
    /// Advance by `step` in calls of at most `max` fires each.
    AdvanceBounded(u64, usize),
}

fn delta_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..70,
        3 => 0u64..5_000,
        2 => 0u64..3_000_000,
        1 => (0u32..62).prop_map(|b| 1u64 << b),
        1 => any::<u64>(),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (delta_strategy(), any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(delta, precise, deferrable)| Op::Insert { delta, precise, deferrable }),
        3 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), delta_strategy()).prop_map(|(i, d)| Op::Reschedule(i, d)),
        3 => prop_oneof![3 => 1u64..3, 3 => 1u64..600, 2 => 1u64..100_000, 1 => 1u64..(1 << 40)]
            .prop_map(Op::Advance),
        1 => (1u64..5_000, 1usize..4).prop_map(|(s, m)| Op::AdvanceBounded(s, m)),
    ]
}

/// What the model knows of a live entry.
#[derive(Debug, Clone)]
struct ModelEntry {
    expiry: u64,
    precise: bool,
    deferrable: bool,
    /// Wheel clock when it was last placed (insert, reschedule or re-placement).
    placed_at: u64,
    /// The expiry it was last placed by: its expiry, except for a precise entry moved later,
    /// which stays where it was placed until its bucket's visit re-places it.
    placed_expiry: u64,
    /// Delta when armed, for the slack bound.
    armed_delta: u64,
}

/// The documented placement rule, written independently of the wheel: the tick at which the
/// wheel next visits the entry.
fn model_visit(e: &ModelEntry, levels: usize) -> u64 {
    if e.placed_expiry <= e.placed_at {
        return e.placed_at;
    }
    let delta = e.placed_expiry - e.placed_at;
    let mut level = 0;
    while level + 1 < levels && delta >= 63u64 << (3 * level) {
        level += 1;
    }
    let g = 1u128 << (3 * level);
    let (expiry, at) = (e.placed_expiry as u128, e.placed_at as u128);
    let abs_bucket = if e.precise {
        expiry / g
    } else {
        expiry.div_ceil(g)
    };
    let abs_bucket = abs_bucket.min(at / g + 64);
    (abs_bucket * g) as u64
}

/// Advances the model to `target`: re-places entries visited before their expiry (parking
/// far-out ones until the target) and returns the keys of those that fire.
fn model_advance(model: &mut BTreeMap<Key, ModelEntry>, target: u64, levels: usize) -> Vec<Key> {
    let mut fired = Vec::new();
    for (&key, e) in model.iter_mut() {
        loop {
            let visit = model_visit(e, levels);
            if visit > target {
                break;
            }
            // Visited and due by the target: fires (even before its rounded-down bucket's
            // re-placement would have brought it to its exact tick).
            if e.expiry <= target {
                fired.push(key);
                break;
            }
            // Far-out from the visit: parked until the target, then placed from `target - 1`.
            if level_for_delta(e.expiry - (visit - 1)) >= levels {
                e.placed_at = target - 1;
                e.placed_expiry = e.expiry;
                continue;
            }
            e.placed_at = visit - 1;
            e.placed_expiry = e.expiry;
        }
    }
    for key in &fired {
        model.remove(key);
    }
    fired
}

fn run_model<W: UnderTest>(ops: Vec<Op>, levels: usize, start: u64) -> Result<(), TestCaseError> {
    let mut w = W::make(levels, start);
    let mut model: BTreeMap<Key, ModelEntry> = BTreeMap::new();
    let mut keys: Vec<Key> = Vec::new();
    let fire_checks = |key: Key, expiry: u64, now: u64, e: &ModelEntry| {
        prop_assert!(
            expiry <= now,
            "{key:?} fired early: expiry {expiry} > now {now}"
        );
        prop_assert_eq!(expiry, e.expiry);
        Ok(())
    };
    for op in ops {
        let now = w.now();
        match op {
            Op::Insert {
                delta,
                precise,
                deferrable,
            } => {
                let expiry = now.saturating_add(delta);
                let mut mode = if precise { Mode::PRECISE } else { Mode::COARSE };
                if deferrable {
                    mode = mode | Mode::DEFERRABLE;
                }
                let key = w.insert_with(expiry, mode, keys.len() as u64);
                prop_assert!(
                    !model.contains_key(&key),
                    "fresh key collides with a live one"
                );
                keys.push(key);
                let armed_delta = expiry - now;
                model.insert(
                    key,
                    ModelEntry {
                        expiry,
                        precise,
                        deferrable,
                        placed_at: now,
                        placed_expiry: expiry,
                        armed_delta,
                    },
                );
            }
            Op::Remove(i) if !keys.is_empty() => {
                let key = keys[i % keys.len()];
                let want = model.remove(&key).map(|_| ());
                prop_assert_eq!(w.remove(key).map(|_| ()), want, "remove {:?}", key);
            }
            Op::Reschedule(i, delta) if !keys.is_empty() => {
                let key = keys[i % keys.len()];
                let expiry = now.saturating_add(delta);
                match model.get_mut(&key) {
                    Some(e) => {
                        prop_assert_eq!(w.reschedule(key, expiry), Ok(()));
                        // A precise entry moved later, not ready, keeps its placement; later
                        // by the tick the storage keeps (two far-out expiries the intrusive
                        // storage folds into one tick are no move).
                        let stays =
                            e.precise && W::kept(expiry) >= W::kept(e.expiry) && e.expiry > now;
                        e.expiry = expiry;
                        if !stays {
                            e.placed_at = now;
                            e.placed_expiry = expiry;
                        }
                        e.armed_delta = expiry - now;
                    }
                    None => prop_assert_eq!(w.reschedule(key, expiry), Err(StaleKey)),
                }
            }
            Op::Remove(_) | Op::Reschedule(..) => {}
            Op::Advance(step) | Op::AdvanceBounded(step, _) => {
                let target = now.saturating_add(step).min(MAX_TICK);
                let snapshot = model.clone();
                let mut want = model_advance(&mut model, target, levels);
                let mut got = Vec::new();
                let max = match op {
                    Op::AdvanceBounded(_, m) => m,
                    _ => usize::MAX,
                };
                loop {
                    let mut batch = Vec::new();
                    let step = w.advance(target, max, &mut |e| batch.push((e.key, e.expiry)));
                    prop_assert_eq!(step.fired, batch.len());
                    prop_assert!(step.fired <= max);
                    for (key, expiry) in batch {
                        let e = snapshot.get(&key).expect("fired entry was live");
                        fire_checks(key, expiry, target, e)?;
                        // Slack: coarse within one granule of the armed level, precise exact
                        // (unless it was already due when armed, or armed far-out).
                        let in_range = e.armed_delta > 0 && level_for_delta(e.armed_delta) < levels;
                        if in_range {
                            let fire = model_visit_fire(e, levels);
                            prop_assert!(fire >= e.expiry);
                            if e.precise {
                                prop_assert_eq!(fire, e.expiry, "precise entry late");
                            } else if e.armed_delta >= 63 {
                                prop_assert!(
                                    (fire - e.expiry) * 63 <= e.armed_delta * 8,
                                    "coarse slack"
                                );
                            }
                        }
                        got.push(key);
                    }
                    if step.complete {
                        break;
                    }
                }
                got.sort();
                want.sort();
                prop_assert_eq!(&got, &want, "fired set at {}", target);
                prop_assert_eq!(w.now(), target);
            }
        }
        prop_assert_eq!(w.len(), model.len());
        let want_next = model
            .values()
            .filter(|e| !e.deferrable)
            .map(|e| model_visit(e, levels))
            .min();
        prop_assert_eq!(w.next_expiry(), want_next, "next_expiry at now {}", w.now());
    }
    Ok(())
}

/// The tick at which the model says an entry fires, following re-placements from its
/// current placement.
fn model_visit_fire(e: &ModelEntry, levels: usize) -> u64 {
    let mut e = e.clone();
    loop {
        let visit = model_visit(&e, levels);
        if e.expiry <= visit {
            return visit;
        }
        e.placed_at = visit - 1;
        e.placed_expiry = e.expiry;
    }
}

/// A precise entry parked far out, moved to another expiry the intrusive storage folds into
/// the same tick (both at or past `MAX_TICK - 1`), stays parked: the model called the move
/// earlier by the raw expiries and wanted it re-placed from the clock.
#[test]
fn a_far_out_precise_entry_moved_within_the_folded_ticks_stays_parked() {
    let ops = vec![
        Op::Insert {
            delta: 1,
            precise: false,
            deferrable: false,
        },
        Op::Insert {
            delta: 10_695_076_120_858_373_933,
            precise: true,
            deferrable: false,
        },
        Op::AdvanceBounded(13, 1),
        Op::Reschedule(1, 4_611_686_018_427_089_855),
        Op::Insert {
            delta: 0,
            precise: false,
            deferrable: false,
        },
    ];
    run_model::<Wheel<u64>>(ops.clone(), 1, 298_035).unwrap();
    run_model::<NodeWheel>(ops, 1, 298_035).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn wheel_matches_model(ops in prop::collection::vec(op_strategy(), 1..120)) {
        run_model::<Wheel<u64>>(ops.clone(), DEFAULT_LEVELS, 0)?;
        run_model::<NodeWheel>(ops, DEFAULT_LEVELS, 0)?;
    }

    #[test]
    fn small_wheel_matches_model(
        ops in prop::collection::vec(op_strategy(), 1..120),
        levels in 1usize..4,
        start in prop_oneof![Just(0u64), 0u64..1_000_000, Just(MAX_TICK - 1_000)],
    ) {
        run_model::<Wheel<u64>>(ops.clone(), levels, start)?;
        // The intrusive storage keeps 62 bits of tick (`intrusive.rs`): not at the clock's end.
        if start < MAX_TICK / 2 {
            run_model::<NodeWheel>(ops, levels, start)?;
        }
    }

    #[test]
    fn key_bits_round_trip(index in 0u32..u32::MAX, generation in any::<u32>()) {
        let key = Key::new(index, generation);
        prop_assert_eq!(Key::from_bits(key.to_bits()), key);
        prop_assert_eq!((key.index(), key.generation()), (index, generation));
    }
}

proptest! {
    /// `next_fire` is never after the earliest expiry of a precise entry (an early wake is
    /// allowed after removals and reschedules, a late one never), never before `next_expiry`,
    /// and exact while entries have only been added since the wheel was last drained.
    /// Reschedules move entries earlier and later, within their bucket (a small step) and to
    /// another one.
    #[test]
    fn next_fire_is_never_late_and_exact_without_removals(
        start in 0u64..1_000_000,
        ops in proptest::collection::vec((0u8..14, 1u64..5_000_000), 1..300),
    ) {
        next_fire_run::<Wheel<u64>>(start, ops.clone())?;
        next_fire_run::<NodeWheel>(start, ops)?;
    }
}

fn next_fire_run<W: UnderTest>(start: u64, ops: Vec<(u8, u64)>) -> Result<(), TestCaseError> {
    let mut w = W::make(DEFAULT_LEVELS, start);
    let mut model: BTreeMap<(u64, u64), Key> = BTreeMap::new();
    let mut removed_since_empty = false;
    for (i, (op, v)) in ops.into_iter().enumerate() {
        match op {
            0..=5 => {
                let expiry = w.now() + v;
                let key = w.insert_with(expiry, Mode::PRECISE, i as u64);
                model.insert((expiry, i as u64), key);
            }
            6 | 7 => {
                if let Some((&k, &key)) = model.iter().nth(v as usize % model.len().max(1)) {
                    w.remove(key).unwrap();
                    model.remove(&k);
                    removed_since_empty = true;
                }
            }
            10..=13 => {
                if let Some((&k, &key)) = model.iter().nth(v as usize % model.len().max(1)) {
                    let expiry = match op {
                        // A small step either way: mostly the same bucket.
                        10 => k.0.saturating_sub(v % 64).max(w.now() + 1),
                        11 => k.0 + v % 64,
                        // Anywhere: mostly another bucket, often another level.
                        12 => w.now() + 1 + v / 8,
                        _ => w.now() + v,
                    };
                    prop_assert_eq!(w.reschedule(key, expiry), Ok(()));
                    model.remove(&k);
                    model.insert((expiry, k.1), key);
                    // Leaving a bucket is a removal from it (its bound may stay early).
                    removed_since_empty = true;
                }
            }
            _ => {
                let target = w.now() + v / 4;
                while let Some(e) = w.poll(target) {
                    model.remove(&(e.expiry, e.value));
                }
            }
        }
        if model.is_empty() {
            removed_since_empty = false;
        }
        let earliest = model.keys().next().map(|k| k.0.max(w.now()));
        let fire = w.next_fire();
        prop_assert_eq!(fire.is_some(), earliest.is_some());
        if let (Some(f), Some(e)) = (fire, earliest) {
            prop_assert!(f <= e, "next_fire {} after the earliest expiry {}", f, e);
            prop_assert!(f >= w.next_expiry().unwrap());
            if !removed_since_empty {
                prop_assert_eq!(f, e, "exact while nothing was removed");
            }
        }
    }
    Ok(())
}
