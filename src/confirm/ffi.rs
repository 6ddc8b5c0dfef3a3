//! What the harness needs below tch: live heap bytes (glibc's `mallinfo2`), the
//! accelerator's memory statistics (the C++ shim that build.rs compiles), loading
//! `libtorch_cuda.so` by hand, and the GPU's name (the CUDA driver API).

use std::ffi::{CStr, CString};

extern "C" {
    fn oomlint_last_error() -> *const libc::c_char;
    fn oomlint_accel_stats(device: libc::c_int, out: *mut i64) -> libc::c_int;
    fn oomlint_accel_reset_peak(device: libc::c_int) -> libc::c_int;
    fn oomlint_accel_memory_info(
        device: libc::c_int,
        free: *mut u64,
        total: *mut u64,
    ) -> libc::c_int;
}

fn shim_error() -> String {
    // SAFETY: the shim returns a pointer to a thread-local, NUL-terminated string.
    unsafe { CStr::from_ptr(oomlint_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn check(rc: libc::c_int) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(shim_error())
    }
}

/// Allocated bytes (current, peak) and reserved bytes (current, peak) of a GPU.
pub struct AccelStats {
    pub allocated: i64,
    pub allocated_peak: i64,
    #[allow(dead_code)]
    pub reserved: i64,
    #[allow(dead_code)]
    pub reserved_peak: i64,
}

pub fn accel_stats(device: i32) -> Result<AccelStats, String> {
    let mut out = [0i64; 4];
    // SAFETY: the shim writes four values into `out`.
    check(unsafe { oomlint_accel_stats(device, out.as_mut_ptr()) })?;
    Ok(AccelStats {
        allocated: out[0],
        allocated_peak: out[1],
        reserved: out[2],
        reserved_peak: out[3],
    })
}

pub fn accel_reset_peak(device: i32) -> Result<(), String> {
    // SAFETY: plain call; errors come back as a return code.
    check(unsafe { oomlint_accel_reset_peak(device) })
}

/// (free, total) bytes of a GPU.
pub fn accel_memory_info(device: i32) -> Result<(u64, u64), String> {
    let (mut free, mut total) = (0u64, 0u64);
    // SAFETY: the shim writes both values.
    check(unsafe { oomlint_accel_memory_info(device, &mut free, &mut total) })?;
    Ok((free, total))
}

/// Bytes of the heap in use: chunks handed out by malloc plus mmapped blocks. Unlike
/// RSS, memory that glibc keeps after `free` does not count.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn live_heap_bytes() -> Result<i64, String> {
    // SAFETY: mallinfo2 has no preconditions; it sums every arena.
    let m = unsafe { libc::mallinfo2() };
    Ok((m.uordblks + m.hblkhd) as i64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn live_heap_bytes() -> Result<i64, String> {
    Err("measuring on the CPU needs glibc's mallinfo2 (Linux with glibc)".to_owned())
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn dlopen(name: &str) -> Result<*mut libc::c_void, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: a valid C string; the handle is never closed (the library stays loaded).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        Err(dlerror())
    } else {
        Ok(h)
    }
}

/// Loads `libtorch_cuda.so`, which the linker dropped from the binary (nothing refers to
/// it directly): its static initialisers register CUDA with libtorch. Looked for by
/// name (LD_LIBRARY_PATH, the binary's rpath), then in the libtorch it was built with.
pub fn load_libtorch_cuda() -> Result<(), String> {
    let first = match dlopen("libtorch_cuda.so") {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if let Some(dir) = option_env!("OOMLINT_LIBTORCH_LIB") {
        let path = std::path::Path::new(dir).join("libtorch_cuda.so");
        if path.exists() {
            return dlopen(&path.to_string_lossy()).map(|_| ());
        }
    }
    Err(first)
}

/// The GPU's name through the CUDA driver API (`cuDeviceGetName`), which libtorch has
/// already initialised by the time a CUDA tensor exists.
pub fn cuda_device_name(ordinal: i32) -> Option<String> {
    type CuInit = unsafe extern "C" fn(libc::c_uint) -> libc::c_int;
    type CuDeviceGet = unsafe extern "C" fn(*mut libc::c_int, libc::c_int) -> libc::c_int;
    type CuDeviceGetName =
        unsafe extern "C" fn(*mut libc::c_char, libc::c_int, libc::c_int) -> libc::c_int;
    let h = dlopen("libcuda.so.1").ok()?;
    let sym = |name: &CStr| {
        // SAFETY: a valid handle and symbol name.
        let p = unsafe { libc::dlsym(h, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let init = sym(c"cuInit")?;
    let get = sym(c"cuDeviceGet")?;
    let get_name = sym(c"cuDeviceGetName")?;
    // SAFETY: the driver API's documented signatures.
    unsafe {
        let init: CuInit = std::mem::transmute(init);
        let get: CuDeviceGet = std::mem::transmute(get);
        let get_name: CuDeviceGetName = std::mem::transmute(get_name);
        if init(0) != 0 {
            return None;
        }
        let mut dev = 0;
        if get(&mut dev, ordinal) != 0 {
            return None;
        }
        let mut buf = [0 as libc::c_char; 256];
        if get_name(buf.as_mut_ptr(), buf.len() as libc::c_int, dev) != 0 {
            return None;
        }
        Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
    }
}
