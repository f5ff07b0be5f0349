//! The shared library exports the five timer calls and the three signal waits alone, and its
//! soname is `libtempora-posix.so`, the name C programs link with `-ltempora-posix`. The C tests compile for the target this
//! crate is built for.
fn main() {
    println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,libtempora-posix.so");
    // The eight calls are the shared library's only exports: rustc's version script lists
    // every `#[no_mangle]` function of every crate linked in (tempora-capi's `tempora_*`
    // too), and a second version script would only add to it; the symbols of archives
    // (the rlibs) are made local instead.
    println!("cargo:rustc-link-arg-cdylib=-Wl,--exclude-libs,ALL");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=TEMPORA_POSIX_TARGET={target}");
}
