//! The C test suite (`tests/c_suite.rs`) compiles C for the target this crate is built for.
//! (The shared library's SONAME and symbol versions are given where it is linked, by
//! `install.sh`, from the static library cargo builds.)
fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=TEMPORA_CAPI_TARGET={target}");
}
