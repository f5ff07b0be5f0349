//! The shared library exports the five calls alone, and its soname is `libtempora-posix.so`,
//! the name C programs link with `-ltempora-posix`; `src/create.c` is compiled against
//! `tempora_posix.h`, whose sigevent mapping `timer_create` shares. The C tests compile for
//! the target this crate is built for.
fn main() {
    println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,libtempora-posix.so");
    // The five calls are the shared library's only exports: rustc's version script lists
    // every `#[no_mangle]` function of every crate linked in (tempora-capi's `tempora_*`
    // too), and a second version script would only add to it; the symbols of archives
    // (the rlibs and src/create.c's) are made local instead.
    println!("cargo:rustc-link-arg-cdylib=-Wl,--exclude-libs,ALL");
    let include = "../tempora-capi/include";
    println!("cargo:rerun-if-changed=src/create.c");
    println!("cargo:rerun-if-changed={include}/tempora_posix.h");
    println!("cargo:rerun-if-changed={include}/tempora.h");
    cc::Build::new()
        .file("src/create.c")
        .include(include)
        .flag("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("tempora_posix_create");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=TEMPORA_POSIX_TARGET={target}");
}
