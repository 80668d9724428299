//! Direct proxy-wasm ABI calls that report failures instead of panicking.
//!
//! The SDK's `hostcalls` wrappers panic on any status they do not expect
//! (e.g. `set_property` answered with `NotFound`/`BadArgument`, or an
//! unknown status code, which would not even be a valid `Status` value).
//! These wrappers declare the same `env` imports with plain `u32` statuses
//! and map every non-OK status to `None`/`Err`. Arguments are the SDK's
//! typed enums (`MapType`, `BufferType`, `LogLevel`: `#[repr(u32)]`, as its
//! own imports declare them); a status is compared with `Status::Ok`.

use proxy_wasm::types::{BufferType, LogLevel, MapType, Status};

#[cfg(target_arch = "wasm32")]
mod abi {
    use proxy_wasm::types::{BufferType, LogLevel, MapType};

    #[link(wasm_import_module = "env")]
    extern "C" {
        pub fn proxy_log(level: LogLevel, message_data: *const u8, message_size: usize) -> u32;
        pub fn proxy_get_current_time_nanoseconds(return_time: *mut u64) -> u32;
        pub fn proxy_get_header_map_pairs(
            map_type: MapType,
            return_map_data: *mut *mut u8,
            return_map_size: *mut usize,
        ) -> u32;
        pub fn proxy_get_header_map_size(map_type: MapType, return_size: *mut usize) -> u32;
        pub fn proxy_get_buffer_bytes(
            buffer_type: BufferType,
            start: usize,
            max_size: usize,
            return_buffer_data: *mut *mut u8,
            return_buffer_size: *mut usize,
        ) -> u32;
        pub fn proxy_set_property(
            path_data: *const u8,
            path_size: usize,
            value_data: *const u8,
            value_size: usize,
        ) -> u32;
    }
}

/// Native builds (clippy, `cargo test`) talk to an in-process fake host: a
/// thread-local state that the adapter's tests fill and inspect. Left
/// empty, every map and buffer is missing and the clock fails.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::missing_safety_doc)]
pub mod abi {
    use proxy_wasm::types::{BufferType, LogLevel, MapType, Status};
    use std::cell::RefCell;

    #[derive(Default)]
    pub struct FakeHost {
        /// Clock; each read returns it and advances it by `tick`.
        pub now: Option<u64>,
        pub tick: u64,
        /// Serialized header maps by map type (`MapType as usize`).
        pub maps: [Option<Vec<u8>>; 4],
        /// Buffers by buffer type (`BufferType as usize`).
        pub buffers: [Option<Vec<u8>>; 8],
        pub properties: Vec<(String, Vec<u8>)>,
        pub logs: Vec<String>,
        /// Host calls of any kind.
        pub calls: usize,
    }

    thread_local! {
        pub static HOST: RefCell<FakeHost> = RefCell::default();
    }

    /// The SDK's own `hostcalls` import every other `env.proxy_*` function
    /// (its traits' default methods reach them), so a native build needs
    /// the symbols. The filter never calls them: if it ever did, the test
    /// aborts here, naming the call that should have gone through `host`.
    macro_rules! never_called {
        ($($name:ident)*) => {$(
            #[no_mangle]
            pub extern "C" fn $name() -> u32 {
                panic!(concat!("the filter called the SDK's ", stringify!($name)))
            }
        )*};
    }
    never_called! {
        proxy_get_log_level proxy_set_tick_period_milliseconds proxy_set_buffer_bytes
        proxy_set_header_map_pairs proxy_get_header_map_value proxy_remove_header_map_value
        proxy_replace_header_map_value proxy_add_header_map_value proxy_get_property
        proxy_get_shared_data proxy_set_shared_data proxy_register_shared_queue
        proxy_resolve_shared_queue proxy_dequeue_shared_queue proxy_enqueue_shared_queue
        proxy_continue_stream proxy_close_stream proxy_send_local_response proxy_http_call
        proxy_grpc_call proxy_grpc_stream proxy_grpc_send proxy_grpc_cancel proxy_grpc_close
        proxy_get_status proxy_set_effective_context proxy_call_foreign_function proxy_done
        proxy_define_metric proxy_get_metric proxy_record_metric proxy_increment_metric
    }

    const OK: u32 = Status::Ok as u32;
    const NOT_FOUND: u32 = Status::NotFound as u32;

    fn with<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
        HOST.with(|h| {
            let mut h = h.borrow_mut();
            h.calls += 1;
            f(&mut h)
        })
    }

    /// Hands out a copy allocated like `proxy_on_memory_allocate` does.
    unsafe fn give(bytes: &[u8], data: *mut *mut u8, size: *mut usize) -> u32 {
        let b: Box<[u8]> = bytes.into();
        *size = b.len();
        *data = Box::into_raw(b) as *mut u8;
        OK
    }

    #[no_mangle]
    pub unsafe extern "C" fn proxy_log(_: LogLevel, message: *const u8, size: usize) -> u32 {
        let text = String::from_utf8_lossy(std::slice::from_raw_parts(message, size)).into_owned();
        with(|h| h.logs.push(text));
        OK
    }

    #[no_mangle]
    pub unsafe extern "C" fn proxy_get_current_time_nanoseconds(out: *mut u64) -> u32 {
        match with(|h| {
            let t = h.now?;
            h.now = Some(t + h.tick);
            Some(t)
        }) {
            Some(t) => {
                *out = t;
                OK
            }
            None => NOT_FOUND,
        }
    }

    #[no_mangle]
    pub unsafe extern "C" fn proxy_get_header_map_pairs(
        map_type: MapType,
        data: *mut *mut u8,
        size: *mut usize,
    ) -> u32 {
        match with(|h| h.maps.get(map_type as usize).cloned().flatten()) {
            Some(m) => give(&m, data, size),
            None => NOT_FOUND,
        }
    }

    /// Envoy answers the map's byte size: the sum of name and value lengths.
    #[no_mangle]
    pub unsafe extern "C" fn proxy_get_header_map_size(map_type: MapType, size: *mut usize) -> u32 {
        let sum = with(|h| {
            let map = h.maps.get(map_type as usize)?.as_ref()?;
            Some(
                wirelens_core::headers::iter_serialized(map)
                    .map(|(n, v)| n.len() + v.len())
                    .sum::<usize>(),
            )
        });
        match sum {
            Some(n) => {
                *size = n;
                OK
            }
            None => NOT_FOUND,
        }
    }

    #[no_mangle]
    pub unsafe extern "C" fn proxy_get_buffer_bytes(
        buffer_type: BufferType,
        start: usize,
        max_size: usize,
        data: *mut *mut u8,
        size: *mut usize,
    ) -> u32 {
        let window = with(|h| {
            let b = h.buffers.get(buffer_type as usize)?.as_ref()?;
            let from = start.min(b.len());
            let to = from.saturating_add(max_size).min(b.len());
            Some(b[from..to].to_vec())
        });
        match window {
            Some(w) => give(&w, data, size),
            None => NOT_FOUND,
        }
    }

    #[no_mangle]
    pub unsafe extern "C" fn proxy_set_property(
        path: *const u8,
        path_size: usize,
        value: *const u8,
        value_size: usize,
    ) -> u32 {
        let key = String::from_utf8_lossy(std::slice::from_raw_parts(path, path_size)).into_owned();
        let value = std::slice::from_raw_parts(value, value_size).to_vec();
        with(|h| h.properties.push((key, value)));
        OK
    }
}

/// A host call's status when it succeeded.
const OK: u32 = Status::Ok as u32;

/// Takes ownership of a buffer the host allocated in our memory through
/// `proxy_on_memory_allocate` (the SDK's allocator: exactly `size` bytes).
///
/// # Safety
/// `data` must be null or come from the host for this call with `size`.
unsafe fn owned(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() {
        Vec::new()
    } else {
        Vec::from_raw_parts(data, size, size)
    }
}

/// Logs at error level (configuration time only; never on the hot path).
pub fn log_error(message: &str) {
    // SAFETY: pointer and length of a live &str.
    unsafe {
        abi::proxy_log(LogLevel::Error, message.as_ptr(), message.len());
    }
}

/// Host wall clock in nanoseconds, `None` if the host refuses.
pub fn now_ns() -> Option<u64> {
    let mut t: u64 = 0;
    // SAFETY: the host writes one u64 through a valid pointer.
    let status = unsafe { abi::proxy_get_current_time_nanoseconds(&mut t) };
    (status == OK).then_some(t)
}

/// A whole header map in the serialized proxy-wasm layout, in one call.
pub fn header_map(map_type: MapType) -> Option<Vec<u8>> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: out-pointers are valid; on OK the host hands us a buffer
    // allocated by our allocator.
    unsafe {
        if abi::proxy_get_header_map_pairs(map_type, &mut data, &mut size) != OK {
            return None;
        }
        Some(owned(data, size))
    }
}

/// The byte size of a header map without copying it: Envoy answers the sum
/// of name and value lengths (`HeaderMap::byteSize`), the measure the record
/// uses. One host call, and no call back into the VM to allocate.
pub fn header_map_size(map_type: MapType) -> Option<usize> {
    let mut size: usize = 0;
    // SAFETY: the host writes one usize through a valid pointer.
    let status = unsafe { abi::proxy_get_header_map_size(map_type, &mut size) };
    (status == OK).then_some(size)
}

/// Up to `max_size` bytes of a host buffer starting at `start`.
pub fn buffer(buffer_type: BufferType, start: usize, max_size: usize) -> Option<Vec<u8>> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: as in `header_map`.
    unsafe {
        if abi::proxy_get_buffer_bytes(buffer_type, start, max_size, &mut data, &mut size) != OK {
            return None;
        }
        Some(owned(data, size))
    }
}

/// `set_property([key], value)`: Envoy stores it as filter state `wasm.<key>`.
/// The error is the raw status (a host may answer one `Status` lacks).
pub fn set_property(key: &str, value: &[u8]) -> Result<(), u32> {
    // SAFETY: pointers and lengths of live slices; a one-element path is
    // the element itself (elements are NUL-separated).
    let status =
        unsafe { abi::proxy_set_property(key.as_ptr(), key.len(), value.as_ptr(), value.len()) };
    if status == OK {
        Ok(())
    } else {
        Err(status)
    }
}
