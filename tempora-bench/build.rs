//! Compiles the capi bench suite's C harness (`src/suites/capi/capi.c`): tight C loops over the C
//! ABI of `tempora.h` and over the kernel's POSIX timers, linked into the `tempora` binary. The
//! harness's calls to `tempora_*` resolve to the `tempora_capi` rlib the binary links (the
//! same functions `libtempora.so` and `libtempora.a` export), so the C side measures the ABI a
//! C program calls.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/suites/capi/capi.c");
    println!("cargo:rerun-if-changed=../tempora-capi/include/tempora.h");
    cc::Build::new()
        .file("src/suites/capi/capi.c")
        .include("../tempora-capi/include")
        // The harness's loops are what is measured: the same optimisation whatever profile
        // cargo builds (a C program linking libtempora.a is built at -O2 too).
        .opt_level(2)
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .compile("tempora_capi_bench");
}
