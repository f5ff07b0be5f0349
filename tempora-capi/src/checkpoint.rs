//! Checkpoint and restore of an owner's timers through a file: `tempora_owner_checkpoint`
//! writes the snapshot, `tempora_owner_restore` recreates it, all or nothing, mapping the names
//! of callback timers back to this process's functions through the caller's resolver.

use crate::convert::{notify_of, owner_of, path_of};
use crate::failure::{entry, Failure};
use crate::types::{tempora_owner_t, tempora_resolver_fn, tempora_sigevent};
use libc::{c_char, c_int, c_void};
use std::cell::RefCell;
use std::ffi::CString;
use std::ptr;
use tempora::checkpoint::Snapshot;
use tempora::Notify;

/// Writes a snapshot of the owner's timers to `path` (atomically: a temporary file renamed
/// over it): IDs, clocks, settings, remaining times, overruns, pending events, the ID counter
/// and the exact-ID mode, the default slack. Returns 0, or -1 with `errno`: `EINVAL` (NULL
/// owner), `EFAULT` (NULL path), `ENOTRECOVERABLE` (a timer's lock was poisoned by a panic
/// inside tempora: nothing is written), or the OS's (`EACCES`, `ENOENT`, `ENOSPC`...).
///
/// # Safety
/// `owner` is NULL or live; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_checkpoint(
    owner: *const tempora_owner_t,
    path: *const c_char,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        owner.try_checkpoint()?.save_to(path_of(path)?)?;
        Ok(0)
    })
}

/// Recreates the snapshot at `path` in `owner`, which must have no timers: the same IDs,
/// settings, remaining times, overruns and pending events. Callback timers are recorded by
/// name; `resolver` (NULL if the snapshot has none) maps each name to this process's function.
/// All or nothing: on failure the owner is as it was.
///
/// Returns 0, or -1 with `errno`: `EINVAL` (NULL owner, a corrupt or newer snapshot, a name
/// the resolver does not know), `EBUSY` (the owner has timers), `EFAULT` (NULL path), or the
/// OS's for the file (`ENOENT`...).
///
/// # Safety
/// `owner` is NULL or live; `path` is NULL or a NUL-terminated string; `resolver` is NULL or a
/// function that keeps its contract (`tempora_resolver_fn`) for `ctx`.
#[no_mangle]
pub unsafe extern "C" fn tempora_owner_restore(
    owner: *const tempora_owner_t,
    path: *const c_char,
    resolver: tempora_resolver_fn,
    ctx: *mut c_void,
) -> c_int {
    entry(-1, || {
        let owner = owner_of(owner)?;
        let snapshot = Snapshot::load_from(path_of(path)?)?;
        // The resolver's first invalid answer, reported instead of "unknown name".
        let refused: RefCell<Option<Failure>> = RefCell::new(None);
        let resolve = |name: &str| -> Option<Notify> {
            let resolver = resolver?;
            let cname = CString::new(name).ok()?;
            // SAFETY: all-zero is a valid `tempora_sigevent` (integers, NULL pointers, `None`
            // function pointers).
            let mut sev: tempora_sigevent = unsafe { std::mem::zeroed() };
            // SAFETY: the resolver's contract (it returns normally; an exception out of it
            // unwinds to `entry`'s `catch_unwind`, which aborts); `cname` and `sev` outlive
            // the call.
            if unsafe { resolver(cname.as_ptr(), &mut sev, ctx) } != 0 {
                return None;
            }
            sev.name = ptr::null();
            // The snapshot's name for a callback recorded without one stays unnamed.
            let keep = (name != "callback").then_some(name);
            // SAFETY: `sev` is a readable sigevent with a NULL name.
            match unsafe { notify_of(&sev, keep) } {
                Ok(n) => Some(n),
                Err(f) => {
                    refused.borrow_mut().get_or_insert(f);
                    None
                }
            }
        };
        let r = owner.restore(&snapshot, resolve);
        match (r, refused.into_inner()) {
            (Ok(()), _) => Ok(0),
            (Err(_), Some(f)) => Err(f),
            (Err(e), None) => Err(e.into()),
        }
    })
}
