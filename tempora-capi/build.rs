//! The shared library's soname is `libtempora.so`, the name C programs link with `-ltempora`
//! (`stage.sh` gives the built file that name), whatever cargo calls the file it builds.
//! The C test suite (`tests/c_suite.rs`) compiles C for the target this crate is built for.
fn main() {
    // `rustc-link-arg`, not `rustc-cdylib-link-arg`: cargo passes a dependency's cdylib link
    // arguments on to its dependents' cdylibs (cargo#9562), where this soname would follow,
    // and override, their own (libtempora-posix's). An executable ignores it.
    println!("cargo:rustc-link-arg=-Wl,-soname,libtempora.so");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=TEMPORA_CAPI_TARGET={target}");
}
