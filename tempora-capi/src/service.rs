//! The service and its owners: `tempora_config_init`, `tempora_new` and `tempora_free` for a
//! `tempora_t`; `tempora_owner_new` and `tempora_owner_free` for a `tempora_owner_t`; and
//! `tempora_default_owner`, the process-wide owner `tempora_posix.h` maps the POSIX calls onto.
//! Each handle is a `Box` made here and freed here, once (the default owner's, never).

use crate::convert::{not_null, timers_of};
use crate::failure::{entry, Failure};
use crate::types::{tempora_config, tempora_owner_t, tempora_t};
use libc::c_int;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;
use tempora::Timers;

/// Fills `*config` with the defaults: a base per CPU, one driver thread with up to 64 spares,
/// a 1 µs tick, 31-bit IDs, a 1 s `max_deferral_ns`.
/// Returns 0, or -1 with `errno` `EFAULT` if `config` is NULL.
///
/// # Safety
/// `config` is NULL or points to writable memory for a `tempora_config`.
#[no_mangle]
pub unsafe extern "C" fn tempora_config_init(config: *mut tempora_config) -> c_int {
    entry(-1, || {
        not_null(config, "NULL config")?;
        // SAFETY: non-NULL, and the caller's contract makes it writable.
        unsafe {
            config.write(tempora_config {
                bases: 0,
                drivers: -1,
                tick_ns: 0,
                id_bits: 0,
                spare_drivers: -1,
                max_deferral_ns: 0,
            })
        };
        Ok(0)
    })
}

/// Starts a timer service with `config` (NULL for the defaults). Returns it, to be freed with
/// `tempora_free`, or NULL with `errno`: `EINVAL` for an invalid setting (`drivers` below -1
/// or more than the bases, more than 65536 bases, `id_bits` above 31, `spare_drivers` below
/// -1), `EAGAIN` or another OS errno if a driver thread cannot start.
///
/// # Safety
/// `config` is NULL or points to a readable `tempora_config`.
#[no_mangle]
pub unsafe extern "C" fn tempora_new(config: *const tempora_config) -> *mut tempora_t {
    entry(ptr::null_mut(), || {
        let mut b = Timers::builder();
        // SAFETY: the caller's contract.
        if let Some(c) = unsafe { config.as_ref() } {
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
        Ok(Box::into_raw(Box::new(tempora_owner_t { owner })))
    })
}

/// Deletes an owner with all its timers and frees its handle (NULL is ignored). Pending
/// events are dropped. Callback calls already taken by a firing thread are not waited for and
/// may run after this returns (see `tempora_timer_delete`).
///
/// # Safety
/// `owner` is NULL or a live handle from `tempora_owner_new`, freed once, with no other call
/// on it running or to come.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_free(owner: *mut tempora_owner_t) {
    entry((), || {
        if !owner.is_null() {
            // SAFETY: a live handle from `tempora_owner_new`, freed once (the contract).
            let owner = unsafe { Box::from_raw(owner) };
            owner.owner.destroy();
        }
        Ok(())
    })
}

/// The process-wide owner `tempora_posix.h` maps the POSIX calls onto: an owner of the
/// process-wide service (`tempora::time::try_global`: the default configuration, one driver
/// thread, shared with Rust code of the same process), made on first call and never freed (do
/// not pass it to `tempora_owner_free`). Returns NULL with `errno` only if it cannot be made:
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

/// The default owner of `timers`, the process's global service: made on the first call of
/// the process, and again in a forked child (whose global service is another one).
fn default_of(timers: &'static Timers) -> *mut tempora_owner_t {
    /// The owner and the service it was made of.
    struct Default {
        timers: *const Timers,
        owner: tempora_owner_t,
    }
    static DEFAULT: AtomicPtr<Default> = AtomicPtr::new(ptr::null_mut());
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
