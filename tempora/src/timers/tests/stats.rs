//! Statistics, groups and limits through the service (manual clock: no test sleeps).

use crate::clock::{ClockId, ManualClock};
use crate::stats::{Counts, GroupStats};
use crate::testing::quiet_panics;
use crate::timers::testing;
use crate::{Error, Notify, SetFlags, Timers};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// A manual-clock service with a 100 µs tick, and its clock.
fn service() -> (Timers, ManualClock) {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |b| {
        b.tick(Duration::from_micros(100));
    });
    (timers, clock)
}

const MS: Duration = Duration::from_millis(1);
const ZERO: Duration = Duration::ZERO;

#[test]
fn counts_equal_the_operations() {
    let (timers, clock) = service();
    let o = timers.owner();
    let a = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let b = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let c = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    // a: periodic 1 ms; b: one-shot 2 ms, re-set after it fired (its event goes stale);
    // c: armed then disarmed.
    o.settime(a, SetFlags::RELATIVE, MS, MS).unwrap();
    o.settime(b, SetFlags::RELATIVE, 2 * MS, ZERO).unwrap();
    o.settime(c, SetFlags::RELATIVE, 5 * MS, ZERO).unwrap();
    o.settime(c, SetFlags::RELATIVE, ZERO, ZERO).unwrap();
    clock.advance(3 * MS + MS / 2);
    timers.poll();
    o.settime(b, SetFlags::RELATIVE, 10 * MS, ZERO).unwrap();
    let ev = o.try_recv().expect("a's event");
    assert_eq!((ev.id, ev.overrun), (a, 2));
    assert!(o.try_recv().is_none(), "b's event is stale");
    o.delete(c).unwrap();
    let s = o.stats();
    assert_eq!(
        s.counts,
        Counts {
            live: 2,
            created: 3,
            deleted: 1,
            armed: 4,
            disarmed: 1,
            expired: 2,
            delivered: 1,
            overruns: 2,
            stale_dropped: 1,
            callback_panics: 0,
            refused: 0,
        }
    );
    assert_eq!(s.owner, o.id());
    let root = timers.stats().root;
    assert_eq!(root.counts, s.counts, "the root sums the one owner");
}

#[test]
fn lateness_is_expiry_to_firing() {
    let (timers, clock) = service();
    let o = timers.owner();
    for late_ms in [1u64, 2, 3, 40] {
        let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
        o.settime(id, SetFlags::RELATIVE, 10 * MS, ZERO).unwrap();
        clock.advance(10 * MS + Duration::from_millis(late_ms));
        timers.poll();
    }
    let st = o.stats();
    let l = st.lateness;
    assert_eq!(l.count, 4, "{st:?}");
    assert_eq!(l.max_ns, 40_000_000, "the maximum is exact");
    assert_eq!(l.sum_ns, 46_000_000);
    let within = |got: u64, truth: u64| got >= truth && got - truth <= truth / 8;
    assert!(within(l.p50_ns, 2_000_000), "p50 {}", l.p50_ns);
    assert!(within(l.p99_ns, 40_000_000), "p99 {}", l.p99_ns);
}

#[test]
fn callbacks_count_deliveries_and_panics() {
    let (timers, clock) = service();
    let o = timers.owner();
    let ok = o
        .create(ClockId::Monotonic, Notify::callback(|_| {}))
        .unwrap();
    let bad = o
        .create(
            ClockId::Monotonic,
            Notify::callback(|_| panic!("a callback panics")),
        )
        .unwrap();
    o.settime(ok, SetFlags::RELATIVE, MS, MS).unwrap();
    o.settime(bad, SetFlags::RELATIVE, MS, ZERO).unwrap();
    quiet_panics(|| {
        clock.advance(MS);
        timers.poll();
        clock.advance(3 * MS);
        timers.poll();
    });
    let c = o.stats().counts;
    assert_eq!((c.expired, c.delivered, c.callback_panics), (3, 3, 1));
    assert_eq!(c.overruns, 2, "ok's second delivery missed two periods");
}

#[test]
fn groups_sum_their_subtree_and_keep_deleted_owners() {
    let (timers, _clock) = service();
    let a = timers.group("a").unwrap();
    let ab = a.subgroup("b").unwrap();
    assert_eq!(ab.path(), "a/b");
    assert_eq!(
        timers.group("a").unwrap().path(),
        "a",
        "the same group again"
    );
    let o1 = a.owner();
    let o2 = ab.owner();
    let o3 = ab.owner();
    let loose = timers.owner();
    for (o, n) in [(&o1, 2), (&o2, 3), (&o3, 4), (&loose, 5)] {
        for _ in 0..n {
            o.create(ClockId::Monotonic, Notify::None).unwrap();
        }
    }
    let s = timers.stats();
    let sum = |g: &GroupStats| g.counts.created;
    assert_eq!(sum(s.root.find("a/b").unwrap()), 7);
    assert_eq!(sum(s.root.find("a").unwrap()), 9);
    assert_eq!(sum(&s.root), 14);
    assert_eq!(s.root.find("a/b").unwrap().owners.len(), 2);
    assert_eq!(s.root.all_owners().len(), 4);
    assert_eq!(ab.live_timers(), 7);
    assert_eq!(a.live_timers(), 9);
    // A deleted owner's timers are deleted; its counts stay in its groups.
    o3.destroy();
    drop(o3);
    let g = ab.stats();
    assert_eq!(
        (g.counts.created, g.counts.deleted, g.counts.live),
        (7, 4, 3)
    );
    assert_eq!(g.owners.len(), 1, "the dropped owner left the member list");
    assert_eq!(ab.live_timers(), 3);
    assert_eq!(a.live_timers(), 5);
    for bad in ["", "x/y", "q\"", "c\n", &"n".repeat(65)] {
        assert!(
            matches!(timers.group(bad), Err(Error::InvalidConfig(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_limit_refuses_creates_anywhere_below_it() {
    let (timers, _clock) = service();
    let top = timers.group("top").unwrap();
    let sub = top.subgroup("sub").unwrap();
    top.set_max_timers(Some(3));
    assert_eq!(top.max_timers(), Some(3));
    let o = sub.owner();
    let ids: Vec<_> = (0..3)
        .map(|_| o.create(ClockId::Monotonic, Notify::None).unwrap())
        .collect();
    let e = o.create(ClockId::Monotonic, Notify::None).unwrap_err();
    assert_eq!(e, Error::LimitReached("top".into()));
    assert_eq!(e.errno(), libc::EAGAIN);
    assert!(o.timers().len() == 3, "a refused create changes nothing");
    o.delete(ids[0]).unwrap();
    o.create(ClockId::Monotonic, Notify::None).unwrap();
    // A lower limit below: the tighter one refuses.
    sub.set_max_timers(Some(1));
    assert_eq!(
        top.owner().create(ClockId::Monotonic, Notify::None),
        Err(Error::LimitReached("top".into()))
    );
    assert_eq!(
        o.create(ClockId::Monotonic, Notify::None),
        Err(Error::LimitReached("top/sub".into()))
    );
    top.set_max_timers(None);
    let c = o.stats().counts;
    assert_eq!((c.created, c.refused, c.live), (4, 2, 3));
    // A failed create (an exact ID in use) gives its charge back.
    sub.set_max_timers(Some(4));
    o.set_restore_ids(true);
    assert_eq!(
        o.create_with_id(ids[1].get(), ClockId::Monotonic, Notify::None),
        Err(Error::IdInUse)
    );
    assert_eq!(sub.live_timers(), 3);
    o.set_restore_ids(false);
    o.create(ClockId::Monotonic, Notify::None).unwrap();
    assert_eq!(sub.live_timers(), 4);
}

/// 4 threads create and delete around a cap of 100 while each watches the group's count: it
/// never passes the cap, even for an instant (20 rounds, fresh groups).
#[test]
fn concurrent_creates_never_pass_a_limit() {
    for round in 0..20 {
        creates_race_a_limit(&format!("capped{round}"));
    }
}

fn creates_race_a_limit(name: &str) {
    let (timers, _clock) = service();
    let g = timers.group(name).unwrap();
    g.set_max_timers(Some(100));
    let owners: Vec<_> = (0..4).map(|_| g.owner()).collect();
    let over = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(owners.len()));
    std::thread::scope(|s| {
        for o in &owners {
            let (g, over, barrier) = (g.clone(), over.clone(), barrier.clone());
            s.spawn(move || {
                barrier.wait();
                let mut mine = Vec::new();
                for round in 0..2_000 {
                    match o.create(ClockId::Monotonic, Notify::None) {
                        Ok(id) => mine.push(id),
                        Err(Error::LimitReached(_)) => {}
                        Err(e) => panic!("{e}"),
                    }
                    if g.live_timers() > 100 {
                        over.store(true, Ordering::Relaxed);
                    }
                    if round % 3 == 0 {
                        if let Some(id) = mine.pop() {
                            o.delete(id).unwrap();
                        }
                    }
                }
            });
        }
    });
    assert!(
        !over.load(Ordering::Relaxed),
        "the live count passed the limit"
    );
    let live: usize = owners.iter().map(|o| o.timers().len()).sum();
    assert!(live <= 100);
    assert_eq!(g.live_timers(), live as u64);
    let c = g.stats().counts;
    assert_eq!(c.live, live as u64);
    assert_eq!(c.created + c.refused, 4 * 2_000);
}

/// Arming and cancelling threads race a thread that flushes without pause; once they are done
/// a last flush finds every update.
#[test]
fn a_flush_racing_updates_loses_nothing() {
    let (timers, _clock) = service();
    let group = timers.group("g").unwrap();
    let owners: Vec<_> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                group.owner()
            } else {
                timers.owner()
            }
        })
        .collect();
    let ids: Vec<_> = owners
        .iter()
        .map(|o| o.create(ClockId::Monotonic, Notify::None).unwrap())
        .collect();
    let done = AtomicBool::new(false);
    let flushes = AtomicU64::new(0);
    const ROUNDS: u64 = 20_000;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let _ = timers.stats();
                flushes.fetch_add(1, Ordering::Relaxed);
            }
        });
        let workers: Vec<_> = (0..3)
            .map(|t| {
                let (owners, ids) = (&owners, &ids);
                let flushes = &flushes;
                s.spawn(move || {
                    // Start once the flusher runs, so that flushes race the updates.
                    while flushes.load(Ordering::Relaxed) == 0 {
                        std::thread::yield_now();
                    }
                    for r in 0..ROUNDS {
                        let k = (r as usize * 7 + t) % owners.len();
                        owners[k]
                            .settime(ids[k], SetFlags::RELATIVE, MS, ZERO)
                            .unwrap();
                        owners[k]
                            .settime(ids[k], SetFlags::RELATIVE, ZERO, ZERO)
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    assert!(flushes.load(Ordering::Relaxed) > 0);
    let s = timers.stats();
    assert_eq!(s.root.counts.armed, 3 * ROUNDS);
    assert_eq!(s.root.counts.disarmed, 3 * ROUNDS);
    let per_owner: u64 = s
        .root
        .all_owners()
        .iter()
        .map(|(_, o)| o.counts.armed)
        .sum();
    assert_eq!(per_owner, 3 * ROUNDS, "the owners sum to the root");
    let g = s.root.find("g").unwrap();
    let members: u64 = g.owners.iter().map(|o| o.counts.armed).sum();
    assert_eq!(g.counts.armed, members, "the group sums its members");
}

#[test]
fn stats_off_counts_nothing_but_limits_hold() {
    let timers = testing::manual(ManualClock::new(), |b| {
        b.stats(false);
    });
    let g = timers.group("g").unwrap();
    g.set_max_timers(Some(1));
    let o = g.owner();
    let id = o.create(ClockId::Monotonic, Notify::None).unwrap();
    o.settime(id, SetFlags::RELATIVE, MS, ZERO).unwrap();
    assert!(matches!(
        o.create(ClockId::Monotonic, Notify::None),
        Err(Error::LimitReached(_))
    ));
    let s = timers.stats();
    assert!(!s.enabled);
    assert_eq!(s.root.counts, Counts::default());
    assert_eq!(g.live_timers(), 1);
}

#[test]
fn prometheus_output_parses_with_the_values() {
    let (timers, clock) = service();
    let g = timers.group("web").unwrap().subgroup("api \\ v\"2\"").err();
    assert!(g.is_some(), "quotes and backslashes are refused in names");
    let api = timers.group("web").unwrap().subgroup("api").unwrap();
    api.set_max_timers(Some(50));
    let o = api.owner();
    let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    o.settime(id, SetFlags::RELATIVE, MS, ZERO).unwrap();
    clock.advance(3 * MS);
    timers.poll();
    let text = timers.stats().to_prometheus();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
    let value = |name: &str, labels: &[(&str, &str)]| {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"));
        match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        }
    };
    let owner = o.id().to_string();
    let me = [("group", "web/api"), ("owner", owner.as_str())];
    assert_eq!(value("tempora_timers_live", &me), 1.0);
    assert_eq!(value("tempora_timers_armed_total", &me), 1.0);
    assert_eq!(value("tempora_timers_expired_total", &me), 1.0);
    assert_eq!(
        value("tempora_group_timers_created_total", &[("group", "web")]),
        1.0
    );
    assert_eq!(
        value("tempora_group_timers_created_total", &[("group", "")]),
        1.0
    );
    assert_eq!(
        value("tempora_group_max_timers", &[("group", "web/api")]),
        50.0
    );
    assert_eq!(value("tempora_lateness_max_seconds", &me), 0.002);
    let summary = scrape
        .samples
        .iter()
        .find(|s| s.metric == "tempora_lateness_seconds" && s.labels.get("owner") == Some(&owner))
        .expect("the owner's lateness summary");
    match &summary.value {
        prometheus_parse::Value::Summary(qs) => {
            let p99 = qs.iter().find(|q| q.quantile == 0.99).unwrap().count;
            assert!((0.002..=0.00225).contains(&p99), "p99 {p99}");
        }
        other => panic!("lateness is not a summary: {other:?}"),
    }
    assert!(value("tempora_base_polls_total", &[("base", "0")]) >= 1.0);
    let stats = timers.stats();
    assert_eq!(
        value("tempora_id_table_buckets", &[]),
        stats.registry.id_table_buckets as f64
    );
    assert_eq!(value("tempora_driver_wakeups_total", &[]), 0.0, "no driver");
}

/// The registry's sizes are in the statistics whether or not the service counts: the table's
/// buckets as built, its bytes, no pooled pages before an owner went.
#[test]
fn the_registrys_sizes_are_statistics_with_counting_off() {
    let timers = testing::manual(ManualClock::new(), |b| {
        b.stats(false).initial_buckets(256);
    });
    let o = timers.owner();
    o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    let stats = timers.stats();
    assert!(!stats.enabled);
    assert_eq!(stats.registry.id_table_buckets, 256);
    assert!(
        stats.registry.id_table_bytes >= 256 * 8,
        "{:?}",
        stats.registry
    );
    assert_eq!(stats.registry.pooled_bytes, 0);
    assert_eq!(stats.drivers.wakeups, 0);
    assert_eq!(stats.drivers.spare_threads, 0);
}

#[cfg(feature = "serde")]
#[test]
fn json_has_the_same_tree() {
    let (timers, _clock) = service();
    let o = timers.group("a").unwrap().owner();
    o.create(ClockId::Monotonic, Notify::None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&timers.stats().to_json()).unwrap();
    assert_eq!(v["root"]["counts"]["created"], 1);
    assert_eq!(v["root"]["groups"][0]["path"], "a");
    assert_eq!(v["root"]["groups"][0]["owners"][0]["owner"], o.id());
    assert_eq!(v["root"]["groups"][0]["owners"][0]["counts"]["live"], 1);
}

/// Owners come and go (each drop may free a tally a flush has just listed) while their timers
/// fire on a driver thread and a flusher runs without pause, under the tests' poisoning
/// allocator (freed memory is overwritten). After quiescence every count equals what the
/// threads did. `TEMPORA_SOAK_SECS` runs it longer (default 0.5 s).
#[test]
fn churn_of_owners_racing_flushes_and_a_driver_loses_nothing() {
    let secs: f64 = std::env::var("TEMPORA_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.5);
    let timers = testing::driven(|b| {
        b.drivers(1);
    });
    let top = timers.group("top").unwrap();
    let leaves = [top.subgroup("a").unwrap(), top.subgroup("b").unwrap()];
    let done = AtomicBool::new(false);
    let (created, armed, delivered) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(secs);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let st = timers.stats();
                // A group never counts more than its subtree's owners did (deleted ones
                // included), nor deletes more than creates.
                let g = st.root.find("top").unwrap();
                assert!(g.counts.deleted <= g.counts.created);
            }
        });
        let workers: Vec<_> = (0..2)
            .map(|t| {
                let (leaves, created, armed, delivered) = (&leaves, &created, &armed, &delivered);
                s.spawn(move || {
                    let mut round = 0usize;
                    while std::time::Instant::now() < deadline {
                        round += 1;
                        let o = leaves[(round + t) % 2].owner();
                        let ids: Vec<_> = (0..16)
                            .map(|_| o.create(ClockId::Monotonic, Notify::Queue).unwrap())
                            .collect();
                        created.fetch_add(16, Ordering::Relaxed);
                        for &id in &ids {
                            o.settime(id, SetFlags::RELATIVE, Duration::from_micros(200), ZERO)
                                .unwrap();
                        }
                        armed.fetch_add(16, Ordering::Relaxed);
                        let mut got = 0;
                        while let Ok(Some(_)) = o.recv_timeout(Duration::from_millis(20)) {
                            got += 1;
                            if got == 8 {
                                break;
                            }
                        }
                        delivered.fetch_add(got, Ordering::Relaxed);
                        if round % 2 == 0 {
                            for id in ids {
                                o.delete(id).unwrap();
                            }
                        }
                        // Dropped: the rest are deleted by its teardown.
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let c = timers.stats().root.counts;
    let created = created.load(Ordering::Relaxed);
    assert!(created > 0);
    assert_eq!(c.created, created);
    assert_eq!(c.deleted, created, "every owner was dropped: all deleted");
    assert_eq!(c.live, 0);
    assert_eq!(c.armed, armed.load(Ordering::Relaxed));
    assert_eq!(c.delivered, delivered.load(Ordering::Relaxed));
    assert!(c.expired >= c.delivered);
    assert_eq!(leaves[0].live_timers() + leaves[1].live_timers(), 0);
    let top = timers.stats().root.find("top").unwrap().counts;
    assert_eq!(top, c, "every owner was in top's subtree");
}

/// A service dropped with updates not yet flushed frees its statistics: a listed slot's
/// reference to its tally must not keep the hub alive through the tally.
#[test]
fn a_dropped_service_frees_its_statistics() {
    let (timers, _clock) = service();
    let hub = Arc::downgrade(&timers.core.stats);
    let o = timers.group("g").unwrap().owner();
    let id = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    o.settime(id, SetFlags::RELATIVE, MS, ZERO).unwrap();
    let tally = Arc::downgrade(&o.sink().tally);
    let group = Arc::downgrade(&o.sink().tally.group);
    drop(o);
    drop(timers);
    assert!(tally.upgrade().is_none(), "the owner's tally leaked");
    assert!(group.upgrade().is_none(), "the group tree leaked");
    assert!(hub.upgrade().is_none(), "the hub leaked");
}

/// `settime` may be called from a signal handler (the timers module's "Signal handlers"), so
/// it allocates nothing, not even the statistics slot of a thread that never counted in the
/// owner before: its count goes to the owner's overflow slot, made with the owner. (Before,
/// such a thread's first `settime` asked the allocator for its slot: the refusal is counted.)
#[test]
fn a_settime_by_a_thread_new_to_the_owner_allocates_nothing_and_is_counted() {
    let (timers, _clock) = service();
    let o = timers.owner();
    let t = o.create(ClockId::Monotonic, Notify::Queue).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            // A thread's first tempora call, made outside a handler (the module doc): its
            // index and epoch registration. `gettime` counts nothing, so the thread still has
            // no statistics slot in the owner.
            o.gettime(t).unwrap();
            let before = crate::alloc::refusals();
            let r = crate::alloc::refusing_allocations(1, || {
                o.settime(t, SetFlags::RELATIVE, MS, ZERO)
            });
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(crate::alloc::refusals(), before, "settime asked for memory");
        });
    });
    assert_eq!(o.stats().counts.armed, 1);
}
