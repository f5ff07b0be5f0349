//! One trait over every timer structure the wheel suite measures, so each workload runs the
//! same code against tempora and its peers in one process.
//!
//! Time is in milliseconds ("ticks") for every implementation: the resolution tokio's
//! `DelayQueue`, nexus-timer and bitwheel are built around. Peers that take `Instant`s get
//! `epoch + ticks` (the conversion is part of their API cost, as it is for their users).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tempora::wheel::{Key, Mode, Wheel};

/// A timer queue under test. `id`s are dense `0..n` tokens chosen by the harness.
pub trait TimerQueue {
    /// The JSON `impl` value.
    const NAME: &'static str;
    /// Whether `poll` honours `max` (bounded expiry).
    const BOUNDED_POLL: bool = true;
    /// What cancel/reschedule take.
    type Handle;

    fn new(capacity: usize) -> Self;
    fn insert(&mut self, deadline: u64, id: u64) -> Self::Handle;
    fn cancel(&mut self, handle: Self::Handle) -> bool;
    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle;
    /// Fires timers due by `now`, calling `fired(id)` for each, doing at most `max` units of
    /// work where the queue can bound it. Returns the count fired and whether nothing due by
    /// `now` is left.
    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool);
    /// When the structure next needs attention (may be a lower bound), if anything is armed.
    fn next_expiry(&mut self) -> Option<u64>;
    /// Hands back the handle of a timer that fired (only nexus-timer needs it).
    fn release(&mut self, _handle: Self::Handle) {}
}

/// tempora's wheel. `PRECISE` selects the mode; `tempora` is precise (fires at the exact tick,
/// like every peer here), `tempora-coarse` is the kernel's rule (up to 1/8 late).
pub struct Tempora<const PRECISE: bool>(Wheel<u64>);

impl<const PRECISE: bool> TimerQueue for Tempora<PRECISE> {
    const NAME: &'static str = if PRECISE { "tempora" } else { "tempora-coarse" };
    type Handle = Key;

    fn new(capacity: usize) -> Self {
        Tempora(
            Wheel::builder()
                .capacity(capacity)
                .build()
                .expect("valid config"),
        )
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> Key {
        let mode = if PRECISE { Mode::PRECISE } else { Mode::COARSE };
        self.0.insert_with(deadline, mode, id)
    }

    #[inline]
    fn cancel(&mut self, handle: Key) -> bool {
        self.0.remove(handle).is_some()
    }

    #[inline]
    fn reschedule(&mut self, handle: Key, deadline: u64) -> Key {
        self.0.reschedule(handle, deadline).expect("live key");
        handle
    }

    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let step = self.0.advance(now, max, |e| fired(e.value));
        (step.fired, step.complete)
    }

    #[inline]
    fn next_expiry(&mut self) -> Option<u64> {
        self.0.next_expiry()
    }
}

/// `std::collections::BinaryHeap` with lazy deletion: cancel bumps the slot's generation and
/// leaves the heap entry behind; stale entries are popped when they reach the top and the heap
/// is compacted (O(n) `retain`) once stale entries outnumber live ones, as Go's timer heaps
/// do. 16 bytes per heap entry plus 8 per slot.
pub struct LazyHeap {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Per slot: generation, and the id it holds.
    slots: Vec<(u32, u64)>,
    free: Vec<u32>,
    stale: usize,
}

impl LazyHeap {
    #[inline]
    fn is_live(&self, (_, slot, generation): (u64, u32, u32)) -> bool {
        self.slots[slot as usize].0 == generation
    }

    fn kill(&mut self, (slot, generation): (u32, u32)) -> bool {
        let s = &mut self.slots[slot as usize];
        if s.0 != generation {
            return false;
        }
        s.0 = s.0.wrapping_add(1);
        self.free.push(slot);
        self.stale += 1;
        if self.stale > self.heap.len() / 2 + 1024 {
            let slots = &self.slots;
            self.heap
                .retain(|Reverse((_, s, g))| slots[*s as usize].0 == *g);
            self.stale = 0;
        }
        true
    }

    fn purge_top(&mut self) {
        while let Some(&Reverse(top)) = self.heap.peek() {
            if self.is_live(top) {
                break;
            }
            self.heap.pop();
            self.stale -= 1;
        }
    }
}

impl TimerQueue for LazyHeap {
    const NAME: &'static str = "binary-heap";
    type Handle = (u32, u32);

    fn new(capacity: usize) -> Self {
        LazyHeap {
            heap: BinaryHeap::with_capacity(capacity),
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            stale: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> (u32, u32) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].1 = id;
                slot
            }
            None => {
                self.slots.push((0, id));
                (self.slots.len() - 1) as u32
            }
        };
        let generation = self.slots[slot as usize].0;
        self.heap.push(Reverse((deadline, slot, generation)));
        (slot, generation)
    }

    #[inline]
    fn cancel(&mut self, handle: (u32, u32)) -> bool {
        self.kill(handle)
    }

    fn reschedule(&mut self, handle: (u32, u32), deadline: u64) -> (u32, u32) {
        let id = self.slots[handle.0 as usize].1;
        self.kill(handle);
        self.insert(deadline, id)
    }

    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let mut n = 0;
        while n < max {
            self.purge_top();
            match self.heap.peek() {
                Some(&Reverse((deadline, slot, generation))) if deadline <= now => {
                    self.heap.pop();
                    let id = self.slots[slot as usize].1;
                    self.slots[slot as usize].0 = generation.wrapping_add(1);
                    self.free.push(slot);
                    fired(id);
                    n += 1;
                }
                _ => return (n, true),
            }
        }
        (n, false)
    }

    #[inline]
    fn next_expiry(&mut self) -> Option<u64> {
        self.purge_top();
        self.heap.peek().map(|Reverse((deadline, ..))| *deadline)
    }
}

/// `BTreeMap<(deadline, seq), id>`: exact removal, O(log n) everything.
pub struct BTree {
    map: BTreeMap<(u64, u64), u64>,
    seq: u64,
}

impl TimerQueue for BTree {
    const NAME: &'static str = "btreemap";
    type Handle = (u64, u64);

    fn new(_capacity: usize) -> Self {
        BTree {
            map: BTreeMap::new(),
            seq: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> (u64, u64) {
        self.seq += 1;
        self.map.insert((deadline, self.seq), id);
        (deadline, self.seq)
    }

    #[inline]
    fn cancel(&mut self, handle: (u64, u64)) -> bool {
        self.map.remove(&handle).is_some()
    }

    fn reschedule(&mut self, handle: (u64, u64), deadline: u64) -> (u64, u64) {
        let id = self.map.remove(&handle).expect("live handle");
        self.insert(deadline, id)
    }

    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let mut n = 0;
        while n < max {
            match self.map.first_entry() {
                Some(e) if e.key().0 <= now => {
                    fired(e.remove());
                    n += 1;
                }
                _ => return (n, true),
            }
        }
        (n, false)
    }

    #[inline]
    fn next_expiry(&mut self) -> Option<u64> {
        self.map.first_key_value().map(|(k, _)| k.0)
    }
}

/// nexus-timer's unbounded wheel (1 ms tick, 7 levels of 64, its defaults), polled with
/// `poll_and_rebalance_with_limit`, its recommended poll.
pub struct Nexus {
    wheel: nexus_timer::Wheel<u64>,
    epoch: Instant,
    buf: Vec<u64>,
}

impl Nexus {
    #[inline]
    fn at(&self, tick: u64) -> Instant {
        self.epoch + Duration::from_millis(tick)
    }
}

impl TimerQueue for Nexus {
    const NAME: &'static str = "nexus-timer";
    type Handle = nexus_timer::TimerHandle<u64>;

    fn new(capacity: usize) -> Self {
        let epoch = Instant::now();
        Nexus {
            wheel: nexus_timer::Wheel::unbounded(capacity.clamp(1024, 1 << 20), epoch),
            epoch,
            buf: Vec::with_capacity(1024),
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> Self::Handle {
        let at = self.at(deadline);
        self.wheel.schedule(at, id)
    }

    #[inline]
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.wheel.cancel(handle).is_some()
    }

    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        let at = self.at(deadline);
        self.wheel.reschedule(handle, at)
    }

    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let at = self.at(now);
        self.buf.clear();
        let n = self
            .wheel
            .poll_and_rebalance_with_limit(at, max, &mut self.buf);
        self.buf.iter().for_each(|&id| fired(id));
        (n, n < max)
    }

    fn next_expiry(&mut self) -> Option<u64> {
        let epoch = self.epoch;
        self.wheel
            .next_deadline()
            .map(|at| at.saturating_duration_since(epoch).as_millis() as u64)
    }

    fn release(&mut self, handle: Self::Handle) {
        self.wheel.free(handle);
    }
}

/// bitwheel with its BTreeMap fail-over (unbounded), configured to cover 1 h at 1 ms:
/// 4 gears of 64 slots, 64 timers per slot, 8 probes, fail-over checked every 32 ticks.
pub struct Bitwheel {
    wheel: Box<bitwheel::timer::BitWheelWithFailover<BwTimer, 4, 1, 64, 8, 32>>,
    epoch: Instant,
    fired: Vec<u64>,
}

/// bitwheel's payload: fires by pushing its id.
pub struct BwTimer(u64);

impl bitwheel::timer::Timer for BwTimer {
    type Context = Vec<u64>;
    fn fire(&mut self, ctx: &mut Vec<u64>) {
        ctx.push(self.0);
    }
}

impl TimerQueue for Bitwheel {
    const NAME: &'static str = "bitwheel";
    const BOUNDED_POLL: bool = false;
    type Handle = bitwheel::timer::TimerHandle;

    fn new(_capacity: usize) -> Self {
        let epoch = Instant::now();
        Bitwheel {
            wheel: bitwheel::timer::BitWheelWithFailover::boxed_with_epoch(epoch),
            epoch,
            fired: Vec::new(),
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> Self::Handle {
        let at = self.epoch + Duration::from_millis(deadline);
        self.wheel.insert(at, BwTimer(id))
    }

    #[inline]
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        self.wheel.cancel(handle).is_some()
    }

    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        let timer = self.wheel.cancel(handle).expect("live handle");
        let at = self.epoch + Duration::from_millis(deadline);
        self.wheel.insert(at, timer)
    }

    /// bitwheel has no bounded poll: `max` is ignored and every due timer fires.
    fn poll(&mut self, now: u64, _max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let at = self.epoch + Duration::from_millis(now);
        self.fired.clear();
        let n = self.wheel.poll(at, &mut self.fired);
        self.fired.iter().for_each(|&id| fired(id));
        (n, true)
    }

    fn next_expiry(&mut self) -> Option<u64> {
        let epoch = self.epoch;
        self.wheel
            .peek_next_fire()
            .map(|at| at.saturating_duration_since(epoch).as_millis() as u64)
    }
}

/// tokio-util's `DelayQueue` (tokio's cascading 6x64 wheel over a slab) on a current-thread
/// runtime with a paused clock, so time moves only when the harness says. Inserts and
/// removes run inside the runtime's context; polls advance the paused clock and drain
/// `poll_expired`.
pub struct TokioDelayQueue {
    queue: tokio_util::time::DelayQueue<u64>,
    rt: tokio::runtime::Runtime,
    epoch: tokio::time::Instant,
    now: u64,
}

impl TokioDelayQueue {
    #[inline]
    fn at(&self, tick: u64) -> tokio::time::Instant {
        self.epoch + Duration::from_millis(tick)
    }
}

impl TimerQueue for TokioDelayQueue {
    const NAME: &'static str = "tokio-delayqueue";
    type Handle = tokio_util::time::delay_queue::Key;

    fn new(capacity: usize) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("tokio runtime");
        let (queue, epoch) = {
            let _guard = rt.enter();
            (
                tokio_util::time::DelayQueue::with_capacity(capacity),
                tokio::time::Instant::now(),
            )
        };
        TokioDelayQueue {
            queue,
            rt,
            epoch,
            now: 0,
        }
    }

    #[inline]
    fn insert(&mut self, deadline: u64, id: u64) -> Self::Handle {
        let _guard = self.rt.enter();
        let at = self.at(deadline);
        self.queue.insert_at(id, at)
    }

    #[inline]
    fn cancel(&mut self, handle: Self::Handle) -> bool {
        let _guard = self.rt.enter();
        self.queue.try_remove(&handle).is_some()
    }

    fn reschedule(&mut self, handle: Self::Handle, deadline: u64) -> Self::Handle {
        let _guard = self.rt.enter();
        let at = self.at(deadline);
        self.queue.reset_at(&handle, at);
        handle
    }

    /// Runs `unconstrained`: tokio's cooperative budget would otherwise make `poll_expired`
    /// return `Pending` after 128 items.
    fn poll(&mut self, now: u64, max: usize, fired: &mut dyn FnMut(u64)) -> (usize, bool) {
        let step = now.saturating_sub(self.now);
        self.now = self.now.max(now);
        let queue = &mut self.queue;
        self.rt.block_on(tokio::task::unconstrained(async move {
            if step > 0 {
                tokio::time::advance(Duration::from_millis(step)).await;
            }
            let mut n = 0;
            std::future::poll_fn(|cx: &mut Context<'_>| {
                while n < max {
                    match queue.poll_expired(cx) {
                        Poll::Ready(Some(expired)) => {
                            fired(expired.into_inner());
                            n += 1;
                        }
                        Poll::Ready(None) | Poll::Pending => return Poll::Ready((n, true)),
                    }
                }
                Poll::Ready((n, false))
            })
            .await
        }))
    }

    fn next_expiry(&mut self) -> Option<u64> {
        let key = self.queue.peek()?;
        let at = self.queue.deadline(&key);
        Some(at.saturating_duration_since(self.epoch).as_millis() as u64)
    }
}
