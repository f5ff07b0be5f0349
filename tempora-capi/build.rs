//! The shared library's soname is `libtempora.so`, the name C programs link with `-ltempora`
//! (`stage.sh` gives the built file that name), whatever cargo calls the file it builds.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtempora.so");
}
