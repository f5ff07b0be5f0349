//! Snapshot files: written atomically and verified on load, whole under concurrent saves,
//! I/O errors kept as the source, and reads bounded by the header whatever the input.

use super::*;

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

/// `Error::Io` keeps the `io::Error` as its source (and its text there only); errno and
/// equality still work.
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
    // The OS's text is the source's, not repeated in the error's own.
    assert!(io.to_string().contains("No such file"), "{io}");
    assert!(!e.to_string().contains("No such file"), "{e}");
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
