//! Build script. Without the `dynamic` feature it does nothing: the plain build knows
//! nothing of libtorch.
//!
//! With `--features dynamic` (`oomlint confirm`) it
//! - adds `-Wl,-rpath,$LIBTORCH/lib` so the binary finds libtorch without
//!   `LD_LIBRARY_PATH` on the machine that built it;
//! - compiles `src/confirm/shim.cpp`, a few C functions over libtorch's C++ API that tch
//!   does not expose (the accelerator's memory statistics), against libtorch's headers;
//! - passes the libtorch library folder to the crate as `OOMLINT_LIBTORCH_LIB`, where
//!   `libtorch_cuda.so` is looked for when the plain name is not found.
//!
//! libtorch is found the way torch-sys finds it: `LIBTORCH` (with `LIBTORCH_INCLUDE` and
//! `LIBTORCH_LIB` overriding its parts), else a system install under `/usr`.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dynamic")]
    dynamic::build();
}

#[cfg(feature = "dynamic")]
mod dynamic {
    use std::path::PathBuf;

    fn env(name: &str) -> Option<PathBuf> {
        println!("cargo:rerun-if-env-changed={name}");
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=src/confirm/shim.cpp");
        let root = env("LIBTORCH").or_else(|| {
            std::path::Path::new("/usr/lib/libtorch.so")
                .exists()
                .then(|| PathBuf::from("/usr"))
        });
        let Some(root) = root else {
            panic!(
                "the `dynamic` feature needs libtorch 2.11.0: set LIBTORCH, e.g.\n  \
                 python3 -m venv .torch && .torch/bin/pip install --no-deps torch==2.11.0 \
                 \"nvidia-cuda-runtime==13.0.96.*\" \"nvidia-cuda-cupti==13.0.85.*\"\n  \
                 export LIBTORCH=$PWD/.torch/lib/python3.11/site-packages/torch"
            )
        };
        let include = env("LIBTORCH_INCLUDE").unwrap_or_else(|| root.clone());
        let lib = env("LIBTORCH_LIB")
            .unwrap_or_else(|| root.clone())
            .join("lib");
        let cxx11_abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
        println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");

        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
        }
        println!("cargo:rustc-env=OOMLINT_LIBTORCH_LIB={}", lib.display());

        cc::Build::new()
            .cpp(true)
            .pic(true)
            .std("c++17")
            .include(include.join("include"))
            .include(include.join("include/torch/csrc/api/include"))
            .define("_GLIBCXX_USE_CXX11_ABI", cxx11_abi.as_str())
            .define("GLOG_USE_GLOG_EXPORT", None)
            // libtorch's headers are not warning-clean; our own code is small.
            .warnings(false)
            .file("src/confirm/shim.cpp")
            .compile("oomlint_shim");
    }
}
