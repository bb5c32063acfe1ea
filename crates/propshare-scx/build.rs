// propshare-scx build script: generates the BPF side from scx_rustland_core
// (GPL-2.0-only) into this crate's directory and compiles it with clang.
// The generated files (intf.h, main.bpf.c, src/bpf.rs) are git-ignored and
// never committed.

fn main() {
    // scx_cargo looks for `clang` unless BPF_CLANG names one; Debian ships
    // versioned binaries, so prefer clang-19 when plain clang is missing.
    if std::env::var_os("BPF_CLANG").is_none() && !on_path("clang") {
        for c in ["clang-19", "clang-18", "clang-17", "clang-16"] {
            if on_path(c) {
                std::env::set_var("BPF_CLANG", c);
                break;
            }
        }
    }
    if let Err(e) = scx_rustland_core::RustLandBuilder::new().and_then(|mut b| b.build()) {
        eprintln!("propshare-scx: building the BPF side failed: {e:#}");
        eprintln!("it needs clang >= 16 (BPF_CLANG=clang-19), libelf, zlib and libseccomp headers;");
        eprintln!("scripts/kernel-vm.sh installs them on Debian");
        std::process::exit(1);
    }
    // Our own BPF side (src/pscx), written from the kernel's sched_ext_ops
    // documentation; scx_cargo supplies vmlinux.h and the scx headers.
    if let Err(e) = scx_cargo::BpfBuilder::new().and_then(|mut b| {
        b.enable_intf("src/pscx/intf.h", "pscx_intf.rs").enable_skel("src/pscx/main.bpf.c", "pscx").build()
    }) {
        eprintln!("propshare-scx: building our own BPF side (src/pscx) failed: {e:#}");
        std::process::exit(1);
    }
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file())).unwrap_or(false)
}
