//! A small proxy-wasm (ABI 0.2.1) host on wasmtime that runs the built
//! wirelens filter module the way Envoy does, for ABI-level tests.
//!
//! * [`FilterModule`] loads and compiles the `.wasm` once per process
//!   ([`FilterModule::shared`]: path from `WIRELENS_FILTER_WASM`, default
//!   `build/wirelens_filter.wasm` of the repository).
//! * [`Vm`] is one instance (one Envoy worker VM): it satisfies **every**
//!   import the module declares — the `env.proxy_*` functions the filter uses
//!   are implemented, every other import records the call and answers an
//!   error status (`Unimplemented`, WASI `ENOSYS`) instead of trapping —,
//!   drives the root context (`_initialize`, `proxy_on_vm_start`,
//!   `proxy_on_configure`) and HTTP stream contexts through their callbacks.
//! * [`HostState`] is what the host saw: `proxy_set_property` calls (raw
//!   path bytes, NUL-separated segments as the ABI serializes them),
//!   `proxy_log` lines, WASI output, every host call (name and context), and
//!   reads of maps/buffers that Envoy would not have offered in that phase.
//!
//! Envoy's data model is mirrored where the filter can observe it: a header
//! map or body buffer is only visible during its own callback (Envoy clears
//! its pointer once the callback returns `Continue`); outside it a map reads
//! as empty (`Ok`, null pointer, size 0) and a body as zero bytes. In the
//! log phase the request headers, response headers and response trailers
//! are visible again (Envoy's access-log maps). The clock is whatever the
//! test set ([`Vm::set_time_ns`]); it does not move by itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context as _, Result};
use wasmtime::{
    Caller, Engine, Extern, ExternType, Func, Instance, Linker, Memory, Module, Store, Val, ValType,
};

/// proxy-wasm `WasmResult` status codes (ABI 0.2.1).
pub mod status {
    pub const OK: i32 = 0;
    pub const NOT_FOUND: i32 = 1;
    pub const BAD_ARGUMENT: i32 = 2;
    pub const INVALID_MEMORY_ACCESS: i32 = 6;
    pub const INTERNAL_FAILURE: i32 = 10;
    pub const UNIMPLEMENTED: i32 = 12;
}

/// `proxy_action_t`: what an HTTP callback returns.
pub mod action {
    pub const CONTINUE: i32 = 0;
    pub const PAUSE: i32 = 1;
}

/// Header map types (`proxy_map_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum MapType {
    RequestHeaders = 0,
    RequestTrailers = 1,
    ResponseHeaders = 2,
    ResponseTrailers = 3,
    GrpcReceiveInitialMetadata = 4,
    GrpcReceiveTrailingMetadata = 5,
    HttpCallResponseHeaders = 6,
    HttpCallResponseTrailers = 7,
}
const MAP_TYPE_MAX: u32 = 7;

/// Buffer types (`proxy_buffer_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum BufferType {
    RequestBody = 0,
    ResponseBody = 1,
    DownstreamData = 2,
    UpstreamData = 3,
    HttpCallResponseBody = 4,
    GrpcReceiveBuffer = 5,
    VmConfiguration = 6,
    PluginConfiguration = 7,
}
const BUFFER_TYPE_MAX: u32 = 7;

/// The `env` imports this host implements; every other import is
/// satisfied by a recording stub.
pub const IMPLEMENTED: &[&str] = &[
    "proxy_log",
    "proxy_get_current_time_nanoseconds",
    "proxy_get_header_map_pairs",
    "proxy_get_header_map_size",
    "proxy_get_buffer_bytes",
    "proxy_set_property",
];

/// The WASI functions this host implements (output captured, empty
/// environment, `proc_exit` recorded and ends the call).
pub const WASI_IMPLEMENTED: &[&str] =
    &["fd_write", "environ_get", "environ_sizes_get", "proc_exit"];

/// A header map: ordered (name, value) entries, as bytes.
pub type Headers = Vec<(Vec<u8>, Vec<u8>)>;

/// Builds a [`Headers`] from string pairs.
pub fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Σ(name length + value length): the size the filter reports for a map.
pub fn header_bytes(h: &Headers) -> u64 {
    h.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum()
}

/// The proxy-wasm serialized header map: `u32 count`, then per entry
/// `u32 name_len, u32 value_len`, then per entry `name \0 value \0`
/// (little-endian), as proxy-wasm-cpp-host's `marshalPairs` writes it.
pub fn serialize_pairs(h: &Headers) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    for (n, v) in h {
        out.extend_from_slice(&(n.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (n, v) in h {
        out.extend_from_slice(n);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// One `proxy_set_property` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    /// The context that was current when the filter set it.
    pub context_id: u32,
    /// The path exactly as passed (segments separated by NUL).
    pub path: Vec<u8>,
    pub value: Vec<u8>,
}

impl Property {
    /// The path split into its NUL-separated segments (lossy UTF-8).
    pub fn segments(&self) -> Vec<String> {
        self.path
            .split(|&b| b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    }
    pub fn value_str(&self) -> String {
        String::from_utf8_lossy(&self.value).into_owned()
    }
}

/// One `proxy_log` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub context_id: u32,
    pub level: i32,
    pub message: String,
}

/// One call of any import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCall {
    /// `module.name`, e.g. `env.proxy_get_buffer_bytes`.
    pub name: String,
    pub context_id: u32,
    /// The raw arguments (i32/i64 as i64).
    pub args: Vec<i64>,
}

/// Which callback is running (decides which maps and buffers are visible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Initialize,
    VmStart,
    Configure,
    ContextCreate,
    RequestHeaders,
    RequestBody,
    RequestTrailers,
    ResponseHeaders,
    ResponseBody,
    ResponseTrailers,
    Log,
    Done,
    Delete,
}

/// What one HTTP stream has shown the host so far (for the log phase).
#[derive(Clone, Debug, Default)]
struct StreamMaps {
    request_headers: Option<Headers>,
    response_headers: Option<Headers>,
    response_trailers: Option<Headers>,
}

/// Everything the host knows and records. Public fields are the test's to
/// read and to change between callbacks.
pub struct HostState {
    /// `proxy_get_current_time_nanoseconds` answers this; `None` → the
    /// host refuses with `NOT_FOUND` (Envoy never does; for tests).
    pub clock_ns: Option<u64>,
    /// Status `proxy_set_property` answers (recorded either way).
    pub set_property_status: i32,
    /// Status `proxy_get_buffer_bytes` answers for body buffers when not OK
    /// (e.g. to test a refused body read).
    pub body_read_status: i32,
    pub properties: Vec<Property>,
    pub logs: Vec<LogLine>,
    /// WASI `fd_write` output by fd.
    pub fd_output: BTreeMap<i32, Vec<u8>>,
    pub calls: Vec<HostCall>,
    /// Calls of imports this host does not implement (also in `calls`).
    pub unimplemented_calls: Vec<HostCall>,
    /// Map/buffer reads Envoy would have answered with nothing (a map of
    /// another phase, a body outside its callback), with the phase.
    pub out_of_phase_reads: Vec<String>,
    /// `proc_exit` codes (the call traps, as it must not return).
    pub proc_exits: Vec<i32>,
    /// Body bytes handed to the module through `proxy_get_buffer_bytes`.
    pub body_bytes_copied: u64,

    phase: Phase,
    context_id: u32,
    plugin_configuration: Option<Vec<u8>>,
    vm_configuration: Vec<u8>,
    /// The map of the running callback.
    current_map: Option<(MapType, Headers)>,
    /// The body chunk of the running callback.
    current_body: Option<(BufferType, Vec<u8>)>,
    streams: BTreeMap<u32, StreamMaps>,
}

impl HostState {
    fn new() -> Self {
        HostState {
            clock_ns: Some(1_700_000_000_000_000_000),
            set_property_status: status::OK,
            body_read_status: status::OK,
            properties: Vec::new(),
            logs: Vec::new(),
            fd_output: BTreeMap::new(),
            calls: Vec::new(),
            unimplemented_calls: Vec::new(),
            out_of_phase_reads: Vec::new(),
            proc_exits: Vec::new(),
            body_bytes_copied: 0,
            phase: Phase::Idle,
            context_id: 0,
            plugin_configuration: None,
            vm_configuration: Vec::new(),
            current_map: None,
            current_body: None,
            streams: BTreeMap::new(),
        }
    }

    fn record(&mut self, name: &str, args: &[i64]) {
        self.calls.push(HostCall {
            name: name.to_string(),
            context_id: self.context_id,
            args: args.to_vec(),
        });
    }

    /// Host calls per import name.
    pub fn call_counts(&self) -> BTreeMap<String, usize> {
        count_calls(&self.calls)
    }

    /// Takes (and clears) the recorded properties.
    pub fn take_properties(&mut self) -> Vec<Property> {
        std::mem::take(&mut self.properties)
    }

    /// Takes (and clears) the recorded host calls.
    pub fn take_calls(&mut self) -> Vec<HostCall> {
        std::mem::take(&mut self.calls)
    }

    /// The map Envoy would show for `map_type` right now.
    fn visible_map(&mut self, map_type: u32) -> Option<Headers> {
        if let Some((t, h)) = &self.current_map {
            if *t as u32 == map_type {
                return Some(h.clone());
            }
        }
        if self.phase == Phase::Log {
            let s = self.streams.get(&self.context_id)?;
            return match map_type {
                0 => s.request_headers.clone(),
                2 => s.response_headers.clone(),
                3 => s.response_trailers.clone(),
                _ => None,
            };
        }
        None
    }
}

/// Host calls per import name.
pub fn count_calls(calls: &[HostCall]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for c in calls {
        *m.entry(c.name.clone()).or_insert(0) += 1;
    }
    m
}

/// The compiled filter module (compiled once per process).
pub struct FilterModule {
    pub path: PathBuf,
    engine: Engine,
    module: Module,
}

impl FilterModule {
    /// `WIRELENS_FILTER_WASM`, else `build/wirelens_filter.wasm` of the
    /// repository (`../../build/` from this crate).
    pub fn default_path() -> PathBuf {
        match std::env::var_os("WIRELENS_FILTER_WASM") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/wirelens_filter.wasm"),
        }
    }

    pub fn load(path: &Path) -> Result<FilterModule> {
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "reading the filter module {} (build it with `make filter`, or set WIRELENS_FILTER_WASM)",
                path.display()
            )
        })?;
        let engine = Engine::default();
        let module = Module::new(&engine, &bytes)
            .map_err(|e| anyhow!("compiling {}: {e:?}", path.display()))?;
        Ok(FilterModule {
            path: path.to_path_buf(),
            engine,
            module,
        })
    }

    /// The module at [`FilterModule::default_path`], loaded once.
    pub fn shared() -> &'static FilterModule {
        static MODULE: OnceLock<FilterModule> = OnceLock::new();
        MODULE.get_or_init(|| {
            let path = Self::default_path();
            Self::load(&path).unwrap_or_else(|e| panic!("{e:#}"))
        })
    }

    /// (module, name, type) of every import.
    pub fn imports(&self) -> Vec<(String, String, String)> {
        self.module
            .imports()
            .map(|i| {
                (
                    i.module().to_string(),
                    i.name().to_string(),
                    format!("{:?}", i.ty()),
                )
            })
            .collect()
    }

    /// Names of every export.
    pub fn exports(&self) -> Vec<String> {
        self.module
            .exports()
            .map(|e| e.name().to_string())
            .collect()
    }
}

/// The exported functions that look like the linker's constructor and
/// destructor wrappers: their body calls, first or last, a no-argument,
/// no-result function that the body of another export calls the same way.
/// A module whose `_initialize` runs `__wasm_call_ctors` has none.
pub fn wrapped_exports(wasm: &[u8]) -> Result<Vec<String>> {
    use wasmparser::{CompositeInnerType, ExternalKind, Operator, Parser, Payload, TypeRef};
    let mut void_type = Vec::new(); // per type index: is it () -> ()
    let mut type_of = Vec::new(); // per function index (imports first)
    let mut imported = 0usize;
    let mut exports = Vec::new();
    let mut edge_calls = Vec::new(); // per defined function: (first call, last call)
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.context("parsing the module")? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for sub in group?.into_types() {
                        void_type.push(matches!(&sub.composite_type.inner,
                            CompositeInnerType::Func(f) if f.params().is_empty() && f.results().is_empty()));
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if let TypeRef::Func(t) = import?.ty {
                        type_of.push(t);
                        imported += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for t in reader {
                    type_of.push(t?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    if export.kind == ExternalKind::Func {
                        exports.push((export.name.to_string(), export.index as usize));
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let mut ops = Vec::new();
                for op in body.get_operators_reader()? {
                    ops.push(op?);
                }
                let call = |op: Option<&Operator>| match op {
                    Some(Operator::Call { function_index }) => Some(*function_index as usize),
                    _ => None,
                };
                // The last operator is the body's `end`.
                let last = ops.len().checked_sub(2).and_then(|i| ops.get(i));
                edge_calls.push((call(ops.first()), call(last)));
            }
            _ => {}
        }
    }
    let is_void = |f: usize| {
        type_of
            .get(f)
            .and_then(|t| void_type.get(*t as usize))
            .copied()
            .unwrap_or(false)
    };
    let edges_of = |f: usize| -> Vec<usize> {
        f.checked_sub(imported)
            .and_then(|i| edge_calls.get(i))
            .map(|(first, last)| {
                [*first, *last]
                    .into_iter()
                    .flatten()
                    .filter(|g| is_void(*g))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut uses: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, f) in &exports {
        let mut edges = edges_of(*f);
        edges.dedup();
        for g in edges {
            *uses.entry(g).or_default() += 1;
        }
    }
    Ok(exports
        .iter()
        .filter(|(_, f)| edges_of(*f).iter().any(|g| uses[g] > 1))
        .map(|(name, _)| name.clone())
        .collect())
}

/// One VM: an instance of the filter module and its host.
pub struct Vm {
    store: Store<HostState>,
    instance: Instance,
    memory: Memory,
    pub root_id: u32,
    next_id: u32,
}

fn mem(caller: &mut Caller<'_, HostState>) -> Option<Memory> {
    caller.get_export("memory").and_then(Extern::into_memory)
}

fn read_bytes(caller: &mut Caller<'_, HostState>, ptr: i32, len: i32) -> Option<Vec<u8>> {
    let m = mem(caller)?;
    let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
    let data = m.data(&*caller);
    data.get(ptr..ptr.checked_add(len)?).map(<[u8]>::to_vec)
}

fn write_bytes(caller: &mut Caller<'_, HostState>, ptr: i32, bytes: &[u8]) -> bool {
    match mem(caller) {
        Some(m) => m.write(&mut *caller, ptr as u32 as usize, bytes).is_ok(),
        None => false,
    }
}

fn write_u32(caller: &mut Caller<'_, HostState>, ptr: i32, v: u32) -> bool {
    write_bytes(caller, ptr, &v.to_le_bytes())
}

/// Copies `bytes` into module memory allocated through the module's
/// `malloc` or, failing that, `proxy_on_memory_allocate` (the order Envoy's
/// host looks them up in; the Rust SDK exports `malloc` on
/// wasm32-unknown-unknown) and writes (pointer, size) to the two return
/// slots; empty → (0, 0) without allocating (as `copyToPointerSize`).
fn copy_out(
    caller: &mut Caller<'_, HostState>,
    bytes: &[u8],
    ptr_ptr: i32,
    size_ptr: i32,
) -> wasmtime::Result<i32> {
    let mut ptr = 0u32;
    if !bytes.is_empty() {
        let Some(alloc) = caller
            .get_export("malloc")
            .or_else(|| caller.get_export("proxy_on_memory_allocate"))
            .and_then(Extern::into_func)
        else {
            return Ok(status::INTERNAL_FAILURE);
        };
        let alloc = alloc.typed::<i32, i32>(&*caller)?;
        ptr = alloc.call(&mut *caller, bytes.len() as i32)? as u32;
        if ptr == 0 || !write_bytes(caller, ptr as i32, bytes) {
            return Ok(status::INVALID_MEMORY_ACCESS);
        }
    }
    if !write_u32(caller, ptr_ptr, ptr) || !write_u32(caller, size_ptr, bytes.len() as u32) {
        return Ok(status::INVALID_MEMORY_ACCESS);
    }
    Ok(status::OK)
}

fn define_env(linker: &mut Linker<HostState>) -> Result<()> {
    linker.func_wrap(
        "env",
        "proxy_log",
        |mut c: Caller<'_, HostState>, level: i32, ptr: i32, size: i32| -> i32 {
            c.data_mut()
                .record("env.proxy_log", &[level.into(), ptr.into(), size.into()]);
            let Some(bytes) = read_bytes(&mut c, ptr, size) else {
                return status::INVALID_MEMORY_ACCESS;
            };
            let h = c.data_mut();
            h.logs.push(LogLine {
                context_id: h.context_id,
                level,
                message: String::from_utf8_lossy(&bytes).into_owned(),
            });
            status::OK
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_current_time_nanoseconds",
        |mut c: Caller<'_, HostState>, out: i32| -> i32 {
            c.data_mut()
                .record("env.proxy_get_current_time_nanoseconds", &[out.into()]);
            match c.data().clock_ns {
                Some(t) => {
                    if write_bytes(&mut c, out, &t.to_le_bytes()) {
                        status::OK
                    } else {
                        status::INVALID_MEMORY_ACCESS
                    }
                }
                None => status::NOT_FOUND,
            }
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_pairs",
        |mut c: Caller<'_, HostState>,
         map_type: i32,
         ptr_ptr: i32,
         size_ptr: i32|
         -> wasmtime::Result<i32> {
            c.data_mut().record(
                "env.proxy_get_header_map_pairs",
                &[map_type.into(), ptr_ptr.into(), size_ptr.into()],
            );
            if map_type as u32 > MAP_TYPE_MAX {
                return Ok(status::BAD_ARGUMENT);
            }
            // Envoy: a map that is not available reads as an empty map (Ok).
            let pairs = match c.data_mut().visible_map(map_type as u32) {
                Some(h) => h,
                None => {
                    let h = c.data_mut();
                    let note = format!("header map {map_type} in {:?}", h.phase);
                    h.out_of_phase_reads.push(note);
                    Vec::new()
                }
            };
            let bytes = if pairs.is_empty() {
                Vec::new()
            } else {
                serialize_pairs(&pairs)
            };
            copy_out(&mut c, &bytes, ptr_ptr, size_ptr)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_header_map_size",
        |mut c: Caller<'_, HostState>, map_type: i32, size_ptr: i32| -> wasmtime::Result<i32> {
            c.data_mut().record(
                "env.proxy_get_header_map_size",
                &[map_type.into(), size_ptr.into()],
            );
            if map_type as u32 > MAP_TYPE_MAX {
                return Ok(status::BAD_ARGUMENT);
            }
            // Envoy: `HeaderMap::byteSize()`, Σ(name + value lengths); a map
            // that is not available is a BadArgument.
            let Some(pairs) = c.data_mut().visible_map(map_type as u32) else {
                let h = c.data_mut();
                let note = format!("header map size {map_type} in {:?}", h.phase);
                h.out_of_phase_reads.push(note);
                return Ok(status::BAD_ARGUMENT);
            };
            if !write_u32(&mut c, size_ptr, header_bytes(&pairs) as u32) {
                return Ok(status::INVALID_MEMORY_ACCESS);
            }
            Ok(status::OK)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_get_buffer_bytes",
        |mut c: Caller<'_, HostState>,
         buffer_type: i32,
         start: i32,
         max_size: i32,
         ptr_ptr: i32,
         size_ptr: i32|
         -> wasmtime::Result<i32> {
            c.data_mut().record(
                "env.proxy_get_buffer_bytes",
                &[
                    buffer_type.into(),
                    start.into(),
                    max_size.into(),
                    ptr_ptr.into(),
                    size_ptr.into(),
                ],
            );
            let t = buffer_type as u32;
            if t > BUFFER_TYPE_MAX {
                return Ok(status::BAD_ARGUMENT);
            }
            let h = c.data_mut();
            let buffer: Option<Vec<u8>> = if t == BufferType::PluginConfiguration as u32 {
                h.plugin_configuration.clone()
            } else if t == BufferType::VmConfiguration as u32 {
                Some(h.vm_configuration.clone())
            } else if t == BufferType::RequestBody as u32 || t == BufferType::ResponseBody as u32 {
                if h.body_read_status != status::OK {
                    return Ok(h.body_read_status);
                }
                match &h.current_body {
                    Some((bt, b)) if *bt as u32 == t => Some(b.clone()),
                    _ => {
                        // Envoy: the body pointer is null outside its callback → 0 bytes.
                        let note = format!("body buffer {t} in {:?}", h.phase);
                        h.out_of_phase_reads.push(note);
                        Some(Vec::new())
                    }
                }
            } else {
                None
            };
            let Some(buffer) = buffer else {
                return Ok(status::NOT_FOUND);
            };
            let (start, max) = (start as u32 as usize, max_size as u32 as usize);
            let window: &[u8] = if start >= buffer.len() {
                &[]
            } else {
                &buffer[start..start + max.min(buffer.len() - start)]
            };
            if t <= BufferType::ResponseBody as u32 {
                h.body_bytes_copied += window.len() as u64;
            }
            let window = window.to_vec();
            copy_out(&mut c, &window, ptr_ptr, size_ptr)
        },
    )?;
    linker.func_wrap(
        "env",
        "proxy_set_property",
        |mut c: Caller<'_, HostState>,
         path_ptr: i32,
         path_size: i32,
         value_ptr: i32,
         value_size: i32|
         -> i32 {
            c.data_mut().record(
                "env.proxy_set_property",
                &[
                    path_ptr.into(),
                    path_size.into(),
                    value_ptr.into(),
                    value_size.into(),
                ],
            );
            let (Some(path), Some(value)) = (
                read_bytes(&mut c, path_ptr, path_size),
                read_bytes(&mut c, value_ptr, value_size),
            ) else {
                return status::INVALID_MEMORY_ACCESS;
            };
            let h = c.data_mut();
            h.properties.push(Property {
                context_id: h.context_id,
                path,
                value,
            });
            h.set_property_status
        },
    )?;
    Ok(())
}

fn define_wasi(linker: &mut Linker<HostState>) -> Result<()> {
    const WASI: &str = "wasi_snapshot_preview1";
    linker.func_wrap(
        WASI,
        "fd_write",
        |mut c: Caller<'_, HostState>, fd: i32, iovs: i32, iovs_len: i32, nwritten: i32| -> i32 {
            c.data_mut().record(
                "wasi_snapshot_preview1.fd_write",
                &[fd.into(), iovs.into(), iovs_len.into(), nwritten.into()],
            );
            let mut out = Vec::new();
            for i in 0..iovs_len.max(0) {
                let Some(iov) = read_bytes(&mut c, iovs.wrapping_add(i * 8), 8) else {
                    return 21; // EFAULT
                };
                let p = u32::from_le_bytes(iov[0..4].try_into().unwrap());
                let l = u32::from_le_bytes(iov[4..8].try_into().unwrap());
                let Some(b) = read_bytes(&mut c, p as i32, l as i32) else {
                    return 21;
                };
                out.extend_from_slice(&b);
            }
            let n = out.len() as u32;
            c.data_mut()
                .fd_output
                .entry(fd)
                .or_default()
                .extend_from_slice(&out);
            if !write_u32(&mut c, nwritten, n) {
                return 21;
            }
            0
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut c: Caller<'_, HostState>, count: i32, size: i32| -> i32 {
            c.data_mut().record(
                "wasi_snapshot_preview1.environ_sizes_get",
                &[count.into(), size.into()],
            );
            if write_u32(&mut c, count, 0) && write_u32(&mut c, size, 0) {
                0
            } else {
                21
            }
        },
    )?;
    linker.func_wrap(
        WASI,
        "environ_get",
        |mut c: Caller<'_, HostState>, environ: i32, buf: i32| -> i32 {
            c.data_mut().record(
                "wasi_snapshot_preview1.environ_get",
                &[environ.into(), buf.into()],
            );
            0
        },
    )?;
    linker.func_wrap(
        WASI,
        "proc_exit",
        |mut c: Caller<'_, HostState>, code: i32| -> wasmtime::Result<()> {
            c.data_mut()
                .record("wasi_snapshot_preview1.proc_exit", &[code.into()]);
            c.data_mut().proc_exits.push(code);
            // proc_exit must not return: end the call.
            Err(wasmtime::Error::msg(format!("proc_exit({code})")))
        },
    )?;
    Ok(())
}

/// Satisfies every import not defined yet: records the call, returns
/// `Unimplemented` (WASI: `ENOSYS`) in an i32 result, zero otherwise.
fn define_stubs(
    linker: &mut Linker<HostState>,
    module: &Module,
    defined: &[(&str, &str)],
) -> Result<()> {
    for import in module.imports() {
        let ExternType::Func(ty) = import.ty() else {
            bail!(
                "import {}.{} is not a function; this host only provides functions",
                import.module(),
                import.name()
            );
        };
        let (m, n) = (import.module().to_string(), import.name().to_string());
        if defined.iter().any(|(dm, dn)| *dm == m && *dn == n) {
            continue;
        }
        let full = format!("{m}.{n}");
        let code = if m == "env" {
            status::UNIMPLEMENTED
        } else {
            52 /* ENOSYS */
        };
        let result_types: Vec<ValType> = ty.results().collect();
        linker.func_new(
            &m,
            &n,
            ty,
            move |mut c, args: &[Val], results: &mut [Val]| {
                let args: Vec<i64> = args
                    .iter()
                    .map(|a| match a {
                        Val::I32(v) => i64::from(*v),
                        Val::I64(v) => *v,
                        _ => 0,
                    })
                    .collect();
                let h = c.data_mut();
                h.record(&full, &args);
                let call = h.calls.last().cloned().expect("just recorded");
                h.unimplemented_calls.push(call);
                for (r, t) in results.iter_mut().zip(&result_types) {
                    *r = match t {
                        ValType::I32 => Val::I32(code),
                        ValType::I64 => Val::I64(i64::from(code)),
                        ValType::F32 => Val::F32(0),
                        ValType::F64 => Val::F64(0),
                        _ => Val::I32(0),
                    };
                }
                Ok(())
            },
        )?;
    }
    Ok(())
}

fn to_i32(v: &Val) -> Option<i32> {
    match v {
        Val::I32(x) => Some(*x),
        _ => None,
    }
}

impl Vm {
    /// Instantiates the shared module and runs its start function
    /// (`_initialize` for a reactor, `_start` for a command).
    pub fn new() -> Result<Vm> {
        Self::with_module(FilterModule::shared())
    }

    pub fn with_module(fm: &FilterModule) -> Result<Vm> {
        let mut linker: Linker<HostState> = Linker::new(&fm.engine);
        define_env(&mut linker)?;
        define_wasi(&mut linker)?;
        let mut defined: Vec<(&str, &str)> = IMPLEMENTED.iter().map(|n| ("env", *n)).collect();
        defined.extend(
            WASI_IMPLEMENTED
                .iter()
                .map(|n| ("wasi_snapshot_preview1", *n)),
        );
        define_stubs(&mut linker, &fm.module, &defined)?;
        let mut store = Store::new(&fm.engine, HostState::new());
        let instance = linker
            .instantiate(&mut store, &fm.module)
            .map_err(|e| anyhow!("instantiating: {e:?}"))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| anyhow!("the module exports no memory"))?;
        let mut vm = Vm {
            store,
            instance,
            memory,
            root_id: 1,
            next_id: 2,
        };
        for start in ["_initialize", "_start"] {
            if vm.instance.get_func(&mut vm.store, start).is_some() {
                vm.call(Phase::Initialize, 0, start, &[])?;
                break;
            }
        }
        Ok(vm)
    }

    /// A fresh VM with its root context started and configured; the
    /// result of `proxy_on_configure` is returned (false: plugin refused).
    pub fn configured(plugin_configuration: &[u8]) -> Result<(Vm, bool)> {
        let mut vm = Vm::new()?;
        let ok = vm.start_root(plugin_configuration)?;
        Ok((vm, ok))
    }

    /// A fresh VM whose configuration must be accepted.
    pub fn with_config(plugin_configuration: &str) -> Result<Vm> {
        let (vm, ok) = Vm::configured(plugin_configuration.as_bytes())?;
        if !ok {
            bail!(
                "proxy_on_configure refused {plugin_configuration:?}: logs {:?}",
                vm.host().logs
            );
        }
        Ok(vm)
    }

    pub fn host(&self) -> &HostState {
        self.store.data()
    }

    pub fn host_mut(&mut self) -> &mut HostState {
        self.store.data_mut()
    }

    /// The module's linear memory size in 64 KiB pages.
    pub fn memory_pages(&self) -> u64 {
        self.memory.size(&self.store)
    }

    pub fn set_time_ns(&mut self, t: u64) {
        self.host_mut().clock_ns = Some(t);
    }

    /// Calls an export with i32 arguments, returning its i32 result (if any).
    /// Any trap is an error.
    pub fn call(
        &mut self,
        phase: Phase,
        context_id: u32,
        name: &str,
        args: &[i32],
    ) -> Result<Option<i32>> {
        let func: Func = self
            .instance
            .get_func(&mut self.store, name)
            .ok_or_else(|| anyhow!("the module does not export {name}"))?;
        let ty = func.ty(&self.store);
        let params: Vec<Val> = args.iter().map(|a| Val::I32(*a)).collect();
        if ty.params().len() != params.len() {
            bail!(
                "{name}: expects {} parameters, given {}",
                ty.params().len(),
                params.len()
            );
        }
        let mut results = vec![Val::I32(0); ty.results().len()];
        let h = self.store.data_mut();
        let (saved_phase, saved_ctx) = (h.phase, h.context_id);
        h.phase = phase;
        h.context_id = context_id;
        let r = func.call(&mut self.store, &params, &mut results);
        let h = self.store.data_mut();
        h.phase = saved_phase;
        h.context_id = saved_ctx;
        r.map_err(|e| {
            let logs: Vec<String> = self.host().logs.iter().map(|l| l.message.clone()).collect();
            anyhow!("{name}({args:?}) trapped: {e:?}\nmodule logs: {logs:?}")
        })?;
        Ok(results.first().and_then(to_i32))
    }

    fn bool_call(&mut self, phase: Phase, ctx: u32, name: &str, args: &[i32]) -> Result<bool> {
        match self.call(phase, ctx, name, args)? {
            Some(v) => Ok(v != 0),
            None => bail!("{name} returned nothing"),
        }
    }

    /// Whether the module exports the function `name`. Like Envoy's host
    /// (proxy-wasm-cpp-host), this one skips a stream callback the module
    /// does not export: a missing HTTP callback means Continue, a missing
    /// `proxy_on_done` means done.
    pub fn exports_function(&mut self, name: &str) -> bool {
        self.instance.get_func(&mut self.store, name).is_some()
    }

    /// Calls an HTTP callback that returns an action; it must be Continue.
    /// Not exported: skipped (Continue).
    fn action_call(&mut self, phase: Phase, ctx: u32, name: &str, args: &[i32]) -> Result<()> {
        if !self.exports_function(name) {
            return Ok(());
        }
        match self.call(phase, ctx, name, args)? {
            Some(action::CONTINUE) => Ok(()),
            other => bail!("{name}{args:?} returned {other:?}, not Continue (0)"),
        }
    }

    /// `proxy_on_context_create(root, 0)`, `proxy_on_vm_start`,
    /// `proxy_on_configure` with these plugin configuration bytes, for the
    /// first root context ([`Vm::root_id`]).
    pub fn start_root(&mut self, plugin_configuration: &[u8]) -> Result<bool> {
        let root = self.root_id;
        self.init_root(root, plugin_configuration)
    }

    /// Another plugin (root context) in the same VM, as Envoy does for
    /// plugins sharing a VM: returns its id and the configure result.
    pub fn add_root(&mut self, plugin_configuration: &[u8]) -> Result<(u32, bool)> {
        let id = self.next_id;
        self.next_id += 1;
        let ok = self.init_root(id, plugin_configuration)?;
        Ok((id, ok))
    }

    fn init_root(&mut self, root: u32, plugin_configuration: &[u8]) -> Result<bool> {
        self.call(
            Phase::ContextCreate,
            root,
            "proxy_on_context_create",
            &[root as i32, 0],
        )?;
        let vm_cfg = self.host().vm_configuration.len() as i32;
        if !self.bool_call(
            Phase::VmStart,
            root,
            "proxy_on_vm_start",
            &[root as i32, vm_cfg],
        )? {
            bail!("proxy_on_vm_start returned false");
        }
        self.configure_root(root, plugin_configuration)
    }

    /// `proxy_on_configure` of the first root context.
    pub fn configure(&mut self, plugin_configuration: &[u8]) -> Result<bool> {
        let root = self.root_id;
        self.configure_root(root, plugin_configuration)
    }

    /// `proxy_on_configure` (the configuration buffer is visible during it).
    pub fn configure_root(&mut self, root: u32, plugin_configuration: &[u8]) -> Result<bool> {
        self.host_mut().plugin_configuration = Some(plugin_configuration.to_vec());
        let r = self.bool_call(
            Phase::Configure,
            root,
            "proxy_on_configure",
            &[root as i32, plugin_configuration.len() as i32],
        );
        self.host_mut().plugin_configuration = None;
        r
    }

    /// Creates an HTTP stream context of the first root; returns its id.
    pub fn create_stream(&mut self) -> Result<u32> {
        let root = self.root_id;
        self.create_stream_in(root)
    }

    /// Creates an HTTP stream context of `root`; returns its id.
    pub fn create_stream_in(&mut self, root: u32) -> Result<u32> {
        let id = self.next_id;
        self.next_id += 1;
        self.host_mut().streams.insert(id, StreamMaps::default());
        self.call(
            Phase::ContextCreate,
            id,
            "proxy_on_context_create",
            &[id as i32, root as i32],
        )?;
        Ok(id)
    }

    fn with_map<R>(
        &mut self,
        t: MapType,
        h: &Headers,
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<R> {
        self.host_mut().current_map = Some((t, h.clone()));
        let r = f(self);
        self.host_mut().current_map = None;
        r
    }

    fn with_body<R>(
        &mut self,
        t: BufferType,
        b: &[u8],
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<R> {
        self.host_mut().current_body = Some((t, b.to_vec()));
        let r = f(self);
        self.host_mut().current_body = None;
        r
    }

    pub fn request_headers(&mut self, ctx: u32, h: &Headers, end_of_stream: bool) -> Result<()> {
        if let Some(s) = self.host_mut().streams.get_mut(&ctx) {
            s.request_headers = Some(h.clone());
        }
        self.with_map(MapType::RequestHeaders, h, |vm| {
            vm.action_call(
                Phase::RequestHeaders,
                ctx,
                "proxy_on_request_headers",
                &[ctx as i32, h.len() as i32, end_of_stream as i32],
            )
        })
    }

    pub fn request_body(&mut self, ctx: u32, chunk: &[u8], end_of_stream: bool) -> Result<()> {
        self.with_body(BufferType::RequestBody, chunk, |vm| {
            vm.action_call(
                Phase::RequestBody,
                ctx,
                "proxy_on_request_body",
                &[ctx as i32, chunk.len() as i32, end_of_stream as i32],
            )
        })
    }

    pub fn request_trailers(&mut self, ctx: u32, t: &Headers) -> Result<()> {
        self.with_map(MapType::RequestTrailers, t, |vm| {
            vm.action_call(
                Phase::RequestTrailers,
                ctx,
                "proxy_on_request_trailers",
                &[ctx as i32, t.len() as i32],
            )
        })
    }

    pub fn response_headers(&mut self, ctx: u32, h: &Headers, end_of_stream: bool) -> Result<()> {
        if let Some(s) = self.host_mut().streams.get_mut(&ctx) {
            s.response_headers = Some(h.clone());
        }
        self.with_map(MapType::ResponseHeaders, h, |vm| {
            vm.action_call(
                Phase::ResponseHeaders,
                ctx,
                "proxy_on_response_headers",
                &[ctx as i32, h.len() as i32, end_of_stream as i32],
            )
        })
    }

    pub fn response_body(&mut self, ctx: u32, chunk: &[u8], end_of_stream: bool) -> Result<()> {
        self.with_body(BufferType::ResponseBody, chunk, |vm| {
            vm.action_call(
                Phase::ResponseBody,
                ctx,
                "proxy_on_response_body",
                &[ctx as i32, chunk.len() as i32, end_of_stream as i32],
            )
        })
    }

    pub fn response_trailers(&mut self, ctx: u32, t: &Headers) -> Result<()> {
        if let Some(s) = self.host_mut().streams.get_mut(&ctx) {
            s.response_trailers = Some(t.clone());
        }
        self.with_map(MapType::ResponseTrailers, t, |vm| {
            vm.action_call(
                Phase::ResponseTrailers,
                ctx,
                "proxy_on_response_trailers",
                &[ctx as i32, t.len() as i32],
            )
        })
    }

    /// `proxy_on_log` (Envoy's access-log phase); skipped if not exported.
    pub fn log(&mut self, ctx: u32) -> Result<()> {
        if self.exports_function("proxy_on_log") {
            self.call(Phase::Log, ctx, "proxy_on_log", &[ctx as i32])?;
        }
        Ok(())
    }

    /// `proxy_on_done`; must return true (the context is done). Not
    /// exported: done, as Envoy assumes.
    pub fn done(&mut self, ctx: u32) -> Result<()> {
        if !self.exports_function("proxy_on_done") {
            return Ok(());
        }
        if !self.bool_call(Phase::Done, ctx, "proxy_on_done", &[ctx as i32])? {
            bail!("proxy_on_done({ctx}) returned false");
        }
        Ok(())
    }

    /// `proxy_on_delete`; skipped if not exported.
    pub fn delete(&mut self, ctx: u32) -> Result<()> {
        if self.exports_function("proxy_on_delete") {
            self.call(Phase::Delete, ctx, "proxy_on_delete", &[ctx as i32])?;
        }
        self.host_mut().streams.remove(&ctx);
        Ok(())
    }

    /// The end of every stream, in Envoy's order: access log (`on_log`),
    /// then filter destruction (`on_done`, `on_delete`).
    pub fn finish(&mut self, ctx: u32) -> Result<()> {
        self.log(ctx)?;
        self.done(ctx)?;
        self.delete(ctx)
    }
}

/// gRPC length-prefixed frame: flags, big-endian u32 length, payload.
pub fn grpc_frame(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(5 + payload.len());
    f.push(flags);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Standard base64 with padding (RFC 4648), for grpc-web-text bodies.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Percent-encodes every byte outside printable ASCII and `%` itself, as
/// gRPC encodes `grpc-message`.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for &b in s.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
