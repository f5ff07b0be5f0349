//! Corrupt input is an error, never a panic nor a partial snapshot: a decoder fuzz over
//! arbitrary and mutated bytes, every truncation and bit flip, wrong versions, absurd counts,
//! and `restore` refusing what `decode` refuses.

use super::*;

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
    /// itself is exercised, not only the checksum), signal timers' among them.
    #[test]
    fn decoder_fuzz_mutated_snapshots(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
        signals in any::<bool>(),
    ) {
        let mut bytes = if signals { signal_sample() } else { sample() }.encode();
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

#[test]
fn every_truncation_is_an_error() {
    for bytes in [sample().encode(), signal_sample().encode()] {
        for n in 0..bytes.len() {
            assert!(
                Snapshot::decode(&bytes[..n]).is_err(),
                "accepted {n} of {} bytes",
                bytes.len()
            );
        }
        assert!(Snapshot::decode(&bytes).is_ok());
    }
}

#[test]
fn every_single_bit_flip_is_an_error_except_in_the_minor_version() {
    for snap in [sample(), signal_sample()] {
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
    // The minor version is the one this build writes.
    assert!(
        matches!(
            e,
            Error::UnsupportedSnapshot {
                found: (2, minor),
                supported: 1
            } if minor == VERSION.1
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "snapshot format 2.{} is newer than this build reads (1.x)",
            VERSION.1
        )
    );
    assert_eq!(e.errno(), libc::EINVAL);
    // A newer minor version appends a field to every record (after a signal section): this
    // reader skips it.
    for snap in [sample(), signal_sample()] {
        let bytes = snap.encode();
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

/// A signal timer's record that breaks a rule: refused by restore, decode and encode alike,
/// with the same error, and nothing created.
#[test]
fn signal_records_that_break_a_rule_are_refused_alike() {
    let good = signal_sample();
    let at = |want: fn(&TimerRecord) -> bool| {
        good.timers
            .iter()
            .position(want)
            .expect("the sample holds one")
    };
    let periodic = at(|t| t.signal.is_some() && t.status == Status::RequeuePending);
    let thread =
        at(|t| matches!(t.signal, Some(s) if matches!(s.target, SignalTarget::Thread { .. })));
    let idle = at(|t| matches!(t.signal, Some(s) if s.state == SignalState::Idle));
    type Edit = fn(&mut TimerRecord);
    fn signo(t: &mut TimerRecord, n: i32) {
        t.signal.as_mut().unwrap().target = SignalTarget::Process { signo: n, value: 0 };
    }
    let cases: &[(usize, &str, Edit)] = &[
        (periodic, "signal number 0", |t| signo(t, 0)),
        (periodic, "signal number 65", |t| signo(t, 65)),
        (periodic, "signal number -1", |t| signo(t, -1)),
        (periodic, "signal number", |t| {
            t.signal.as_mut().unwrap().target = SignalTarget::ProcessWithId { signo: 100 }
        }),
        (thread, "thread ID 0", |t| {
            t.signal.as_mut().unwrap().target = SignalTarget::Thread {
                tid: 0,
                signo: 34,
                value: 0,
            }
        }),
        (thread, "thread ID -5", |t| {
            t.signal.as_mut().unwrap().target = SignalTarget::Thread {
                tid: -5,
                signo: 34,
                value: 0,
            }
        }),
        (periodic, "lateness -1", |t| {
            t.signal.as_mut().unwrap().lateness = -1
        }),
        (idle, "no signal waiting", |t| {
            t.signal.as_mut().unwrap().lateness = 3
        }),
        (periodic, "pending event on a signal timer", |t| {
            t.pending = true
        }),
        (periodic, "one-shot", |t| t.interval = 0),
    ];
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    for (i, &(which, what, edit)) in cases.iter().enumerate() {
        let mut bad = good.clone();
        edit(&mut bad.timers[which]);
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
    }
    // A target on a record of another name: no bytes carry it (only a record named `signal`
    // has a signal section), so restore and encode refuse it.
    for name in ["queue", "tick"] {
        let mut bad = good.clone();
        bad.timers[periodic].notify = name.to_string().into();
        let o = timers.owner();
        let e = o.restore(&bad, |_| Some(Notify::None)).unwrap_err();
        let what = format!("a signal target on a timer named {name:?}");
        assert!(
            matches!(e, Error::CorruptSnapshot(ref m) if m.contains(&what)),
            "{e}"
        );
        assert_eq!(bad.try_encode(), Err(e));
        assert!(o.timers().is_empty());
    }
}

/// An unknown signal target or state, and a record named `signal` cut before the end of its
/// section, are corrupt.
#[test]
fn unknown_signal_targets_and_states_and_short_sections_are_corrupt() {
    let mut snap = Snapshot::default();
    let mut t = TimerRecord::new(TimerId::new(1).unwrap(), ClockId::Monotonic, "signal");
    t.signal = Some(SignalRecord::new(SignalTarget::Process {
        signo: 34,
        value: 0,
    }));
    snap.timers.push(t);
    // The owner record (19 bytes), the timer record's length, fixed fields, name, precision.
    let section = 19 + 2 + TIMER_FIELDS + "signal".len() + 8;
    assert_eq!(snap.encode().len(), HEADER + section + SIGNAL_SECTION);
    let b = reframe(&snap, |p| p[section] = 4);
    assert!(
        corrupt_msg(&b).contains("signal target 4"),
        "{}",
        corrupt_msg(&b)
    );
    let b = reframe(&snap, |p| p[section + 17] = 4);
    assert!(
        corrupt_msg(&b).contains("signal state 4"),
        "{}",
        corrupt_msg(&b)
    );
    for cut in 1..=SIGNAL_SECTION + 8 {
        let b = reframe(&snap, |p| {
            p.truncate(p.len() - cut);
            let len = u16::from_le_bytes([p[19], p[20]]) - cut as u16;
            p[19..21].copy_from_slice(&len.to_le_bytes());
        });
        assert!(corrupt_msg(&b).contains("truncated"), "cut {cut}");
    }
}
