//! The library's version and the service and its owners: `tempora_version`;
//! `tempora_config_init` (a `tempora_config` that grows: read only as far as its `size`
//! covers), `tempora_new` and `tempora_free` for a `tempora_t`; `tempora_owner_new` and
//! `tempora_owner_free` for a `tempora_owner_t`; and
//! `tempora_default_owner`, the process-wide owner `tempora_posix.h` maps the POSIX calls onto.
//! Each handle is a `Box` made here and freed here, once (the default owner's, never).

use crate::convert::{not_null, timers_of};
use crate::failure::{entry, Failure};
use crate::types::{tempora_config, tempora_owner_t, tempora_t, TEMPORA_VERSION_NUMBER};
use libc::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;
use std::{mem, ptr};
use tempora::Timers;

/// The library's version, `MAJOR * 10000 + MINOR * 100 + PATCH` (0.1.0 is 100): compare it
/// with the header's `TEMPORA_VERSION_NUMBER`. Never fails.
#[no_mangle]
pub extern "C" fn tempora_version() -> c_int {
    TEMPORA_VERSION_NUMBER
}

/// The size of the first `tempora_config` that had `size`: the smallest a caller may pass.
/// The struct only grows past it.
const CONFIG_FIRST_SIZE: usize = mem::offset_of!(tempora_config, max_deferral_ns) + 8;

/// The largest `size` taken: far above any settings struct, it refuses the garbage of an
/// uninitialised one before anything past its known fields is read.
const CONFIG_MAX_SIZE: usize = 4096;

/// The defaults, `tempora_config_init`'s values; `size` is this library's struct.
fn config_defaults() -> tempora_config {
    tempora_config {
        size: mem::size_of::<tempora_config>(),
        bases: 0,
        drivers: -1,
        tick_ns: 0,
        id_bits: 0,
        spare_drivers: -1,
        max_deferral_ns: 0,
    }
}

/// Checks a caller's struct size: at least the first sized struct's, at most
/// `CONFIG_MAX_SIZE`, a multiple of the struct's alignment.
fn config_size(size: usize) -> Result<usize, Failure> {
    if !(CONFIG_FIRST_SIZE..=CONFIG_MAX_SIZE).contains(&size)
        || size % mem::align_of::<tempora_config>() != 0
    {
        return Err(Failure::new(
            libc::EINVAL,
            "config size is not a struct tempora_config's: fill it with \
             tempora_config_init(&config, sizeof config)",
        ));
    }
    Ok(size)
}

/// Fills the caller's struct of `size` bytes (`sizeof config`: the struct as the program's
/// header has it) with the defaults: a base per CPU, one driver thread with up to 64 spares, a 1 µs
/// tick, 31-bit IDs, a 1 s `max_deferral_ns`; and `size`. Bytes past the fields this library
/// knows (a newer header's) are set to 0, their default. Returns 0, or -1 with `errno`
/// `EFAULT` if `config` is NULL, `EINVAL` if `size` is not a `struct tempora_config`'s (it
/// writes nothing then).
///
/// # Safety
/// `config` is NULL or points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tempora_config_init(config: *mut tempora_config, size: usize) -> c_int {
    entry(-1, || {
        not_null(config, "NULL config")?;
        let size = config_size(size)?;
        let defaults = tempora_config {
            size,
            ..config_defaults()
        };
        // SAFETY: `config` is non-NULL and points to `size` writable bytes (the caller's
        // contract); `tempora_config` is integers with no padding (`layout_tests`).
        unsafe { write_sized(config.cast(), size, &defaults) };
        Ok(0)
    })
}

/// The caller's settings: the fields its `size` covers, the defaults for the rest.
///
/// # Safety
/// `config` is non-NULL and points to a readable `size_t` (its `size`), and to `size` readable
/// bytes when that is a valid size.
unsafe fn read_config(config: *const tempora_config) -> Result<tempora_config, Failure> {
    // SAFETY: the caller's contract: `size` is the first field, readable alone.
    let size = config_size(unsafe { config.cast::<usize>().read_unaligned() })?;
    let mut c = config_defaults();
    // SAFETY: `size` bytes of `config` are readable (the contract, for a valid size);
    // `tempora_config` is integers with no padding.
    unsafe { read_sized(config.cast(), size, &mut c) }?;
    Ok(c)
}

/// Writes `lib`, the library's struct, into a caller's struct of `size` bytes at `out`: as
/// much of it as `size` holds, then zeros for the fields of a newer header than the
/// library's. Nothing past `size` is written.
///
/// # Safety
/// `out` points to `size` writable bytes; `T` is integers with no padding (every byte of
/// `lib` is initialised).
unsafe fn write_sized<T>(out: *mut u8, size: usize, lib: &T) {
    let known = mem::size_of::<T>();
    // SAFETY: `lib` is `known` initialised bytes (the contract); both writes stay within
    // `out`'s `size` bytes.
    unsafe {
        ptr::copy_nonoverlapping((lib as *const T).cast::<u8>(), out, size.min(known));
        if size > known {
            ptr::write_bytes(out.add(known), 0, size - known);
        }
    }
}

/// Reads a caller's struct of `size` bytes at `src` over `lib`, which holds the defaults:
/// the fields `size` covers are the caller's, the rest keep their defaults. Fails with
/// `E2BIG` if a byte past the library's struct (a field of a newer header) is not 0, the
/// default of every field added later. Nothing past `size` is read.
///
/// # Safety
/// `src` points to `size` readable bytes; `T` is integers with no padding (any bytes are a
/// valid value).
unsafe fn read_sized<T>(src: *const u8, size: usize, lib: &mut T) -> Result<(), Failure> {
    let known = mem::size_of::<T>();
    // SAFETY: at most `size` bytes of `src` are read (the contract) and `known` of `lib`
    // written; any bytes are a valid `T`.
    unsafe { ptr::copy_nonoverlapping(src, (lib as *mut T).cast::<u8>(), size.min(known)) };
    if size > known {
        // SAFETY: `known .. size` are within `src`'s `size` readable bytes.
        let tail = unsafe { std::slice::from_raw_parts(src.add(known), size - known) };
        if tail.iter().any(|&b| b != 0) {
            return Err(Failure::new(
                libc::E2BIG,
                "config sets a field this library does not know (it is older than the header)",
            ));
        }
    }
    Ok(())
}

/// Starts a timer service with `config` (NULL for the defaults), reading only the `size`
/// bytes it says it has. Returns it, to be freed with `tempora_free`, or NULL with `errno`:
/// `EINVAL` for a `size` that is not a `struct tempora_config`'s (not filled by
/// `tempora_config_init`) or an invalid setting (`drivers` below -1 or more than the bases,
/// more than 65536 bases, `tick_ns` above 1 s (1000000000), `id_bits` above 31,
/// `spare_drivers` below -1), `E2BIG` for a field
/// this library does not know set to non-zero, `EAGAIN` or another OS errno if a driver
/// thread cannot start.
///
/// # Safety
/// `config` is NULL or points to a `tempora_config` filled by `tempora_config_init` (`size`
/// readable bytes).
#[no_mangle]
pub unsafe extern "C" fn tempora_new(config: *const tempora_config) -> *mut tempora_t {
    entry(ptr::null_mut(), || {
        let mut b = Timers::builder();
        if !config.is_null() {
            // SAFETY: non-NULL, and the caller's contract.
            let c = unsafe { read_config(config) }?;
            if c.bases != 0 {
                b.bases(c.bases as usize);
            }
            match c.drivers {
                -1 => {}
                n if n >= 0 => {
                    b.drivers(n as usize);
                }
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "drivers must be -1 or at least 0",
                    ))
                }
            }
            if c.tick_ns != 0 {
                b.tick(Duration::from_nanos(c.tick_ns));
            }
            if c.id_bits != 0 {
                b.id_bits(c.id_bits);
            }
            match c.spare_drivers {
                -1 => {}
                n if n >= 0 => {
                    b.spare_drivers(n as usize);
                }
                _ => {
                    return Err(Failure::new(
                        libc::EINVAL,
                        "spare_drivers must be -1 or at least 0",
                    ))
                }
            }
            match c.max_deferral_ns {
                0 => {}
                u64::MAX => {
                    b.max_deferral(Duration::MAX);
                }
                ns => {
                    b.max_deferral(Duration::from_nanos(ns));
                }
            }
        }
        let timers = b.build()?;
        Ok(Box::into_raw(Box::new(tempora_t { timers })))
    })
}

/// Stops a service and frees its handle (NULL is ignored). Its driver threads stop now, and
/// are joined before this returns: the callback calls they have already taken run first (one
/// that blocks holds this up), and nothing fires the service's timers after. Called from one
/// of its callbacks, it joins every driver thread but the caller's, which ends once that call
/// and the rest of its batch have returned.
///
/// Owners that outlive their service keep their timers readable (gettime, getoverrun, delete,
/// checkpoint, queued events), but no timer of theirs fires again: an armed one reads its
/// remaining time, then 1 ns left for good once its expiry has passed. Arming fails with
/// `ESHUTDOWN`, and so does waiting for an event once the queue is empty.
///
/// # Safety
/// `t` is NULL or a live handle from `tempora_new`, freed once, with no other call on it
/// running or to come.
///
/// Fork: a service belongs to the process that made it. In a child made by `fork(2)`, every
/// call on a service made before the fork, and on its owners, fails at once with `ECHILD`
/// (an event wait returns instead of waiting), touching no lock a parent's thread may have
/// held; `tempora_free` and `tempora_owner_free` of them return without joining or freeing
/// anything (the child's copy of them is leaked). Make a new service in the child; the
/// default owner is made again there by itself (`tempora_default_owner`).
#[no_mangle]
pub unsafe extern "C" fn tempora_free(t: *mut tempora_t) {
    entry((), || {
        if !t.is_null() {
            // SAFETY: a live handle from `tempora_new`, freed once (the caller's contract).
            drop(unsafe { Box::from_raw(t) });
        }
        Ok(())
    })
}

/// A new owner of `t`: an empty namespace of timer IDs, with its event queue. Returns it, to
/// be freed with `tempora_owner_free`, or NULL with `errno` `EINVAL` if `t` is NULL.
///
/// # Safety
/// `t` is NULL or a live service handle.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_new(t: *const tempora_t) -> *mut tempora_owner_t {
    entry(ptr::null_mut(), || {
        let owner = timers_of(t)?.owner();
        Ok(Box::into_raw(Box::new(tempora_owner_t {
            owner,
            default: false,
        })))
    })
}

/// Deletes an owner with all its timers and frees its handle (NULL is ignored). Pending
/// events are dropped. Callback calls already taken by a firing thread are not waited for and
/// may run after this returns (see `tempora_timer_delete`).
/// Returns 0, or -1 with `errno` `EINVAL` for the default owner (`tempora_default_owner`),
/// which lives for the process: it is left as it was, timers and all.
///
/// # Safety
/// `owner` is NULL, the default owner, or a live handle from `tempora_owner_new`, freed once,
/// with no other call on it running or to come.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_free(owner: *mut tempora_owner_t) -> c_int {
    entry(-1, || {
        // SAFETY: NULL or a live handle (the contract); only its flag is read.
        if unsafe { owner.as_ref() }.is_some_and(|o| o.default) {
            return Err(Failure::new(
                libc::EINVAL,
                "the default owner cannot be freed: it lives for the process",
            ));
        }
        if !owner.is_null() {
            // SAFETY: a live handle from `tempora_owner_new`, freed once (the contract).
            let owner = unsafe { Box::from_raw(owner) };
            owner.owner.destroy();
        }
        Ok(0)
    })
}

/// The process-wide owner `tempora_posix.h` maps the POSIX calls onto: an owner of the
/// process-wide service (`tempora::time::try_global`: the default configuration, one driver
/// thread, shared with Rust code of the same process), made on first call and never freed
/// (`tempora_owner_free` refuses it with `EINVAL`). Returns NULL with `errno` only if it cannot be made:
/// `EAGAIN` (or another OS errno) when the service's driver thread cannot start, as
/// `pthread_create` and `timer_create` say it; the next call tries again.
///
/// After `fork(2)`, the child's first call makes a new default owner, of a new process-wide
/// service whose driver thread starts then: the child starts as the kernel's does, with no
/// timers, IDs from 0 and exact-ID mode off, and its own timers fire. The parent's owner is
/// left unfreed in the child (its memory is the parent's copy; its threads are not there).
#[no_mangle]
pub extern "C" fn tempora_default_owner() -> *mut tempora_owner_t {
    entry(ptr::null_mut(), || {
        let timers = tempora::time::try_global()?;
        Ok(default_of(timers))
    })
}

/// The default owner if this process made it (a `tempora_default_owner` of this process, or
/// of a forked child since the fork), NULL otherwise, without making anything: no allocation,
/// no lock, no `errno`. The POSIX calls after create take their owner so (`posix.rs`): a
/// timer no create made is `EINVAL` there, and a signal handler's call makes no service.
#[inline]
pub(crate) fn made_default_owner() -> *mut tempora_owner_t {
    let Some(timers) = tempora::time::built_global() else {
        return ptr::null_mut();
    };
    // Acquire: as in `default_of`.
    // SAFETY: a published default is leaked, never freed.
    match unsafe { DEFAULT.load(Ordering::Acquire).as_mut() } {
        Some(d) if ptr::eq(d.timers, timers) => &mut d.owner,
        _ => ptr::null_mut(),
    }
}

/// The default owner and the service it was made of.
struct Default {
    timers: *const Timers,
    owner: tempora_owner_t,
}

/// The latest default owner made, leaked (a parent's stays in a forked child, unused).
static DEFAULT: AtomicPtr<Default> = AtomicPtr::new(ptr::null_mut());

/// The default owner of `timers`, the process's global service: made on the first call of
/// the process, and again in a forked child (whose global service is another one).
fn default_of(timers: &'static Timers) -> *mut tempora_owner_t {
    // Acquire: pairs with the Release of the compare-exchange that published it.
    let mut seen = DEFAULT.load(Ordering::Acquire);
    loop {
        // SAFETY: a published default is leaked, never freed.
        if let Some(d) = unsafe { seen.as_mut() } {
            if ptr::eq(d.timers, timers) {
                return &mut d.owner;
            }
        }
        let fresh = Box::into_raw(Box::new(Default {
            timers,
            owner: tempora_owner_t {
                owner: timers.owner(),
                default: true,
            },
        }));
        match DEFAULT.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // The parent's default (in a child) is leaked.
            // SAFETY: just published, and never freed.
            Ok(_) => return unsafe { &mut (*fresh).owner },
            Err(now) => {
                // SAFETY: `fresh` was never shared; its owner, of a live service, is deleted.
                drop(unsafe { Box::from_raw(fresh) });
                seen = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later library's `tempora_config`: today's, with a field appended.
    #[repr(C)]
    struct LaterConfig {
        today: tempora_config,
        later: u64,
    }

    /// A later library and a program built against today's header: the library writes and
    /// reads only the program's struct, and keeps its own default for the field the program
    /// does not have.
    #[test]
    fn a_later_library_reads_and_writes_only_an_older_programs_struct() {
        let size = mem::size_of::<tempora_config>();
        // The program's struct, then bytes that are not its own.
        let mut program = vec![0xABu8; size + 16];
        let library = LaterConfig {
            today: tempora_config {
                size,
                ..config_defaults()
            },
            later: 7,
        };
        // SAFETY: `program` has `size` writable bytes; `LaterConfig` is integers, no padding.
        unsafe { write_sized(program.as_mut_ptr(), size, &library) };
        assert!(program[size..].iter().all(|&b| b == 0xAB), "written past");
        // SAFETY: `program` starts with a `tempora_config`'s bytes; read unaligned.
        let seen = unsafe { program.as_ptr().cast::<tempora_config>().read_unaligned() };
        assert_eq!(
            (seen.size, seen.drivers, seen.spare_drivers),
            (size, -1, -1)
        );

        let bases = mem::offset_of!(tempora_config, bases);
        program[bases..bases + 4].copy_from_slice(&3u32.to_ne_bytes());
        let mut read = LaterConfig {
            today: config_defaults(),
            later: 7,
        };
        // SAFETY: `program` has `size` readable bytes; the bytes after it are not 0, so a
        // read past them would fail with E2BIG.
        assert!(unsafe { read_sized(program.as_ptr(), size, &mut read) }.is_ok());
        assert_eq!(
            read.later, 7,
            "the field the program lacks keeps its default"
        );
        if cfg!(target_pointer_width = "64") {
            assert_eq!(read.today.bases, 3);
        }
    }

    /// Today's library and a program built against a later header: its later field is taken
    /// at 0 and refused set.
    #[test]
    fn a_later_programs_unknown_field_is_read_at_zero_and_refused_set() {
        let size = mem::size_of::<LaterConfig>();
        let mut program = LaterConfig {
            today: config_defaults(),
            later: 0,
        };
        program.today.size = size;
        let config = (&raw const program).cast::<tempora_config>();
        // SAFETY: `config` is `size` readable bytes, a `tempora_config` at its start.
        assert!(unsafe { read_config(config) }.is_ok());
        program.later = 1;
        let config = (&raw const program).cast::<tempora_config>();
        // SAFETY: as above.
        assert!(unsafe { read_config(config) }.is_err());
    }
    use tempora::clock::ClockId;
    use tempora::Notify;

    #[test]
    fn the_default_owner_is_an_owner_of_the_global_service() {
        let o = tempora_default_owner();
        assert!(!o.is_null());
        assert_eq!(tempora_default_owner(), o, "one default owner");
        // SAFETY: the default owner lives for the process.
        let owner = unsafe { &(*o).owner };
        let id = owner.create(ClockId::Monotonic, Notify::Queue).unwrap();
        let stats = tempora::time::global().stats();
        let mine = stats.root.owners.iter().find(|s| s.owner == owner.id());
        assert_eq!(mine.map(|s| s.counts.created), Some(1), "{stats:?}");
        owner.delete(id).unwrap();
    }
}
