//! Round trips under the manual clock, corrupt input, a decoder fuzz (proptest over bytes), and
//! the format pinned to the module doc's table: its bytes and every stored enum's values.

use super::format::{
    clock_from_disk, clock_to_disk, expiry_from_disk, expiry_to_disk, status_from_disk,
    status_to_disk, Reader, HEADER, OWNER_FIELDS, TIMER_FIELDS,
};
use super::*;
use crate::clock::{ClockSource, ManualClock};
use crate::testing::{self, drain};
use crate::{Notify, Owner, Precision, SetFlags, Timers};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: u64 = 1_000_000;

type Log = Arc<Mutex<Vec<(TimerId, i32)>>>;

fn tick(log: &Log) -> Notify {
    let log = log.clone();
    Notify::callback_named("tick", move |id, o| log.lock().unwrap().push((id, o)))
}

/// One timer as an observer sees it: ID, clock, status, gettime (ns), getoverrun.
type Observed = (TimerId, ClockId, Status, (u64, u64), i32);

/// Everything observable of an owner now: listing, settings, overruns.
fn observe(o: &Owner) -> Vec<Observed> {
    let mut v: Vec<_> = o
        .timers()
        .into_iter()
        .map(|t| {
            (
                t.id,
                t.clock,
                t.status,
                o.gettime(t.id).unwrap().as_nanos(),
                o.getoverrun(t.id).unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// One timer of a generated owner.
#[derive(Debug, Clone)]
struct Spec {
    id: i32,
    clock: u8,
    notify: u8,
    abs: bool,
    value_ms: u64,
    interval_ms: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0i32..5000,
        0u8..3,
        0u8..3,
        any::<bool>(),
        0u64..300,
        prop_oneof![Just(0u64), 1u64..50],
    )
        .prop_map(|(id, clock, notify, abs, value_ms, interval_ms)| Spec {
            id,
            clock,
            notify,
            abs,
            value_ms,
            interval_ms,
        })
}

/// Builds an owner from `specs` (IDs sparse or dense, every clock and notification, armed,
/// disarmed, periodic with overruns and pending events after `run_ms`).
fn build(
    clock: &ManualClock,
    timers: &Timers,
    log: &Log,
    specs: &[Spec],
    dense: bool,
    run_ms: u64,
) -> Owner {
    let o = timers.owner();
    o.set_restore_ids(!dense);
    for (i, s) in specs.iter().enumerate() {
        let c = [ClockId::Monotonic, ClockId::Realtime, ClockId::Boottime][s.clock as usize];
        let n = match s.notify {
            0 => Notify::None,
            1 => Notify::Queue,
            _ => tick(log),
        };
        let id = if dense {
            o.create(c, n)
        } else {
            o.create_with_id(s.id, c, n)
        };
        let Ok(id) = id else { continue }; // a duplicate sparse ID: skip it
        let value = Duration::from_millis(s.value_ms);
        let interval = Duration::from_millis(s.interval_ms);
        if s.abs {
            let at = clock.now(c) + s.value_ms * MS;
            o.settime(id, SetFlags::ABSTIME, Duration::from_nanos(at), interval)
                .unwrap();
        } else {
            o.settime(id, SetFlags::RELATIVE, value, interval).unwrap();
        }
        if i % 7 == 3 {
            clock.advance(Duration::from_millis(3));
        }
    }
    clock.advance(Duration::from_millis(run_ms));
    timers.poll();
    // Consume about half the events, leaving the rest pending.
    for _ in 0..o.queued() / 2 {
        o.try_recv();
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// checkpoint → bytes → restore under the manual clock gives the same listing, settings
    /// and overruns, the same next ID, and the same deliveries from then on.
    #[test]
    fn round_trip_restores_the_same_timers_and_future(
        specs in proptest::collection::vec(spec(), 0..40),
        dense in any::<bool>(),
        run_ms in 0u64..200,
        steps in proptest::collection::vec(1u64..60, 1..12),
    ) {
        let ca = ManualClock::new();
        let ta = testing::manual(ca.clone(), |_| ());
        let log_a: Log = Arc::default();
        let a = build(&ca, &ta, &log_a, &specs, dense, run_ms);
        let bytes = a.checkpoint().encode();
        let before = log_a.lock().unwrap().len(); // callbacks run before the checkpoint
        let snap = Snapshot::decode(&bytes).unwrap();
        prop_assert_eq!(&snap, &a.checkpoint(), "encode/decode is lossless");

        // Another process: its own clock, at another monotonic time, the same wall clock.
        let cb = ManualClock::new();
        cb.advance(Duration::from_secs(3600));
        cb.set_realtime(ca.now(ClockId::Realtime));
        let tb = testing::manual(cb.clone(), |_| ());
        let log_b: Log = Arc::default();
        let b = tb.owner();
        b.restore(&snap, |name| (name == "tick").then(|| tick(&log_b))).unwrap();

        prop_assert_eq!(observe(&a), observe(&b));
        prop_assert_eq!(a.restore_ids(), b.restore_ids());
        for step in steps {
            for c in [&ca, &cb] {
                c.advance(Duration::from_millis(step));
            }
            ta.poll();
            tb.poll();
            prop_assert_eq!(drain(&a), drain(&b));
            prop_assert_eq!(observe(&a), observe(&b));
        }
        let (la, lb) = (log_a.lock().unwrap().clone(), log_b.lock().unwrap().clone());
        let mut la = la[before..].to_vec();
        let mut lb = lb;
        la.sort();
        lb.sort();
        prop_assert_eq!(la, lb, "the same callbacks with the same overruns");
        a.set_restore_ids(false);
        b.set_restore_ids(false);
        prop_assert_eq!(
            a.create(ClockId::Monotonic, Notify::None).ok(),
            b.create(ClockId::Monotonic, Notify::None).ok(),
            "the counter continues where it was"
        );
    }

}

fn fuzz_cases() -> u32 {
    std::env::var("TEMPORA_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000)
}

proptest! {
    // The decoder fuzz: bounded in CI (4000 cases each), `TEMPORA_FUZZ_CASES` for longer.
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    /// The decoder never panics on arbitrary bytes; what it accepts re-encodes to itself.
    #[test]
    fn decoder_fuzz_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(s) = Snapshot::decode(&bytes) {
            prop_assert_eq!(Snapshot::decode(&s.encode()).unwrap(), s);
        }
    }

    /// ... nor on valid snapshots with bytes changed (behind a fixed checksum, so the parser
    /// itself is exercised, not only the checksum).
    #[test]
    fn decoder_fuzz_mutated_snapshots(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut bytes = sample().encode();
        for (at, v) in edits {
            let i = HEADER + at % (bytes.len() - HEADER);
            bytes[i] = v;
        }
        bytes.truncate(HEADER + cut % (bytes.len() - HEADER + 1));
        let crc = crc32c::crc32c(&bytes[HEADER..]);
        let len = (bytes.len() - HEADER) as u64;
        bytes[12..20].copy_from_slice(&len.to_le_bytes());
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
        if let Ok(s) = Snapshot::decode(&bytes) {
            prop_assert_eq!(Snapshot::decode(&s.encode()).unwrap(), s);
        }
    }
}

/// A snapshot with a bit of everything.
fn sample() -> Snapshot {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log: Log = Arc::default();
    let specs: Vec<Spec> = (0..6)
        .map(|i| Spec {
            id: i * 100,
            clock: (i % 3) as u8,
            notify: (i % 3) as u8,
            abs: i % 2 == 0,
            value_ms: 10 + i as u64,
            interval_ms: if i % 2 == 0 { 5 } else { 0 },
        })
        .collect();
    let o = build(&clock, &timers, &log, &specs, false, 40);
    o.set_default_slack(Some(Duration::from_millis(3)));
    o.checkpoint()
}

/// The owner's default slack goes into the snapshot and comes back with a restore, before
/// its timers are armed (those of `Default` precision are placed with it); a failed restore
/// puts the old one back.
#[test]
fn restore_puts_back_the_default_slack() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let a = timers.owner();
    a.set_default_slack(Some(Duration::from_millis(20)));
    let id = a.create(ClockId::Monotonic, Notify::Queue).unwrap();
    a.settime(
        id,
        SetFlags::RELATIVE,
        Duration::from_millis(100),
        Duration::ZERO,
    )
    .unwrap();
    let snap = a.checkpoint();
    assert_eq!(snap.default_slack, Some(Duration::from_millis(20)));
    let snap = Snapshot::decode(&snap.encode()).unwrap();
    let b = timers.owner();
    b.restore(&snap, |_| None).unwrap();
    assert_eq!(b.default_slack(), Some(Duration::from_millis(20)));
    // The restored timer is placed with the slack: not due at its expiry's tick, due by the
    // end of its slack.
    clock.advance(Duration::from_millis(100));
    timers.poll();
    let fired_at_expiry = b.try_recv().is_some();
    clock.advance(Duration::from_millis(20));
    timers.poll();
    assert!(
        fired_at_expiry || b.try_recv().is_some(),
        "fired within its slack"
    );
    // A restore that fails (the owner has timers) keeps the owner's own default slack.
    let c = timers.owner();
    c.set_default_slack(Some(Duration::from_millis(1)));
    c.create(ClockId::Monotonic, Notify::Queue).unwrap();
    assert!(c.restore(&snap, |_| None).is_err());
    assert_eq!(c.default_slack(), Some(Duration::from_millis(1)));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().encode();
    for n in 0..bytes.len() {
        assert!(
            Snapshot::decode(&bytes[..n]).is_err(),
            "accepted {n} of {} bytes",
            bytes.len()
        );
    }
    assert!(Snapshot::decode(&bytes).is_ok());
}

#[test]
fn every_single_bit_flip_is_an_error_except_in_the_minor_version() {
    let snap = sample();
    let bytes = snap.encode();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            match Snapshot::decode(&b) {
                Ok(s) => {
                    assert!((10..12).contains(&i), "flip at byte {i} bit {bit} accepted");
                    assert_eq!(s, snap, "a newer minor version reads the same");
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

#[test]
fn wrong_magic_newer_major_and_newer_minor() {
    let bytes = sample().encode();
    let mut b = bytes.clone();
    b[0] = b'X';
    assert!(matches!(Snapshot::decode(&b), Err(Error::CorruptSnapshot(m)) if m.contains("magic")));
    let mut b = bytes.clone();
    b[8..10].copy_from_slice(&2u16.to_le_bytes());
    let e = Snapshot::decode(&b).unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnsupportedSnapshot {
                found: (2, 2),
                supported: 1
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "snapshot format 2.2 is newer than this build reads (1.x)"
    );
    assert_eq!(e.errno(), libc::EINVAL);
    // A newer minor version appends a field to every record: this reader skips it.
    let snap = sample();
    let mut p = Vec::new();
    let mut r = Reader::new(&bytes[HEADER..], HEADER);
    let owner = r.record(OWNER_FIELDS, "owner").unwrap();
    p.extend_from_slice(&((owner.data.len() + 3) as u16).to_le_bytes());
    p.extend_from_slice(owner.data);
    p.extend_from_slice(b"new");
    while r.left() > 0 {
        let t = r.record(TIMER_FIELDS, "timer").unwrap();
        p.extend_from_slice(&((t.data.len() + 5) as u16).to_le_bytes());
        p.extend_from_slice(t.data);
        p.extend_from_slice(b"extra");
    }
    let mut b = bytes[..HEADER].to_vec();
    b[10..12].copy_from_slice(&7u16.to_le_bytes());
    b[12..20].copy_from_slice(&(p.len() as u64).to_le_bytes());
    b[20..24].copy_from_slice(&crc32c::crc32c(&p).to_le_bytes());
    b.extend_from_slice(&p);
    assert_eq!(Snapshot::decode(&b).unwrap(), snap);
}

/// Re-frames a payload edited by `f` with a valid header and checksum.
fn reframe(snap: &Snapshot, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let bytes = snap.encode();
    let mut p = bytes[HEADER..].to_vec();
    f(&mut p);
    let mut b = bytes[..HEADER].to_vec();
    b[12..20].copy_from_slice(&(p.len() as u64).to_le_bytes());
    b[20..24].copy_from_slice(&crc32c::crc32c(&p).to_le_bytes());
    b.extend_from_slice(&p);
    b
}

fn corrupt_msg(bytes: &[u8]) -> String {
    match Snapshot::decode(bytes) {
        Err(Error::CorruptSnapshot(m)) => m,
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn absurd_counts_lengths_duplicates_and_times_are_refused() {
    let snap = sample();
    // count = u32::MAX: refused before any allocation for it.
    let b = reframe(&snap, |p| p[7..11].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert!(corrupt_msg(&b).contains("cannot fit"));
    // A record length beyond the data.
    let b = reframe(&snap, |p| {
        p[19..21].copy_from_slice(&u16::MAX.to_le_bytes())
    });
    assert!(corrupt_msg(&b).contains("truncated"));
    // A record length below its fields.
    let b = reframe(&snap, |p| p[19..21].copy_from_slice(&3u16.to_le_bytes()));
    assert!(corrupt_msg(&b).contains("at least"));
    // Duplicate IDs.
    let mut dup = snap.clone();
    dup.timers[1].id = dup.timers[0].id;
    assert!(corrupt_msg(&dup.encode_unchecked()).contains("duplicate"));
    // Times out of range.
    let mut bad = snap.clone();
    bad.timers[0].interval = -5;
    assert!(corrupt_msg(&bad.encode_unchecked()).contains("interval"));
    let mut bad = snap.clone();
    bad.timers[0].clock = ClockId::Realtime;
    bad.timers[0].expiry = Expiry::Realtime(-1);
    bad.timers[0].status = Status::Armed;
    assert!(corrupt_msg(&bad.encode_unchecked()).contains("realtime"));
    let mut bad = snap.clone();
    bad.timers[0].overrun = -2;
    assert!(corrupt_msg(&bad.encode_unchecked()).contains("overrun"));
    let mut bad = snap;
    bad.timers[0].status = Status::Armed;
    bad.timers[0].expiry = Expiry::None;
    assert!(corrupt_msg(&bad.encode_unchecked()).contains("without an expiry"));
}

#[test]
fn a_failed_restore_leaves_the_owner_unchanged() {
    let snap = sample();
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let o = timers.owner();
    // An unknown name: nothing created.
    let e = o.restore(&snap, |_| None).unwrap_err();
    assert!(
        matches!(e, Error::UnknownNotify(ref n) if n == "tick"),
        "{e}"
    );
    assert!(o.timers().is_empty());
    assert!(!o.restore_ids());
    // An ID beyond a smaller owner's ID space fails midway: what was made is undone.
    let small_timers = testing::manual(clock.clone(), |b| {
        b.id_bits(8);
    });
    let small = small_timers.owner();
    let e = small.restore(&snap, |_| Some(Notify::None)).unwrap_err();
    assert!(matches!(e, Error::InvalidId), "{e}");
    assert!(small.timers().is_empty(), "all or nothing");
    assert!(!small.restore_ids());
    assert_eq!(small.default_slack(), None, "the default slack put back");
    assert_eq!(
        small
            .create(ClockId::Monotonic, Notify::None)
            .unwrap()
            .get(),
        0,
        "counter back"
    );
    // A non-empty owner is refused.
    let busy = timers.owner();
    busy.create(ClockId::Monotonic, Notify::None).unwrap();
    let e = busy.restore(&snap, |_| Some(Notify::None)).unwrap_err();
    assert!(matches!(e, Error::IdInUse), "{e}");
}

#[test]
fn files_are_written_atomically_and_verified_on_load() {
    let dir = std::env::temp_dir().join(format!("tempora-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("owner.ckpt");
    let snap = sample();
    snap.save_to(&path).unwrap();
    assert_eq!(Snapshot::load_from(&path).unwrap(), snap);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Snapshot::load_from(&path),
        Err(Error::CorruptSnapshot(_))
    ));
    let e = Snapshot::load_from(dir.join("missing")).unwrap_err();
    assert_eq!(e.errno(), libc::ENOENT);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two threads of one process saving to the same path at once: each save is whole and
/// succeeds, and the file is one of the two snapshots, never a mix. With the temporary file
/// named by the process ID alone, the threads shared it: one truncated what the other was
/// writing, and one's rename moved the other's file away mid-write (its rename then failed).
#[test]
fn concurrent_saves_to_one_path_stay_whole() {
    let dir = std::env::temp_dir().join(format!("tempora-ckpt-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("owner.ckpt");
    let small = Snapshot {
        timers: Vec::new(),
        ..sample()
    };
    let big = sample();
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for snap in [&small, &big] {
            let (path, barrier) = (&path, &barrier);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..300 {
                    snap.save_to(path).expect("a save failed");
                }
            });
        }
    });
    let got = Snapshot::load_from(&path).unwrap();
    assert!(got == small || got == big);
    let left = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(left, 1, "temporary files left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `Error::Io` keeps the `io::Error` as its source; errno and equality still work.
#[test]
fn io_errors_keep_the_io_error_as_source() {
    use std::error::Error as _;
    let missing = std::env::temp_dir().join(format!("tempora-missing-{}", std::process::id()));
    let e = Snapshot::load_from(&missing).unwrap_err();
    assert_eq!(e.errno(), libc::ENOENT);
    let io = e
        .source()
        .expect("a source")
        .downcast_ref::<std::io::Error>()
        .expect("the io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(io.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(e.clone(), e);
    assert_eq!(Snapshot::load_from(&missing).unwrap_err(), e);
    let other = Error::from(std::io::Error::from_raw_os_error(libc::EACCES));
    assert_ne!(other, e);
    assert_eq!(other.errno(), libc::EACCES);
    assert!(e.to_string().contains("No such file"), "{e}");
}

/// `/dev/zero` is endless: loading it reads the header, sees it is no snapshot, and stops.
#[test]
fn load_from_dev_zero_fails_fast_with_bounded_memory() {
    let t = std::time::Instant::now();
    let e = Snapshot::load_from("/dev/zero").unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("magic")),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// A reader of endless bytes after a given start, counting what was read.
struct Endless<'a> {
    start: &'a [u8],
    fill: u8,
    read: u64,
}

impl std::io::Read for Endless<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len();
        for (i, b) in buf.iter_mut().enumerate() {
            let at = self.read as usize + i;
            *b = self.start.get(at).copied().unwrap_or(self.fill);
        }
        self.read += n as u64;
        Ok(n)
    }
}

/// Endless input is read only as far as its header declares (plus one byte): an absurd length
/// is refused after the header, endless zeros after the header's bytes, endless data after a
/// valid header after the declared length.
#[test]
fn read_from_endless_input_reads_a_bounded_amount() {
    let good = sample().encode();
    let mut zeros = Endless {
        start: &[],
        fill: 0,
        read: 0,
    };
    let e = Snapshot::read_from(&mut zeros).unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("magic")),
        "{e}"
    );
    assert!(zeros.read <= 8192, "read {} bytes", zeros.read);
    for len in [MAX_PAYLOAD + 1, u64::MAX] {
        let mut h = good[..HEADER].to_vec();
        h[12..20].copy_from_slice(&len.to_le_bytes());
        let mut r = Endless {
            start: &h,
            fill: 7,
            read: 0,
        };
        let e = Snapshot::read_from(&mut r).unwrap_err();
        assert!(
            matches!(e, Error::CorruptSnapshot(ref m) if m.contains("more than")),
            "{e}"
        );
        assert!(r.read <= 8192, "read {} bytes", r.read);
    }
    let mut trailing = Endless {
        start: &good,
        fill: 7,
        read: 0,
    };
    let e = Snapshot::read_from(&mut trailing).unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("more data")),
        "{e}"
    );
    assert!(
        trailing.read <= good.len() as u64 + 8192,
        "read {} bytes",
        trailing.read
    );
    assert_eq!(Snapshot::read_from(&good[..]).unwrap(), sample());
    assert!(Snapshot::read_from(&good[..good.len() - 1]).is_err());
    assert!(Snapshot::read_from(&good[..5]).is_err());
}

/// A regular file's size is checked against its header before its payload is read.
#[test]
fn load_from_checks_the_file_size_against_the_header() {
    let dir = std::env::temp_dir().join(format!("tempora-ckpt-size-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("owner.ckpt");
    let good = sample().encode();
    for (what, bytes) in [
        ("short", good[..good.len() - 3].to_vec()),
        ("long", [&good[..], b"xyz"].concat()),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let e = Snapshot::load_from(&path).unwrap_err();
        assert!(
            matches!(e, Error::CorruptSnapshot(ref m) if m.contains("the file has")),
            "{what}: {e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn encoded(s: &Snapshot) -> Result<Vec<u8>, Error> {
    s.try_encode()
}

/// Names near and past what a record's `u16` lengths hold, in ASCII and in 2-, 3- and 4-byte
/// characters (so a cut at 65,535 bytes falls inside a character): either the bytes decode
/// to the same snapshot, or encoding refuses; it never writes bytes decode refuses.
#[test]
fn long_and_multibyte_names_encode_exactly_or_are_refused() {
    let max = u16::MAX as usize - TIMER_FIELDS - 8;
    for unit in ["a", "é", "€", "𝄞"] {
        for len in [
            max - 4,
            max - 1,
            max,
            max + 1,
            max + 2,
            65_534,
            65_535,
            65_536,
            70_000,
        ] {
            let name: String = unit.repeat(len.div_ceil(unit.len()));
            let mut snap = sample();
            snap.timers[2].notify = name.clone().into();
            match encoded(&snap) {
                Ok(bytes) => {
                    let back = Snapshot::decode(&bytes).unwrap_or_else(|e| {
                        panic!(
                            "a {}-byte name of {unit:?}: decode refuses what encode wrote: {e}",
                            name.len()
                        )
                    });
                    assert_eq!(back, snap, "a {}-byte name", name.len());
                }
                Err(e) => {
                    assert!(name.len() > max, "a {}-byte name refused: {e}", name.len());
                    assert!(
                        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("name")),
                        "{e}"
                    );
                }
            }
        }
    }
}

/// Hand-built snapshots (the fields are public) that break a rule are refused by restore with
/// the very error decode gives for their bytes and encode gives for them, and nothing is
/// created.
#[test]
fn restore_refuses_what_decode_refuses() {
    let good = sample();
    let queue = good
        .timers
        .iter()
        .position(|t| t.notify == "queue" && t.interval > 0)
        .expect("a periodic queue timer");
    type Edit = fn(&mut TimerRecord);
    let cases: &[(&str, Edit)] = &[
        ("interval", |t| t.interval = -1),
        ("interval", |t| t.interval = i64::MIN),
        ("realtime", |t| {
            t.clock = ClockId::Realtime;
            t.status = Status::Armed;
            t.expiry = Expiry::Realtime(-1);
        }),
        ("realtime", |t| {
            t.clock = ClockId::Monotonic;
            t.status = Status::Armed;
            t.expiry = Expiry::Realtime(5);
        }),
        ("remaining", |t| {
            t.clock = ClockId::Realtime;
            t.status = Status::Armed;
            t.expiry = Expiry::Remaining {
                clock: ClockId::Realtime,
                ns: 5,
            };
        }),
        ("remaining", |t| {
            t.clock = ClockId::Monotonic;
            t.status = Status::Armed;
            t.expiry = Expiry::Remaining {
                clock: ClockId::Boottime,
                ns: 5,
            };
        }),
        ("overrun", |t| t.overrun = -2),
        ("overrun", |t| t.overrun_last = -1),
        ("without an expiry", |t| {
            t.status = Status::Armed;
            t.expiry = Expiry::None;
        }),
        ("one-shot", |t| {
            t.status = Status::RequeuePending;
            t.interval = 0;
        }),
        ("pending", |t| {
            t.status = Status::RequeuePending;
            t.pending = false;
        }),
        ("pending", |t| {
            t.status = Status::Armed;
            t.pending = true;
        }),
        ("pending", |t| {
            t.notify = "none".into();
            t.pending = true;
        }),
    ];
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    for (i, (what, edit)) in cases.iter().enumerate() {
        let mut bad = good.clone();
        edit(&mut bad.timers[queue]);
        let o = timers.owner();
        let e = o
            .restore(&bad, |_| Some(Notify::None))
            .expect_err(&format!("case {i} ({what}) restored"));
        assert!(
            matches!(e, Error::CorruptSnapshot(ref m) if m.contains(what)),
            "case {i}: {e}"
        );
        assert_eq!(
            Snapshot::decode(&bad.encode_unchecked()),
            Err(e.clone()),
            "case {i}"
        );
        assert_eq!(bad.try_encode(), Err(e), "case {i}");
        assert!(o.timers().is_empty(), "case {i}: nothing created");
        assert!(!o.restore_ids(), "case {i}: mode unchanged");
    }
    // Duplicate IDs, as before.
    let mut dup = good.clone();
    dup.timers[1].id = dup.timers[0].id;
    let o = timers.owner();
    let e = o.restore(&dup, |_| Some(Notify::None)).unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("duplicate")),
        "{e}"
    );
    assert!(o.timers().is_empty());
}

/// Remaining times at the ends of `i64` are valid (long passed, far away): restored without
/// overflow, the first due at once, the second never.
#[test]
fn extreme_remaining_times_restore_without_overflow() {
    let mut snap = sample();
    let q = snap
        .timers
        .iter()
        .position(|t| t.notify == "queue")
        .expect("a queue timer");
    let id = snap.timers[q].id;
    snap.timers[q].clock = ClockId::Monotonic;
    snap.timers[q].status = Status::Armed;
    snap.timers[q].pending = false;
    snap.timers[q].interval = 0;
    snap.timers[q].expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: i64::MIN,
    };
    let mut far = snap.clone();
    far.timers[q].expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: i64::MAX,
    };
    for s in [&snap, &far] {
        assert_eq!(&Snapshot::decode(&encoded(s).unwrap()).unwrap(), s);
    }
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let timers = testing::manual(clock.clone(), |_| ());
    let past = timers.owner();
    past.restore(&snap, |_| Some(Notify::None)).unwrap();
    timers.poll();
    assert!(drain(&past).iter().any(|e| e.id == id), "due at once");
    let later = timers.owner();
    later.restore(&far, |_| Some(Notify::None)).unwrap();
    clock.advance(Duration::from_secs(3600));
    timers.poll();
    assert!(!drain(&later).iter().any(|e| e.id == id), "never due");
    let (value, _) = later.gettime(id).unwrap().as_nanos();
    assert!(value > i64::MAX as u64 / 2, "{value}");
}

/// A snapshot encode refuses is not saved: no file, no temporary file.
#[test]
fn save_to_refuses_an_unencodable_snapshot_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("tempora-ckpt-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut snap = sample();
    snap.timers[2].notify = "é".repeat(MAX_NAME).into();
    let e = snap.save_to(dir.join("owner.ckpt")).unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("name")),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One timer record as the module doc's table lays it out, every enum given as the literal
/// value the table documents.
#[allow(clippy::too_many_arguments)]
fn record_bytes(
    id: i32,
    clock: i32,
    status: u8,
    pending: u8,
    kind: u8,
    expiry_clock: i32,
    expiry: i64,
    interval: i64,
    overrun: i64,
    overrun_last: i32,
    name: &str,
    precision: Option<u64>,
) -> Vec<u8> {
    let mut r = Vec::new();
    let tail = if precision.is_some() { 8 } else { 0 };
    r.extend_from_slice(&(45 + name.len() as u16 + tail).to_le_bytes());
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&clock.to_le_bytes());
    r.push(status);
    r.push(pending);
    r.push(kind);
    r.extend_from_slice(&expiry_clock.to_le_bytes());
    r.extend_from_slice(&expiry.to_le_bytes());
    r.extend_from_slice(&interval.to_le_bytes());
    r.extend_from_slice(&overrun.to_le_bytes());
    r.extend_from_slice(&overrun_last.to_le_bytes());
    r.extend_from_slice(&(name.len() as u16).to_le_bytes());
    r.extend_from_slice(name.as_bytes());
    if let Some(p) = precision {
        r.extend_from_slice(&p.to_le_bytes());
    }
    r
}

/// The exact bytes of a hand-built snapshot holding every status, clock and expiry kind,
/// written out from the module doc's table with literal values (clocks as their `clockid_t`
/// numbers): reordering an in-memory enum cannot change what is on disk unnoticed.
#[test]
fn encoding_matches_the_documented_table_byte_for_byte() {
    let id = |n| TimerId::new(n).unwrap();
    let snap = Snapshot {
        counter: 42,
        restore_ids: true,
        default_slack: Some(Duration::from_millis(7)),
        timers: vec![
            TimerRecord {
                id: id(3),
                clock: ClockId::Monotonic,
                notify: "none".into(),
                status: Status::Disarmed,
                pending: false,
                expiry: Expiry::None,
                interval: 0,
                overrun: -1,
                overrun_last: 0,
                precision: Precision::Default,
            },
            TimerRecord {
                id: id(5),
                clock: ClockId::Realtime,
                notify: "queue".into(),
                status: Status::Armed,
                pending: false,
                expiry: Expiry::Remaining {
                    clock: ClockId::Monotonic,
                    ns: 1_500,
                },
                interval: 0,
                overrun: -1,
                overrun_last: 0,
                precision: Precision::Precise,
            },
            TimerRecord {
                id: id(7),
                clock: ClockId::Boottime,
                notify: "tick".into(),
                status: Status::RequeuePending,
                pending: true,
                expiry: Expiry::Remaining {
                    clock: ClockId::Boottime,
                    ns: -20,
                },
                interval: 10,
                overrun: 2,
                overrun_last: 1,
                precision: Precision::Slack(Duration::from_millis(5)),
            },
            TimerRecord {
                id: id(9),
                clock: ClockId::Realtime,
                notify: "é".into(),
                status: Status::Armed,
                pending: false,
                expiry: Expiry::Realtime(1_767_225_600_000_000_000),
                interval: 0,
                overrun: -1,
                overrun_last: 3,
                precision: Precision::Deferrable,
            },
        ],
    };
    // Format 1.2; the same records in 1.1 (no default slack: read as none) and 1.0 (no
    // precision either: read as `Default`).
    let tails = [
        Some(0),
        Some(1 << 62),
        Some(2 << 62 | 5_000_000),
        Some(3 << 62),
    ];
    let bytes = |tails: [Option<u64>; 4], slack: Option<u64>, minor: u8| {
        let mut p = vec![9, 0, 42, 0, 0, 0, 1, 4, 0, 0, 0];
        if let Some(ns) = slack {
            p[0] = 17;
            p.extend_from_slice(&ns.to_le_bytes());
        }
        p.extend(record_bytes(
            3, 1, 0, 0, 0, 0, 0, 0, -1, 0, "none", tails[0],
        ));
        p.extend(record_bytes(
            5, 0, 1, 0, 1, 1, 1_500, 0, -1, 0, "queue", tails[1],
        ));
        p.extend(record_bytes(
            7, 7, 2, 1, 1, 7, -20, 10, 2, 1, "tick", tails[2],
        ));
        p.extend(record_bytes(
            9,
            0,
            1,
            0,
            2,
            0,
            1_767_225_600_000_000_000,
            0,
            -1,
            3,
            "é",
            tails[3],
        ));
        let mut want = b"TEMPORA\x1a".to_vec();
        want.extend_from_slice(&[1, 0, minor, 0]);
        want.extend_from_slice(&(p.len() as u64).to_le_bytes());
        want.extend_from_slice(&crc32c::crc32c(&p).to_le_bytes());
        want.extend_from_slice(&p);
        want
    };
    let want = bytes(tails, Some(7_000_000), 2);
    assert_eq!(snap.try_encode().unwrap(), want);
    assert_eq!(Snapshot::decode(&want).unwrap(), snap);
    let mut old = snap.clone();
    old.default_slack = None;
    assert_eq!(Snapshot::decode(&bytes(tails, None, 1)).unwrap(), old);
    old.timers
        .iter_mut()
        .for_each(|t| t.precision = Precision::Default);
    assert_eq!(Snapshot::decode(&bytes([None; 4], None, 0)).unwrap(), old);
}

/// Every stored enum's on-disk value, as the module doc's table documents it, both ways; any
/// other value reads as nothing. A new variant fails to compile in the `*_to_disk` matches,
/// and a reordered enum fails here, never silently changing the format.
#[test]
fn every_stored_enum_maps_to_its_documented_value() {
    let statuses = [
        (Status::Disarmed, 0u8),
        (Status::Armed, 1),
        (Status::RequeuePending, 2),
    ];
    for (status, byte) in statuses {
        assert_eq!(status_to_disk(status), byte, "{status:?}");
        assert_eq!(status_from_disk(byte), Some(status), "{byte}");
    }
    for byte in 0..=u8::MAX {
        if !statuses.iter().any(|&(_, b)| b == byte) {
            assert_eq!(status_from_disk(byte), None, "status {byte}");
        }
    }

    let clocks = [
        (ClockId::Realtime, 0i32),
        (ClockId::Monotonic, 1),
        (ClockId::Boottime, 7),
    ];
    for (clock, raw) in clocks {
        assert_eq!(clock_to_disk(clock), raw, "{clock:?}");
        assert_eq!(clock_from_disk(raw), Some(clock), "{raw}");
    }
    for raw in (-300..300).chain([i32::MIN, i32::MAX]) {
        if !clocks.iter().any(|&(_, r)| r == raw) {
            assert_eq!(clock_from_disk(raw), None, "clock {raw}");
        }
    }

    let expiries = [
        (Expiry::None, (0u8, 0i32, 0i64)),
        (
            Expiry::Remaining {
                clock: ClockId::Monotonic,
                ns: -3,
            },
            (1, 1, -3),
        ),
        (
            Expiry::Remaining {
                clock: ClockId::Boottime,
                ns: 9,
            },
            (1, 7, 9),
        ),
        (Expiry::Realtime(5), (2, 0, 5)),
    ];
    for (expiry, (kind, clock, ns)) in expiries {
        assert_eq!(expiry_to_disk(expiry), (kind, clock, ns), "{expiry:?}");
        assert_eq!(expiry_from_disk(kind, clock, ns), Ok(expiry), "{kind}");
    }
    // The fields a kind does not use are not read.
    assert_eq!(expiry_from_disk(0, 99, 7), Ok(Expiry::None));
    assert_eq!(expiry_from_disk(2, 99, 7), Ok(Expiry::Realtime(7)));
    assert_eq!(
        expiry_from_disk(1, 99, 7),
        Err(Error::CorruptSnapshot("remaining time on clock 99".into()))
    );
    for kind in 3..=u8::MAX {
        assert_eq!(
            expiry_from_disk(kind, 0, 0),
            Err(Error::CorruptSnapshot(format!("expiry kind {kind}")))
        );
    }
}

/// A restore racing another thread's creates in the same owner: no two timers share an ID,
/// a restore that succeeds has every snapshot ID, and one that fails (the owner was not
/// empty) leaves only the other thread's timers. The restore's exact-ID creates skip the
/// uniqueness walk while other creates wait (`registry::Owner::exclusive`). The snapshot's
/// records go from the highest ID down and the other thread starts once the restore has made
/// a timer, so without the wait its counter IDs (0, 1, ...) are ones the restore makes again
/// later.
#[test]
fn a_restore_racing_creates_in_its_owner_leaves_every_id_unique() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let src = timers.owner();
    src.set_restore_ids(true);
    for i in 0..2000 {
        src.create_with_id(i, ClockId::Monotonic, Notify::None)
            .unwrap();
    }
    let mut snap = src.checkpoint();
    snap.timers.reverse();
    let wanted: std::collections::BTreeSet<i32> = (0..2000).collect();
    for _ in 0..20 {
        let target = timers.owner();
        let (restored, theirs) = std::thread::scope(|s| {
            let other = s.spawn(|| {
                while target.timers().is_empty() {
                    std::hint::spin_loop();
                }
                (0..50)
                    .map(|_| target.create(ClockId::Monotonic, Notify::None).unwrap())
                    .map(|t| t.get())
                    .collect::<Vec<_>>()
            });
            let restored = target.restore(&snap, |_| None);
            (restored, other.join().unwrap())
        });
        let ids: Vec<i32> = target.timers().iter().map(|t| t.id.get()).collect();
        let unique: std::collections::BTreeSet<i32> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "two timers share an ID");
        match restored {
            Ok(()) => {
                assert!(wanted.is_subset(&unique));
                assert_eq!(ids.len(), wanted.len() + theirs.len());
            }
            Err(Error::IdInUse) => {
                let theirs: std::collections::BTreeSet<i32> = theirs.into_iter().collect();
                assert_eq!(unique, theirs, "a failed restore keeps nothing of its own");
            }
            Err(e) => panic!("restore: {e}"),
        }
    }
}

/// Two restores of one owner at once: the one that reaches its section second fails with
/// `IdInUse` and changes nothing, so the owner ends with the first one's timers, counter and
/// exact-ID mode. Restore `a` maps a callback name, and its mapping waits until restore `b`
/// has ended, so both pass the first look at the owner while it is empty. Before the check
/// for an empty owner and the settings moved into the restore's exclusive section, both
/// snapshots (distinct IDs) were restored into the one owner.
#[test]
fn two_restores_of_one_owner_at_once_leave_the_first_ones_timers_and_settings() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log = Log::default();
    let snapshot = |ids: std::ops::Range<i32>, restore_ids: bool| {
        let src = timers.owner();
        src.set_restore_ids(true);
        for i in ids {
            src.create_with_id(i, ClockId::Monotonic, tick(&log))
                .unwrap();
        }
        src.set_restore_ids(restore_ids);
        src.checkpoint()
    };
    let a = snapshot(0..300, true);
    let b = snapshot(5000..5100, false);
    let target = timers.owner();
    let (start, b_done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let first = std::sync::Once::new();
    let (ra, rb) = std::thread::scope(|s| {
        let other = s.spawn(|| {
            start.wait();
            let r = target.restore(&b, |_| Some(tick(&log)));
            b_done.wait();
            r
        });
        let ra = target.restore(&a, |_| {
            // At `a`'s first mapped name, after its first look at the (empty) owner: `b`
            // runs whole.
            first.call_once(|| {
                start.wait();
                b_done.wait();
            });
            Some(tick(&log))
        });
        (ra, other.join().unwrap())
    });
    assert_eq!((ra, rb), (Err(Error::IdInUse), Ok(())));
    let after = target.checkpoint();
    let ids = |s: &Snapshot| s.timers.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&b));
    assert_eq!(after.counter, b.counter);
    assert_eq!(after.restore_ids, b.restore_ids);
}

/// A restore into a destroyed owner fails with `OwnerDeleted`, whether or not the owner had
/// timers (its torn-down timers' slots stay in use, so its restore section is not "alone";
/// that must not turn into `IdInUse`).
#[test]
fn a_restore_into_a_destroyed_owner_reports_it_deleted() {
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let snap = sample();
    for had_timers in [false, true] {
        let o = timers.owner();
        if had_timers {
            o.create(ClockId::Monotonic, Notify::None).unwrap();
        }
        o.destroy();
        assert_eq!(
            o.restore(&snap, |_| Some(Notify::None)),
            Err(Error::OwnerDeleted),
            "had timers: {had_timers}"
        );
    }
}

/// A restore that fails part-way (a group limit) lets go of the callbacks it was handed only
/// after its exclusive section: a callback whose drop creates in the owner must not wait for
/// the section forever (a create inside the section from its own thread would).
#[test]
fn a_failed_restores_callbacks_are_dropped_after_its_section() {
    use std::sync::atomic::{AtomicUsize, Ordering as O};
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    let log = Log::default();
    let src = timers.owner();
    src.set_restore_ids(true);
    for i in 0..5 {
        src.create_with_id(i, ClockId::Monotonic, tick(&log))
            .unwrap();
    }
    let snap = src.checkpoint();
    let group = timers.group("g").unwrap();
    group.set_max_timers(Some(3));
    let target = group.owner();
    /// Creates a timer in its owner when dropped.
    struct CreatesOnDrop(Owner, Arc<AtomicUsize>);
    impl Drop for CreatesOnDrop {
        fn drop(&mut self) {
            if self.0.create(ClockId::Monotonic, Notify::None).is_ok() {
                self.1.fetch_add(1, O::SeqCst);
            }
        }
    }
    let made = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let (t, m) = (target.clone(), made.clone());
    // A thread of its own, so that a hang shows as a timeout here.
    std::thread::spawn(move || {
        let r = t.restore(&snap, |_| {
            let on_drop = CreatesOnDrop(t.clone(), m.clone());
            Some(Notify::callback_named("tick", move |_, _| {
                let _ = &on_drop;
            }))
        });
        let _ = tx.send(r);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the restore hangs");
    assert_eq!(r, Err(Error::LimitReached("g".into())));
    // The five callbacks were dropped after the section: three creates fit the limit.
    assert_eq!(made.load(O::SeqCst), 3);
    assert_eq!(target.timers().len(), 3);
}
