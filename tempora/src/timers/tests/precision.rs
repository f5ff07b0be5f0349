//! Precision (`Precision`): precise, slack and deferrable timers under a manual clock, driven
//! by a simulated driver that sleeps until `Timers::next_deadline`, as a background driver
//! does. Each test fails if its rule is broken.

use crate::clock::ClockId;
use crate::clock::{ClockSource, ManualClock};
use crate::error::Error;
use crate::instant::Instant;
use crate::timers::testing::{self, Manual, TestClock};
use crate::timers::*;
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

const MS: u64 = 1_000_000;
const TICK: u64 = 1_000;
const MAX_DEFERRAL: u64 = 50 * MS;
/// How far the test clock's coarse readings lag.
const LAG: u64 = 4 * MS;

/// A service whose coarse readings lag its manual clock by a pseudo-random amount in
/// `0..=LAG`, as an OS coarse clock does (a slack timer armed from them must still never fire
/// early), and a simulated driver's record.
struct Sim {
    svc: Manual,
    /// (timer, monotonic time of its callback)
    fired: Arc<Mutex<Vec<(TimerId, u64)>>>,
    wakeups: u64,
}

impl std::ops::Deref for Sim {
    type Target = Manual;
    fn deref(&self) -> &Manual {
        &self.svc
    }
}

impl Sim {
    fn new() -> Sim {
        let clock = ManualClock::new();
        let svc = Manual::on(
            &clock,
            TestClock::over(&clock).coarse_lagging(LAG, 1),
            |b| {
                b.max_deferral(Duration::from_nanos(MAX_DEFERRAL));
            },
        );
        Sim {
            svc,
            fired: Arc::default(),
            wakeups: 0,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now(ClockId::Monotonic)
    }

    /// `Timers::next_deadline` in ns, as the simulation counts.
    fn next_deadline(&self) -> Option<u64> {
        self.timers.next_deadline().map(Instant::as_nanos)
    }

    fn create(&self, p: Precision) -> TimerId {
        let (fired, clock) = (self.fired.clone(), self.clock.clone());
        let id = self
            .owner
            .create(
                ClockId::Monotonic,
                Notify::callback(move |f| {
                    let id = f.id();
                    fired
                        .lock()
                        .unwrap()
                        .push((id, clock.now(ClockId::Monotonic)))
                }),
            )
            .unwrap();
        self.owner.set_precision(id, p).unwrap();
        id
    }

    fn arm(&self, id: TimerId, ns: u64) -> u64 {
        let at = self.now() + ns;
        self.owner
            .settime(
                id,
                SetFlags::RELATIVE,
                Duration::from_nanos(ns),
                Duration::ZERO,
            )
            .unwrap();
        at
    }

    /// One driver sleep: to `next_deadline` (or `until`, if earlier: woken for another
    /// reason), then a poll.
    fn step(&mut self, until: Option<u64>) -> bool {
        let Some(d) = self.next_deadline() else {
            return false;
        };
        let to = until.map_or(d, |u| u.min(d)).max(self.now());
        self.clock.advance(Duration::from_nanos(to - self.now()));
        self.wakeups += 1;
        self.timers.poll();
        true
    }
}

/// The latest a timer of precision `p` may fire after its expiry (exclusive for precise and
/// slack, inclusive for deferrable).
fn bound(p: Precision) -> u64 {
    match p {
        Precision::Slack(d) => (d.as_nanos() as u64).max(TICK),
        Precision::Deferrable => MAX_DEFERRAL + TICK,
        _ => TICK,
    }
}

fn precision() -> impl Strategy<Value = Precision> {
    prop_oneof![
        Just(Precision::Precise),
        (0u64..200 * MS).prop_map(|ns| Precision::Slack(Duration::from_nanos(ns))),
        Just(Precision::Deferrable),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every timer fires exactly once, never before its expiry and within its precision's
    /// bound, with the driver waking only at `next_deadline` (plus random extra wake-ups),
    /// across a re-arm of some timers midway (later, earlier, or after they fired).
    #[test]
    fn no_precision_fires_early_and_each_fires_within_its_bound(
        timers in prop::collection::vec((precision(), 1u64..3_000 * MS), 1..30),
        rearm in prop::collection::vec((any::<prop::sample::Index>(), 1u64..3_000 * MS), 0..10),
        midway in 1u64..2_000 * MS,
        extra in prop::collection::vec(1u64..500 * MS, 0..8),
    ) {
        let rearm: Vec<(usize, u64)> = rearm.iter().map(|(ix, v)| (ix.index(timers.len()), *v)).collect();
        fires_within_bounds(&timers, &rearm, midway, &extra)?;
    }
}

/// The property's body: `timers` (precision, value) armed, the driver stepped to `midway`
/// (with `extra` early wake-ups), timers `rearm` (index, value) re-armed, then run out.
fn fires_within_bounds(
    timers: &[(Precision, u64)],
    rearm: &[(usize, u64)],
    midway: u64,
    extra: &[u64],
) -> Result<(), TestCaseError> {
    let mut sim = Sim::new();
    let ids: Vec<_> = timers.iter().map(|&(p, _)| sim.create(p)).collect();
    let mut due: Vec<u64> = timers
        .iter()
        .zip(&ids)
        .map(|(&(_, v), &id)| sim.arm(id, v))
        .collect();
    let start = sim.now();
    let mut extra = extra.iter();
    while sim.now() < start + midway {
        let until = extra
            .next()
            .map(|e| sim.now() + e)
            .unwrap_or(start + midway);
        if !sim.step(Some(until.min(start + midway))) {
            break;
        }
    }
    // Check and clear what fired in phase one, then re-arm some timers.
    let mut fired_once = vec![false; ids.len()];
    let check = |fired: &[(TimerId, u64)],
                 due: &[u64],
                 fired_once: &mut Vec<bool>|
     -> Result<(), TestCaseError> {
        for &(id, at) in fired {
            let i = ids.iter().position(|&x| x == id).unwrap();
            let p = timers[i].0;
            prop_assert!(!fired_once[i], "timer {i} fired twice");
            fired_once[i] = true;
            prop_assert!(
                at >= due[i],
                "{p:?} timer {i} fired {} ns early",
                due[i] - at
            );
            let late = at - due[i];
            match p {
                Precision::Deferrable => prop_assert!(late <= bound(p), "{p:?} {late} ns late"),
                _ => prop_assert!(late < bound(p), "{p:?} timer {i} {late} ns late"),
            }
        }
        Ok(())
    };
    let phase1 = std::mem::take(&mut *sim.fired.lock().unwrap());
    check(&phase1, &due, &mut fired_once)?;
    for &(i, v) in rearm {
        due[i] = sim.arm(ids[i], v);
        fired_once[i] = false;
    }
    while sim.step(None) {}
    let phase2 = std::mem::take(&mut *sim.fired.lock().unwrap());
    check(&phase2, &due, &mut fired_once)?;
    prop_assert!(
        fired_once.iter().all(|&f| f),
        "a timer never fired: {fired_once:?}"
    );
    Ok(())
}

/// A case the property found (CI, session 38): a slack timer re-armed to a later time while
/// waiting fired later than its slack allows.
#[test]
fn a_slack_timer_rearmed_later_fires_within_its_slack() {
    let s8 = Precision::Slack(Duration::from_millis(8));
    let p = Precision::Precise;
    let timers = [
        (p, 1),
        (s8, 1),
        (s8, 1),
        (p, 1),
        (s8, 1),
        (s8, 1),
        (s8, 1),
        (p, 1),
        (s8, 1),
        (p, 1),
        (
            Precision::Slack(Duration::from_nanos(32_768_000)),
            1_327_911_398,
        ),
        (s8, 1),
    ];
    let rearm = [(1, 16_301), (10, 2_285_085_006)];
    fires_within_bounds(&timers, &rearm, 1_333_604_377, &[169_710_437]).unwrap();
}

/// A deferrable timer never makes the next deadline earlier than its bound; a precise one
/// does at its expiry.
#[test]
fn a_deferrable_timer_wakes_nobody_before_its_bound() {
    let sim = Sim::new();
    let d = sim.create(Precision::Deferrable);
    let at = sim.arm(d, 10 * MS);
    assert_eq!(sim.next_deadline(), Some(at + MAX_DEFERRAL));
    let p = sim.create(Precision::Precise);
    let at_p = sim.arm(p, 20 * MS);
    assert_eq!(sim.next_deadline(), Some(at_p));
    // Awake for the precise timer: the deferrable one, due by then, fires in the same poll.
    sim.clock.advance(Duration::from_nanos(at_p - sim.now()));
    assert_eq!(sim.timers.poll(), 2);
    assert_eq!(sim.next_deadline(), None);
}

/// Slack timers due within one granule fire together: one wake-up for all of them, where
/// precise ones take one each.
#[test]
fn slack_timers_share_wake_ups() {
    let count = |p: Precision| {
        let mut sim = Sim::new();
        for i in 0..100 {
            let id = sim.create(p);
            sim.arm(id, 1_000 * MS + i * 3 * MS + 7);
        }
        while sim.step(None) {}
        assert_eq!(sim.fired.lock().unwrap().len(), 100);
        sim.wakeups
    };
    assert_eq!(count(Precision::Precise), 100);
    // 300 ms of expiries, a slack of 100 ms: granules of 8^5 ticks (32.8 ms) at a 1 µs tick.
    let slack = count(Precision::Slack(Duration::from_millis(100)));
    assert!(slack <= 300 / 32 + 2, "{slack} wake-ups");
    let deferrable = count(Precision::Deferrable);
    assert!(deferrable <= 300 / 50 + 2, "{deferrable} wake-ups");
}

/// The owner's default slack applies to timers that do not say, from their next arming; an
/// explicit precision overrides it; `precision` reads back what was set.
#[test]
fn the_owner_default_slack_applies_to_default_timers() {
    let sim = Sim::new();
    let a = sim.create(Precision::Default);
    let b = sim.create(Precision::Precise);
    assert_eq!(sim.owner.precision(a).unwrap(), Precision::Default);
    assert_eq!(sim.owner.default_slack(), None);
    sim.owner
        .set_default_slack(Some(Duration::from_millis(100)));
    assert_eq!(sim.owner.default_slack(), Some(Duration::from_millis(100)));
    let t = sim.now();
    sim.arm(a, 1_000 * MS + 7);
    sim.arm(b, 1_000 * MS + 7);
    // The precise timer's expiry is the earliest deadline; the slack one's is a granule
    // boundary after it.
    let tick_of = |ns: u64| ns.div_ceil(TICK) * TICK;
    assert_eq!(sim.next_deadline(), Some(tick_of(t + 1_000 * MS + 7)));
    sim.owner.delete(b).unwrap();
    let d = sim.next_deadline().unwrap();
    assert!(d > t + 1_000 * MS + 7 && d < t + 1_100 * MS, "{d}");
    assert_eq!(d % (32_768 * TICK), 0, "on a 8^5-tick boundary");
    assert_eq!(
        sim.owner
            .set_precision(TimerId::new(999).unwrap(), Precision::Precise),
        Err(Error::UnknownTimer)
    );
}

/// `set_precision` on an armed timer places it again at once: a precise timer made
/// deferrable stops setting the deadline, and back.
#[test]
fn set_precision_moves_an_armed_timer() {
    let sim = Sim::new();
    let id = sim.create(Precision::Precise);
    let at = sim.arm(id, 10 * MS);
    assert_eq!(sim.next_deadline(), Some(at));
    sim.owner.set_precision(id, Precision::Deferrable).unwrap();
    assert_eq!(sim.next_deadline(), Some(at + MAX_DEFERRAL));
    sim.owner.set_precision(id, Precision::Precise).unwrap();
    assert_eq!(sim.next_deadline(), Some(at));
}

/// A service on a clock whose coarse readings are exact, against a declared lag of `LAG`
/// (its contract allows that): every coarse-armed expiry lands the whole lag after the time.
/// At an arbitrary phase; and its clock.
fn coarse_is_exact() -> (ManualClock, Timers) {
    let clock = ManualClock::new();
    clock.advance(Duration::from_nanos(1_234_567));
    let timers = testing::manual(TestClock::over(&clock).coarse_exact(LAG), |_| ());
    (clock, timers)
}

/// What a recording timer saw: (monotonic time, overrun) of each call.
type Fires = Arc<Mutex<Vec<(u64, i32)>>>;

/// A monotonic timer of `owner` whose callback records each call's time on `clock` and
/// overrun.
fn recording_timer(owner: &Owner, clock: &ManualClock) -> (TimerId, Fires) {
    let fired = Fires::default();
    let (f2, c2) = (fired.clone(), clock.clone());
    let id = owner
        .create(
            ClockId::Monotonic,
            Notify::callback(move |fired| {
                let ov = fired.overrun();
                f2.lock().unwrap().push((c2.now(ClockId::Monotonic), ov))
            }),
        )
        .unwrap();
    (id, fired)
}

/// A one-shot value for an arming at `t` whose coarse-armed expiry (`t + LAG + value`) lands
/// 1 µs past a boundary of `Slack(33 ms)`'s granule with the whole slack as room (`8^5`
/// ticks): the worst case for a placement that forgets the lag.
fn worst_coarse_value(t: u64) -> u64 {
    const G: u64 = 32_768 * TICK;
    ((t + LAG).div_ceil(G) + 30) * G + TICK - (t + LAG)
}

/// Sleeps to each next deadline and polls, as a driver would, until nothing is armed; `f`
/// after each poll.
fn run_out(clock: &ManualClock, timers: &Timers, mut f: impl FnMut()) {
    while let Some(d) = timers.next_deadline().map(Instant::as_nanos) {
        let now = clock.now(ClockId::Monotonic);
        clock.advance(Duration::from_nanos(d.saturating_sub(now)));
        timers.poll();
        f();
    }
}

/// A one-shot slack timer armed from a coarse reading (its expiry up to the lag late) and
/// then placed again with the same expiry, by a precision change or by a re-arm to a later
/// time (left in place, met early, placed again by the poll): each placement must keep the
/// lag out of the slack as the arming did. A placement that uses the whole slack fires it
/// 36.8 ms after its expiry with a 33 ms slack.
#[test]
fn a_coarse_armed_slack_timer_placed_again_keeps_within_its_slack() {
    let slack = 33 * MS;
    for how in ["set_precision", "rearm later"] {
        let (clock, timers) = coarse_is_exact();
        let owner = timers.owner();
        let (id, fired) = recording_timer(&owner, &clock);
        let p = Precision::Slack(Duration::from_nanos(slack));
        owner.set_precision(id, p).unwrap();
        let t = clock.now(ClockId::Monotonic);
        let value = worst_coarse_value(t);
        let arm = |v: u64| {
            owner
                .settime(
                    id,
                    SetFlags::RELATIVE,
                    Duration::from_nanos(v),
                    Duration::ZERO,
                )
                .unwrap()
        };
        if how == "set_precision" {
            arm(value);
            owner.set_precision(id, p).unwrap();
        } else {
            // Armed earlier first, so that the re-arm is to a later time.
            arm(value - 10 * MS);
            arm(value);
        }
        let due = t + value;
        run_out(&clock, &timers, || {});
        let fired = fired.lock().unwrap();
        assert_eq!(fired.len(), 1, "{how}");
        let at = fired[0].0;
        assert!(at >= due, "{how}: early");
        let late = at - due;
        assert!(
            late < slack,
            "{how}: {} µs late, slack {} µs",
            late / 1000,
            slack / 1000
        );
    }
}

/// The same for a restore: the snapshot keeps the remaining time, not whether the expiry came
/// from a coarse reading, so a restored one-shot keeps the lag out of its slack anyway.
#[test]
fn a_restored_coarse_armed_slack_timer_keeps_within_its_slack() {
    let slack = 33 * MS;
    let (clock, timers) = coarse_is_exact();
    let old = timers.owner();
    let id = old.create(ClockId::Monotonic, Notify::Queue).unwrap();
    old.set_precision(id, Precision::Slack(Duration::from_nanos(slack)))
        .unwrap();
    let t = clock.now(ClockId::Monotonic);
    let value = worst_coarse_value(t);
    old.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_nanos(value),
        Duration::ZERO,
    )
    .unwrap();
    let snap = old.checkpoint();
    drop(old);
    let new = timers.owner();
    new.restore(&snap, |_| None).unwrap();
    let due = t + value;
    let mut fired = Vec::new();
    run_out(&clock, &timers, || {
        while new.try_recv().is_some() {
            fired.push(clock.now(ClockId::Monotonic));
        }
    });
    assert_eq!(fired.len(), 1);
    assert!(fired[0] >= due, "early");
    let late = fired[0] - due;
    assert!(
        late < slack,
        "{} µs late, slack {} µs",
        late / 1000,
        slack / 1000
    );
}

/// A periodic slack timer armed while the coarse clock reads the exact time (a lag of 0,
/// which its contract allows, against a declared lag of 4 ms): its every period must fire
/// within `[intended, intended + slack)`, where the k-th intended expiry is the settime
/// time plus `value + (k-1)·interval`. An expiry computed from the coarse reading plus the
/// lag is up to 4 ms late, and re-arms carry that shift into every period with the full
/// slack on top: 36.6 ms late with a 33 ms slack. A periodic arming reads the exact clock.
#[test]
fn a_periodic_slack_timer_keeps_within_its_slack_every_period() {
    let (clock, timers) = coarse_is_exact();
    let owner = timers.owner();
    let (id, fired) = recording_timer(&owner, &clock);
    let slack = 33 * MS;
    owner
        .set_precision(id, Precision::Slack(Duration::from_nanos(slack)))
        .unwrap();
    let period = 100 * MS + 12_345;
    let t_set = clock.now(ClockId::Monotonic);
    owner
        .settime(
            id,
            SetFlags::RELATIVE,
            Duration::from_nanos(period),
            Duration::from_nanos(period),
        )
        .unwrap();
    for _ in 0..200 {
        let d = timers.next_deadline().map(Instant::as_nanos).unwrap();
        let now = clock.now(ClockId::Monotonic);
        clock.advance(Duration::from_nanos(d.saturating_sub(now)));
        timers.poll();
    }
    let fired = fired.lock().unwrap();
    assert!(fired.len() >= 150, "{} fires", fired.len());
    let mut k = 0u64;
    for &(at, overrun) in fired.iter() {
        k += 1 + overrun as u64;
        let intended = t_set + k * period;
        assert!(at >= intended, "period {k} fired early");
        assert!(
            at - intended < slack,
            "period {k} fired {} µs after its expiry, slack {} µs",
            (at - intended) / 1000,
            slack / 1000
        );
    }
}
