//! The capi suite's handle on the drop-in, `libtempora-posix.so`: the library found
//! ([`dropin_path`]), loaded once with `dlopen` (`RTLD_LOCAL`, never unloaded) and its calls
//! taken with `dlsym` into [`CDropin`], `capi.c`'s `struct capi_dropin`, which the C loops call
//! through as a program calls the library through the PLT. The `settime`, `gettime` and
//! `create-delete` cases (`mod.rs`) and `sigwait-latency` (`sigwait.rs`) share it.

use std::ffi::{c_int, c_void};

/// `capi.c`'s `struct capi_dropin`: the drop-in's calls, as `libtempora-posix.so` exports
/// them.
#[repr(C)]
pub(super) struct CDropin {
    create: CreateFn,
    settime: SettimeFn,
    gettime: GettimeFn,
    delete: DeleteFn,
    getoverrun: GetoverrunFn,
    sigwait: SigwaitFn,
}

type CreateFn =
    unsafe extern "C" fn(libc::clockid_t, *mut libc::sigevent, *mut libc::timer_t) -> c_int;
type SettimeFn = unsafe extern "C" fn(
    libc::timer_t,
    c_int,
    *const libc::itimerspec,
    *mut libc::itimerspec,
) -> c_int;
type GettimeFn = unsafe extern "C" fn(libc::timer_t, *mut libc::itimerspec) -> c_int;
type DeleteFn = unsafe extern "C" fn(libc::timer_t) -> c_int;
type GetoverrunFn = unsafe extern "C" fn(libc::timer_t) -> c_int;
type SigwaitFn = unsafe extern "C" fn(*const libc::sigset_t, *mut c_int) -> c_int;

/// Where `libtempora-posix.so` is: `TEMPORA_POSIX_SO`, or cargo's `libtempora_posix.so` beside
/// this binary or in its `deps/` (where cargo leaves it when building tempora-bench, which
/// depends on the crate for this).
fn dropin_path() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("TEMPORA_POSIX_SO") {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libtempora_posix.so"),
        dir.join("deps/libtempora_posix.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The drop-in's calls, from `libtempora-posix.so` loaded once (`RTLD_LOCAL`: its
/// `timer_create` & co. stand in for no other call of this process) and never unloaded.
pub(super) fn dropin() -> Result<&'static CDropin, String> {
    static LOADED: std::sync::OnceLock<Result<CDropin, String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            use std::os::unix::ffi::OsStrExt;
            let path = dropin_path().ok_or(
                "libtempora_posix.so is not beside the binary (cargo build -p tempora-posix, or set TEMPORA_POSIX_SO)",
            )?;
            let c = std::ffi::CString::new(path.as_os_str().as_bytes())
                .map_err(|_| "a NUL in the drop-in's path")?;
            let dlerror = || {
                // SAFETY: dlerror returns NULL or a NUL-terminated message.
                let e = unsafe { libc::dlerror() };
                if e.is_null() {
                    "unknown".to_owned()
                } else {
                    // SAFETY: non-NULL: a NUL-terminated message.
                    unsafe { std::ffi::CStr::from_ptr(e) }.to_string_lossy().into_owned()
                }
            };
            // SAFETY: a NUL-terminated path; the library's initialisers are Rust's and C's
            // own, and it is never unloaded.
            let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if handle.is_null() {
                return Err(format!("dlopen {}: {}", path.display(), dlerror()));
            }
            let sym = |name: &std::ffi::CStr| {
                // SAFETY: a live handle and a NUL-terminated name.
                let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
                if p.is_null() {
                    Err(format!("dlsym {name:?}: {}", dlerror()))
                } else {
                    Ok(p)
                }
            };
            let (create, settime, gettime, delete) = (
                sym(c"timer_create")?,
                sym(c"timer_settime")?,
                sym(c"timer_gettime")?,
                sym(c"timer_delete")?,
            );
            let (getoverrun, sigwait) = (sym(c"timer_getoverrun")?, sym(c"sigwait")?);
            // SAFETY: each is the drop-in's function of that name, with the C library's
            // signature, which the field's type spells.
            Ok(unsafe {
                CDropin {
                    create: std::mem::transmute::<*mut c_void, CreateFn>(create),
                    settime: std::mem::transmute::<*mut c_void, SettimeFn>(settime),
                    gettime: std::mem::transmute::<*mut c_void, GettimeFn>(gettime),
                    delete: std::mem::transmute::<*mut c_void, DeleteFn>(delete),
                    getoverrun: std::mem::transmute::<*mut c_void, GetoverrunFn>(getoverrun),
                    sigwait: std::mem::transmute::<*mut c_void, SigwaitFn>(sigwait),
                }
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}
