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
