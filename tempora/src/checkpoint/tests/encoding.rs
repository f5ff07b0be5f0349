//! The format pinned to the module doc's table: the encoding byte for byte, every stored
//! enum's value, and names encoded exactly or refused.

use super::*;

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
                signal: None,
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
                signal: None,
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
                signal: None,
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
                signal: None,
            },
        ],
    };
    // Format 1.3 (with no record named `signal`, its records are 1.2's); the same bytes
    // labelled 1.2, and the records in 1.1 (no default slack: read as none) and 1.0 (no
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
    let want = bytes(tails, Some(7_000_000), 3);
    assert_eq!(snap.try_encode().unwrap(), want);
    assert_eq!(Snapshot::decode(&want).unwrap(), snap);
    assert_eq!(
        Snapshot::decode(&bytes(tails, Some(7_000_000), 2)).unwrap(),
        snap
    );
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

    let targets = [
        (None, (0u8, 0i32, 0i32, 0u64)),
        (
            Some(SignalTarget::Process {
                signo: 34,
                value: 9,
            }),
            (1, 34, 0, 9),
        ),
        (
            Some(SignalTarget::Thread {
                tid: 77,
                signo: 35,
                value: 8,
            }),
            (2, 35, 77, 8),
        ),
        (
            Some(SignalTarget::ProcessWithId { signo: 14 }),
            (3, 14, 0, 0),
        ),
    ];
    for (target, (kind, signo, tid, value)) in targets {
        assert_eq!(
            signal_target_to_disk(target),
            (kind, signo, tid, value),
            "{target:?}"
        );
        assert_eq!(
            signal_target_from_disk(kind, signo, tid, value),
            Ok(target),
            "{kind}"
        );
    }
    // The fields a target does not use are not read.
    assert_eq!(signal_target_from_disk(0, 5, 6, 7), Ok(None));
    assert_eq!(
        signal_target_from_disk(1, 5, 6, 7),
        Ok(Some(SignalTarget::Process { signo: 5, value: 7 }))
    );
    assert_eq!(
        signal_target_from_disk(3, 5, 6, 7),
        Ok(Some(SignalTarget::ProcessWithId { signo: 5 }))
    );
    for kind in 4..=u8::MAX {
        assert_eq!(
            signal_target_from_disk(kind, 34, 0, 0),
            Err(Error::CorruptSnapshot(format!("signal target {kind}")))
        );
    }

    let states = [
        (SignalState::Idle, 0u8),
        (SignalState::Owed, 1),
        (SignalState::Outstanding, 2),
        (SignalState::OutstandingStale, 3),
    ];
    for (state, byte) in states {
        assert_eq!(signal_state_to_disk(state), byte, "{state:?}");
        assert_eq!(signal_state_from_disk(byte), Some(state), "{byte}");
    }
    for byte in 4..=u8::MAX {
        assert_eq!(signal_state_from_disk(byte), None, "state {byte}");
    }
}

/// A signal section as the module doc's table lays it out.
fn section(target: u8, signo: i32, tid: i32, value: u64, state: u8, lateness: i32) -> Vec<u8> {
    let mut s = vec![target];
    s.extend_from_slice(&signo.to_le_bytes());
    s.extend_from_slice(&tid.to_le_bytes());
    s.extend_from_slice(&value.to_le_bytes());
    s.push(state);
    s.extend_from_slice(&lateness.to_le_bytes());
    assert_eq!(s.len(), SIGNAL_SECTION);
    s
}

/// `record` (from [`record_bytes`]) with `tail` appended, its length grown to match.
fn with_tail(mut record: Vec<u8>, tail: &[u8]) -> Vec<u8> {
    let len = u16::from_le_bytes([record[0], record[1]]) + tail.len() as u16;
    record[..2].copy_from_slice(&len.to_le_bytes());
    record.extend_from_slice(tail);
    record
}

/// A payload (an owner record with counter 12, restore mode on, no default slack, then
/// `records`) framed as format 1.`minor`.
fn framed(records: &[Vec<u8>], minor: u8) -> Vec<u8> {
    let mut p = vec![17, 0, 12, 0, 0, 0, 1, records.len() as u8, 0, 0, 0];
    p.extend_from_slice(&0u64.to_le_bytes());
    for r in records {
        p.extend_from_slice(r);
    }
    let mut out = b"TEMPORA\x1a".to_vec();
    out.extend_from_slice(&[1, 0, minor, 0]);
    out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&p).to_le_bytes());
    out.extend_from_slice(&p);
    out
}

/// Format 1.3's signal section pinned byte for byte: every target (a callback named `signal`
/// included) and every state, with literal values from the module doc's table.
#[test]
fn signal_records_match_the_documented_table_byte_for_byte() {
    let id = |n| TimerId::new(n).unwrap();
    let signal_timer = |n, clock, signal| {
        let mut t = TimerRecord::new(id(n), clock, "signal");
        t.signal = signal;
        t
    };
    let with = |target, state, lateness| {
        let mut s = SignalRecord::new(target);
        s.state = state;
        s.lateness = lateness;
        Some(s)
    };
    let mut outstanding = signal_timer(
        2,
        ClockId::Monotonic,
        with(
            SignalTarget::Process {
                signo: 34,
                value: 0xfeed,
            },
            SignalState::Outstanding,
            2,
        ),
    );
    outstanding.status = Status::RequeuePending;
    outstanding.expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: 40,
    };
    outstanding.interval = 10;
    outstanding.overrun = 3;
    outstanding.overrun_last = 1;
    outstanding.precision = Precision::Precise;
    let mut stale = signal_timer(
        4,
        ClockId::Realtime,
        with(
            SignalTarget::Thread {
                tid: 4242,
                signo: 35,
                value: 5,
            },
            SignalState::OutstandingStale,
            0,
        ),
    );
    stale.status = Status::Armed;
    stale.expiry = Expiry::Realtime(1_767_225_600_000_000_000);
    let owed = signal_timer(
        6,
        ClockId::Boottime,
        with(
            SignalTarget::ProcessWithId { signo: 14 },
            SignalState::Owed,
            7,
        ),
    );
    let mut idle = signal_timer(
        8,
        ClockId::Monotonic,
        with(
            SignalTarget::Process {
                signo: 64,
                value: usize::MAX,
            },
            SignalState::Idle,
            0,
        ),
    );
    idle.status = Status::Armed;
    idle.expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: 5,
    };
    let callback = signal_timer(9, ClockId::Monotonic, None);
    let snap = Snapshot {
        counter: 12,
        restore_ids: true,
        timers: vec![outstanding, stale, owed, idle, callback],
        ..Snapshot::default()
    };
    let want = framed(
        &[
            with_tail(
                record_bytes(2, 1, 2, 0, 1, 1, 40, 10, 3, 1, "signal", Some(1 << 62)),
                &section(1, 34, 0, 0xfeed, 2, 2),
            ),
            with_tail(
                record_bytes(
                    4,
                    0,
                    1,
                    0,
                    2,
                    0,
                    1_767_225_600_000_000_000,
                    0,
                    -1,
                    0,
                    "signal",
                    Some(0),
                ),
                &section(2, 35, 4242, 5, 3, 0),
            ),
            with_tail(
                record_bytes(6, 7, 0, 0, 0, 0, 0, 0, -1, 0, "signal", Some(0)),
                &section(3, 14, 0, 0, 1, 7),
            ),
            with_tail(
                record_bytes(8, 1, 1, 0, 1, 1, 5, 0, -1, 0, "signal", Some(0)),
                &section(1, 64, 0, u64::MAX, 0, 0),
            ),
            with_tail(
                record_bytes(9, 1, 0, 0, 0, 0, 0, 0, -1, 0, "signal", Some(0)),
                &section(0, 0, 0, 0, 0, 0),
            ),
        ],
        3,
    );
    assert_eq!(snap.try_encode().unwrap(), want);
    assert_eq!(Snapshot::decode(&want).unwrap(), snap);
    // The fields a target does not use are not read: a callback's section, and a
    // `SignalWithId`'s tid and value.
    let loose = framed(
        &[
            with_tail(
                record_bytes(6, 7, 0, 0, 0, 0, 0, 0, -1, 0, "signal", Some(0)),
                &section(3, 14, 99, 77, 1, 7),
            ),
            with_tail(
                record_bytes(9, 1, 0, 0, 0, 0, 0, 0, -1, 0, "signal", Some(0)),
                &section(0, -3, 5, 6, 9, -1),
            ),
        ],
        3,
    );
    let mut narrow = snap.clone();
    narrow.timers = vec![snap.timers[2].clone(), snap.timers[4].clone()];
    assert_eq!(Snapshot::decode(&loose).unwrap(), narrow);
}

/// A record named `signal` in a snapshot before 1.3 (as a build that did not yet checkpoint
/// signal timers wrote them) is a callback's name, with nothing after its precision: decoded
/// as before, and restored only through the application's mapping. Labelled 1.3, the same
/// bytes lack the signal section and are refused.
#[test]
fn a_record_named_signal_before_1_3_is_a_callbacks_name() {
    let record = record_bytes(3, 1, 1, 0, 1, 1, 2_000, 0, -1, 0, "signal", Some(0));
    let mut want = TimerRecord::new(TimerId::new(3).unwrap(), ClockId::Monotonic, "signal");
    want.status = Status::Armed;
    want.expiry = Expiry::Remaining {
        clock: ClockId::Monotonic,
        ns: 2_000,
    };
    let snap = Snapshot {
        counter: 12,
        restore_ids: true,
        timers: vec![want],
        ..Snapshot::default()
    };
    let old = Snapshot::decode(&framed(std::slice::from_ref(&record), 2)).unwrap();
    assert_eq!(old, snap);
    assert_eq!(old.timers[0].signal, None);
    let clock = ManualClock::new();
    let timers = testing::manual(clock.clone(), |_| ());
    assert_eq!(
        timers.owner().restore(&old, |_| None),
        Err(Error::UnknownNotify("signal".into()))
    );
    let e = Snapshot::decode(&framed(&[record], 3)).unwrap_err();
    assert!(
        matches!(e, Error::CorruptSnapshot(ref m) if m.contains("truncated")),
        "{e}"
    );
}
