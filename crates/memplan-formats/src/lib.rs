//! memplan-formats: bytes in, bytes out. Every format memplan reads or writes lives here, and
//! nothing else does: the planner itself (`memplan-core`) never sees a byte of a file.
//!
//! - [`json`]: the native memplan JSON dump, version 1 (a graph).
//! - [`minimalloc`]: minimalloc CSV (buffers with half-open lifetimes, optionally offsets).
//! - [`torch`]: PyTorch CUDA memory snapshots, through the safe unpickler [`pickle`].
//! - [`xla`]: XLA buffer assignments with their live ranges, and XLA's own plan.
//! - [`tflite`]: TFLite models, and an offline plan they carry.
//! - [`report`]: the plan report that `memplan plan --json` prints and `memplan check` reads.
//! - [`hardware`]: device classes' memory terms (strict TOML).
//! - [`load`]: detects the format of some bytes and imports them.
//!
//! Every importer returns a [`FormatError`] that says what is wrong and where (a line, a JSON
//! path, an element id); none panics on any input.

mod allocations;
pub mod hardware;
pub mod json;
pub mod minimalloc;
pub mod onnx;
pub use memplan_pickle as pickle;

pub mod report;
pub mod tflite;
pub mod torch;
pub mod torch_trace;
pub mod xla;

use memplan_core::{Graph, GraphError, ResolvedGraph};

/// Why some bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormatError {
    #[error("JSON line {line}, column {column}: {message}")]
    JsonSyntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// `path` is where, as shown: `` `tensors[3].bytes` ``, or "the top level".
    #[error("at {path}: {message}")]
    JsonStructure { path: String, message: String },
    #[error("not a memplan dump: {0}")]
    NotADump(String),
    #[error(
        "memplan dump version {found} is not supported (this build reads version {})",
        json::FORMAT_VERSION
    )]
    Version { found: String },
    #[error("CSV line {line}: {message}")]
    Csv { line: u64, message: String },
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(
        "cannot tell the format of {0}: expected a memplan JSON dump, a minimalloc CSV, an ONNX model, a PyTorch memory snapshot, a PyTorch profiler trace, an XLA buffer assignment or a TFLite model"
    )]
    Unrecognized(String),
    /// No bytes: the file's own, or (`unpacked`) what its gzip holds.
    #[error("{}: there is nothing to plan", if *unpacked { "the file unpacks to nothing" } else { "the file is empty (0 bytes)" })]
    Empty { unpacked: bool },
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    #[error("{0}")]
    Pickle(#[from] pickle::PickleError),
    #[error("not a PyTorch memory snapshot: {0}")]
    Snapshot(String),
    #[error("PyTorch profiler trace: {0}")]
    Trace(String),
    #[error("{name}: not a gzip file memplan can unpack: {message}")]
    Gzip { name: String, message: String },
    /// `name` is the archive's (the message's prefix names it already).
    #[error("zip archive: {message}")]
    Zip { name: String, message: String },
    #[error("ONNX: {0}")]
    Onnx(String),
    #[error("TFLite model: {0}")]
    Tflite(String),
    #[error("XLA dump line {line}: {message}")]
    Xla { line: usize, message: String },
    /// Another file of an XLA dump than the pair memplan reads: what it is, and the files to
    /// give instead ([`xla::other_file`], [`xla::assignment_beside`]).
    #[error("{0}")]
    XlaOtherFile(String),
    #[error("{name} could not be read: {message}")]
    Unreadable { name: String, message: String },
    #[error(transparent)]
    Program(Box<memplan_core::program::ProgramError>),
    /// A program of several routines where one computation was expected.
    #[error(
        "this dump is a program of several routines (a `program` field): `memplan plan` plans it whole; other commands take one computation"
    )]
    IsProgram,
    /// The caller's `should_stop` said so between two stages of a load ([`load_from`]).
    #[error("the load was cancelled")]
    Cancelled,
}

impl From<memplan_core::program::ProgramError> for FormatError {
    fn from(error: memplan_core::program::ProgramError) -> Self {
        FormatError::Program(Box::new(error))
    }
}

impl FormatError {
    /// A structure error at a serde path (`tensors[3].bytes`), in the product's words: an
    /// unknown field's path ends with the field, which the message names already, so the path
    /// given is where it is (its parent), not the field twice.
    pub fn structure(path: &str, message: &str) -> FormatError {
        let message = json::plain_message(message);
        let mut path = path;
        if message.starts_with("unknown field") {
            path = path.rfind('.').map_or("", |dot| &path[..dot]);
        }
        FormatError::JsonStructure {
            path: if path.is_empty() || path == "." {
                "the top level".into()
            } else {
                format!("`{path}`")
            },
            message,
        }
    }
}

/// The formats memplan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    MemplanJson,
    MinimallocCsv,
    TorchSnapshot,
    TorchTrace,
    Onnx,
    Xla,
    Tflite,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::MemplanJson => "memplan JSON",
            Format::MinimallocCsv => "minimalloc CSV",
            Format::TorchSnapshot => "PyTorch memory snapshot",
            Format::TorchTrace => "PyTorch profiler trace",
            Format::Onnx => "ONNX model",
            Format::Xla => "XLA buffer assignment",
            Format::Tflite => "TFLite model",
        }
    }
}

/// A plan that came with the dump, made by someone else: what memplan checks and compares its
/// own plan with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenPlan {
    /// Who made it, as the views name it: "XLA", "the CSV".
    pub planner: String,
    /// One per tensor, in tensor order: an offset in its device's address space, `None` where
    /// the plan leaves the tensor to the runtime (views and tensors that own no bytes carry one
    /// too, which nothing reads).
    pub offsets: Vec<Option<u64>>,
}

/// A dump read from bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub format: Format,
    /// A valid graph: [`Graph::resolve`] succeeded on it, giving `resolved`.
    pub graph: Graph,
    pub resolved: ResolvedGraph,
    /// The plan the file gives itself (a minimalloc `offset` column, XLA's buffer assignment).
    pub given_plan: Option<GivenPlan>,
    /// What the source's own allocator did (a PyTorch snapshot or profiler trace), to compare.
    pub recorded: Option<memplan_core::recorded::Recorded>,
    /// What the import could not carry over exactly, for the reader.
    pub warnings: Vec<String>,
}

impl Loaded {
    /// A graph read and resolved, with nothing beside it (no given plan, no record, no
    /// warnings): a memplan JSON dump, or a program's routine.
    pub fn plain(format: Format, graph: Graph, resolved: ResolvedGraph) -> Loaded {
        Loaded {
            format,
            graph,
            resolved,
            given_plan: None,
            recorded: None,
            warnings: Vec::new(),
        }
    }
}

/// Detects the format by content (the file name's extension only breaks ties) and imports it.
/// `name` is used in messages.
pub fn load(bytes: &[u8], name: &str) -> Result<Loaded, FormatError> {
    load_with(bytes, name, &onnx::Options::default())
}

/// [`load`] with the options of the ONNX importer (fixed input shapes).
pub fn load_with(
    bytes: &[u8],
    name: &str,
    onnx_options: &onnx::Options,
) -> Result<Loaded, FormatError> {
    read_with(bytes, name, onnx_options)?.resolve()
}

/// What [`load_with`] reads from a file's bytes: the import, its graph resolved only where
/// the format resolves as it reads (minimalloc CSV, which places a duplicate id by its line).
/// [`load_from`], which owns the bytes, drops them before the graph resolves: a million-buffer
/// JSON dump's 192 MB of text was held beside the resolve, the load's peak.
struct Import {
    format: Format,
    graph: Graph,
    resolved: Option<ResolvedGraph>,
    given_plan: Option<GivenPlan>,
    recorded: Option<memplan_core::recorded::Recorded>,
    warnings: Vec<String>,
}

impl Import {
    /// An imported `graph`, to resolve.
    fn new(
        format: Format,
        graph: Graph,
        given_plan: Option<GivenPlan>,
        recorded: Option<memplan_core::recorded::Recorded>,
        warnings: Vec<String>,
    ) -> Import {
        Import {
            format,
            graph,
            resolved: None,
            given_plan,
            recorded,
            warnings,
        }
    }

    /// A graph read from a source's allocation events (a snapshot's, a trace's), to resolve.
    fn recorded(format: Format, i: allocations::Imported) -> Import {
        Import::new(format, i.graph, None, Some(i.recorded), i.warnings)
    }

    /// The load: its graph resolved, the one resolve of a load.
    fn resolve(self) -> Result<Loaded, FormatError> {
        let resolved = match self.resolved {
            Some(resolved) => resolved,
            None => self.graph.resolve()?,
        };
        Ok(Loaded {
            format: self.format,
            graph: self.graph,
            resolved,
            given_plan: self.given_plan,
            recorded: self.recorded,
            warnings: self.warnings,
        })
    }
}

/// [`load_with`] up to the graph's resolve ([`Import`]).
fn read_with(
    bytes: &[u8],
    name: &str,
    onnx_options: &onnx::Options,
) -> Result<Import, FormatError> {
    if bytes.is_empty() {
        return Err(FormatError::Empty { unpacked: false });
    }
    if bytes.starts_with(&GZIP_MAGIC) {
        let unpacked = gunzip(bytes, name)?;
        if unpacked.is_empty() {
            return Err(FormatError::Empty { unpacked: true });
        }
        let inner = name.strip_suffix(".gz").unwrap_or(name);
        return read_with(&unpacked, inner, onnx_options);
    }
    if bytes.starts_with(&ZIP_MAGIC) {
        let (inner, unpacked, note) = unzip(bytes, name)?;
        let mut read = read_with(&unpacked, &inner, onnx_options)?;
        read.warnings.extend(note);
        return Ok(read);
    }
    let lower = name.to_ascii_lowercase();
    if tflite::detect(bytes) || lower.ends_with(".tflite") {
        let i = tflite::parse(bytes)?;
        return Ok(Import::new(
            Format::Tflite,
            i.graph,
            i.given_plan,
            None,
            i.warnings,
        ));
    }
    // A protobuf is binary: an ONNX model by its name, or (not text, first field the IR version)
    // by its content.
    let looks_onnx = std::str::from_utf8(bytes).is_err() && bytes.first() == Some(&0x08);
    if lower.ends_with(".onnx") || looks_onnx {
        let i = onnx::parse(bytes, onnx_options)?;
        return Ok(Import::new(Format::Onnx, i.graph, None, None, i.warnings));
    }
    if is_pickle(bytes) || lower.ends_with(".pickle") || lower.ends_with(".pkl") {
        return Ok(Import::recorded(
            Format::TorchSnapshot,
            torch::parse(bytes)?,
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| FormatError::NotText(name.to_string()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = detect(text, name).ok_or_else(|| match xla::refer(text, name) {
        Some(message) => FormatError::XlaOtherFile(message),
        None => FormatError::Unrecognized(name.to_string()),
    })?;
    match format {
        // Text is never a pickle or a protobuf: `detect` names only the text formats.
        Format::TorchSnapshot | Format::Onnx | Format::Tflite => {
            Err(FormatError::Unrecognized(name.to_string()))
        }
        Format::Xla => {
            let i = xla::parse(text)?;
            Ok(Import::new(
                format,
                i.graph,
                Some(i.given_plan),
                None,
                i.warnings,
            ))
        }
        Format::TorchTrace => Ok(Import::recorded(format, torch_trace::parse(text)?)),
        Format::MemplanJson => {
            let graph = json::read_unresolved(text)?;
            Ok(Import::new(format, graph, None, None, Vec::new()))
        }
        Format::MinimallocCsv => {
            let i = minimalloc::parse(text)?;
            let given_plan = i.offsets.map(|offsets| GivenPlan {
                planner: "the CSV".into(),
                offsets: offsets.into_iter().map(Some).collect(),
            });
            Ok(Import {
                resolved: Some(i.resolved),
                ..Import::new(format, i.graph, given_plan, None, Vec::new())
            })
        }
    }
}

/// [`load_with`] from `input`, `len` bytes read in order from its start: a PyTorch snapshot
/// ([`torch::parse_stream`]) or profiler trace ([`torch_trace::parse_from`], gzipped too) as a
/// stream (the reader holds the graph, never the file or its events, so files of gigabytes
/// load), any other format whole. `progress(done, of)` hears how far a stream has read.
///
/// `should_stop` ends the load with [`FormatError::Cancelled`] when it says so between the
/// stages that follow the reading (a snapshot's pairing of its events, its graph, the graph's
/// resolve): at a gigabyte they take seconds with no read in them, and a read is the caller's
/// to fail (its reader's error ends the load there).
pub fn load_from<R: std::io::Read + std::io::Seek>(
    mut input: R,
    len: u64,
    name: &str,
    onnx_options: &onnx::Options,
    progress: &mut dyn FnMut(u64, u64),
    should_stop: &dyn Fn() -> bool,
) -> Result<Loaded, FormatError> {
    let import = import_from(&mut input, len, name, onnx_options, progress, should_stop)?;
    stop_if(should_stop)?;
    import.resolve()
}

/// `Err(Cancelled)` if `should_stop` says so: a load's check between two of its stages.
pub fn stop_if(should_stop: &dyn Fn() -> bool) -> Result<(), FormatError> {
    match should_stop() {
        true => Err(FormatError::Cancelled),
        false => Ok(()),
    }
}

/// A reader that seeks: what streamed importers take as `&mut dyn ReadSeek`, so each is
/// compiled once whatever the caller reads from (the wasm bundle's size), and what a caller
/// holds a dump as when it reads one from several sources (the web worker: a `Blob` or bytes).
/// The unpickler's, whose crate is below this one.
pub use memplan_pickle::ReadSeek;

/// [`load_from`] up to the resolve.
fn import_from(
    mut input: &mut dyn ReadSeek,
    len: u64,
    name: &str,
    onnx_options: &onnx::Options,
    progress: &mut dyn FnMut(u64, u64),
    should_stop: &dyn Fn() -> bool,
) -> Result<Import, FormatError> {
    use std::io::{Read, SeekFrom};
    let unreadable = |e: std::io::Error| FormatError::Unreadable {
        name: name.to_string(),
        message: e.to_string(),
    };
    let mut head = Vec::new();
    (&mut input)
        .take(STREAM_HEAD_BYTES)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    input.seek(SeekFrom::Start(0)).map_err(unreadable)?;
    if streamed_format(&head) == Some(Format::TorchSnapshot) {
        let of = len.saturating_mul(2);
        let i = torch::parse_stream(input, len, &mut |done| progress(done, of), should_stop)?;
        return Ok(Import::recorded(Format::TorchSnapshot, i));
    }
    let failure = std::cell::RefCell::new(None);
    let counted = Counted {
        inner: input,
        done: 0,
        progress: &mut |done| progress(done, len),
    };
    if head.starts_with(&GZIP_MAGIC) {
        let inner = name.strip_suffix(".gz").unwrap_or(name);
        let gzip_error = |message| FormatError::Gzip {
            name: name.to_string(),
            message,
        };
        let mut packed = std::io::BufReader::with_capacity(1 << 20, counted);
        let mut unpacked = Watched {
            inner: unpacker(&mut packed),
            left: MAX_UNPACKED_BYTES,
            failure: &failure,
        };
        let mut head = Vec::new();
        (&mut unpacked)
            .take(STREAM_HEAD_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| gzip_error(e.to_string()))?;
        if streamed_format(&head) == Some(Format::TorchTrace) {
            let text = std::io::Cursor::new(head).chain(unpacked);
            return streamed_trace(torch_trace::parse_from(text), &failure, gzip_error);
        }
        unpacked
            .read_to_end(&mut head)
            .map_err(|e| gzip_error(e.to_string()))?;
        if head.is_empty() {
            return Err(FormatError::Empty { unpacked: true });
        }
        return read_with(&head, inner, onnx_options);
    }
    if streamed_format(&head) == Some(Format::TorchTrace) {
        let text = Watched {
            inner: std::io::BufReader::with_capacity(1 << 20, counted),
            left: u64::MAX,
            failure: &failure,
        };
        return streamed_trace(torch_trace::parse_from(text), &failure, |message| {
            FormatError::Unreadable {
                name: name.to_string(),
                message,
            }
        });
    }
    let mut bytes = Vec::new();
    let input = counted.inner;
    input.read_to_end(&mut bytes).map_err(unreadable)?;
    // `bytes` goes as this returns: before the graph resolves.
    read_with(&bytes, name, onnx_options)
}

/// How much of a file [`load_from`] reads first to tell how to read the rest
/// ([`streamed_format`]): a profiler trace names `traceEvents` within it.
pub const STREAM_HEAD_BYTES: u64 = 1 << 16;

/// The format [`load_from`] reads as a stream a file starting with `head` (its first
/// [`STREAM_HEAD_BYTES`], unpacked), if any: a PyTorch snapshot or profiler trace.
pub fn streamed_format(head: &[u8]) -> Option<Format> {
    if is_pickle(head) {
        return Some(Format::TorchSnapshot);
    }
    is_trace_head(head).then_some(Format::TorchTrace)
}

/// Whether a file's first bytes (unpacked) start a profiler trace: an array, or an object that
/// names `traceEvents` (what [`detect`] tells from the whole text). A byte-order mark is not
/// JSON: such a file is read whole.
fn is_trace_head(head: &[u8]) -> bool {
    is_trace_text(&String::from_utf8_lossy(head))
}

/// Whether JSON text (whole, or its start) is a profiler trace: an array of events, or an
/// object that names `traceEvents`.
fn is_trace_text(text: &str) -> bool {
    let start = text.trim_start();
    start.starts_with('[') || (start.starts_with('{') && start.contains("\"traceEvents\""))
}

/// A streamed trace's outcome, where a failure to read the stream (recorded by [`Watched`])
/// says so, not as the JSON error it ends in.
fn streamed_trace(
    imported: Result<torch_trace::Imported, FormatError>,
    failure: &std::cell::RefCell<Option<String>>,
    read_error: impl FnOnce(String) -> FormatError,
) -> Result<Import, FormatError> {
    let i = match (imported, failure.borrow_mut().take()) {
        (Err(_), Some(message)) => return Err(read_error(message)),
        (imported, _) => imported?,
    };
    Ok(Import::recorded(Format::TorchTrace, i))
}

/// A reader that tells `progress` how many bytes it has read.
struct Counted<'a, R> {
    inner: R,
    done: u64,
    progress: &'a mut dyn FnMut(u64),
}

impl<R: std::io::Read> std::io::Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        (self.progress)(self.done);
        Ok(n)
    }
}

/// A reader that fails past `left` more bytes and records its first failure.
struct Watched<'a, R> {
    inner: R,
    left: u64,
    failure: &'a std::cell::RefCell<Option<String>>,
}

impl<R: std::io::Read> std::io::Read for Watched<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf).and_then(|n| {
            self.left = (self.left.checked_sub(n as u64)).ok_or_else(|| {
                std::io::Error::other(format!(
                    "it unpacks to more than {MAX_UNPACKED_BYTES} bytes"
                ))
            })?;
            Ok(n)
        });
        if let Err(e) = &read {
            self.failure
                .borrow_mut()
                .get_or_insert_with(|| e.to_string());
        }
        read
    }
}

/// Whether `bytes` start as a pickle of protocol 2 to 5.
fn is_pickle(bytes: &[u8]) -> bool {
    matches!(bytes, [0x80, 2..=5, ..])
}

/// The first bytes of a gzip file.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The first bytes of a zip archive.
const ZIP_MAGIC: [u8; 4] = *b"PK\x03\x04";

/// What a PyTorch archive (a checkpoint, a TorchScript program) is not, and what to record
/// instead.
const TORCH_ARCHIVE_HELP: &str = "it is a PyTorch archive (`torch.save` or `torch.jit.save`: a model's weights or program), not a record of its memory: record a memory snapshot with `torch.cuda.memory._record_memory_history()`, run the model, then `torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")`; or a profiler trace with `torch.profiler.profile(profile_memory=True)` and `prof.export_chrome_trace(\"trace.json\")`; or export the model with `torch.onnx.export`";

/// The dump in a zip archive: its one file, or an XLA buffer assignment with its live range
/// (joined, as [`xla`] reads them; of several modules, the one with the largest buffer
/// assignment, which the note says). Returns the dump's name, its bytes and the note.
fn unzip(bytes: &[u8], name: &str) -> Result<(String, Vec<u8>, Option<String>), FormatError> {
    use std::io::Read;
    let fail = |message: String| FormatError::Zip {
        name: name.to_string(),
        message,
    };
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| fail(e.to_string()))?;
    // The files, and each archive entry's index among them: names are found through the
    // archive's own index (a list scanned per name is quadratic, and a zip of a few MB may list
    // a hundred thousand names).
    let mut files: Vec<(String, u64)> = Vec::new();
    let mut file_of = vec![None; archive.len()];
    for (i, file) in file_of.iter_mut().enumerate() {
        if let Ok(f) = archive.by_index_raw(i)
            && f.is_file()
        {
            *file = Some(files.len());
            files.push((f.name().to_string(), f.size()));
        }
    }
    let find = |name: &str| archive.index_for_name(name).and_then(|i| file_of[i]);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    // `torch.save` and `torch.jit.save` write a folder with a `data.pkl` beside its `version`:
    // a model's weights or program, which PyTorch users try first.
    let torch_archive = names.iter().any(|n| {
        n.strip_suffix("data.pkl")
            .filter(|dir| dir.ends_with('/'))
            .is_some_and(|dir| find(&format!("{dir}version")).is_some())
    });
    if torch_archive {
        return Err(fail(TORCH_ARCHIVE_HELP.to_string()));
    }
    let pairs = xla::pairs_by(&names, find);
    let mut read = |entry: &str| -> Result<Vec<u8>, FormatError> {
        let file = archive
            .by_name(entry)
            .map_err(|e| fail(format!("{entry}: {e}")))?;
        let mut out = Vec::new();
        file.take(MAX_UNPACKED_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| fail(format!("{entry}: {e}")))?;
        if out.len() as u64 > MAX_UNPACKED_BYTES {
            return Err(fail(format!(
                "{entry} unpacks to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        Ok(out)
    };
    if let Some(&(a, l)) = pairs.iter().max_by_key(|&&(a, _)| (files[a].1, names[a])) {
        let (assignment, live_range) = (names[a], names[l]);
        let joined = xla::join(&read(assignment)?, &read(live_range)?);
        let note = (pairs.len() > 1).then(|| {
            format!(
                "the zip holds {} XLA modules; memplan read the one with the largest buffer assignment, {assignment}",
                pairs.len()
            )
        });
        return Ok((assignment.to_string(), joined, note));
    }
    match &files[..] {
        [(only, _)] => Ok((only.clone(), read(only)?, None)),
        _ => Err(fail(format!(
            "it holds {} files; memplan reads a zip of one dump, or of an XLA dump (a `*-buffer-assignment.txt` with its `*-live-range.txt`)",
            files.len()
        ))),
    }
}

/// The most bytes a gzip file may unpack to: what any importer reads at most.
pub const MAX_UNPACKED_BYTES: u64 = 4 << 30;

/// A gzip file's unpacker, of one type whatever it reads (compiled once: the bundle).
fn unpacker(
    packed: &mut dyn std::io::Read,
) -> flate2::read::MultiGzDecoder<&mut dyn std::io::Read> {
    flate2::read::MultiGzDecoder::new(packed)
}

/// The bytes of a gzip file (a `.json.gz` profiler trace), refused past [`MAX_UNPACKED_BYTES`].
fn gunzip(bytes: &[u8], name: &str) -> Result<Vec<u8>, FormatError> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = unpacker(&mut { bytes })
        .take(MAX_UNPACKED_BYTES + 1)
        .read_to_end(&mut out);
    let fail = |message: String| FormatError::Gzip {
        name: name.to_string(),
        message,
    };
    read.map_err(|e| fail(e.to_string()))?;
    if out.len() as u64 > MAX_UNPACKED_BYTES {
        return Err(fail(format!(
            "it unpacks to more than {} bytes",
            MAX_UNPACKED_BYTES
        )));
    }
    Ok(out)
}

fn detect(text: &str, name: &str) -> Option<Format> {
    if xla::detect(text) {
        return Some(Format::Xla);
    }
    if is_trace_text(text) {
        return Some(Format::TorchTrace);
    }
    let start = text.trim_start();
    if start.starts_with('{') {
        return Some(Format::MemplanJson);
    }
    let header = start.lines().next().unwrap_or("").to_ascii_lowercase();
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    if columns.iter().any(|c| minimalloc::ID.contains(c)) && columns.contains(&"size") {
        return Some(Format::MinimallocCsv);
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".json") {
        Some(Format::MemplanJson)
    } else if lower.ends_with(".csv") {
        Some(Format::MinimallocCsv)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip archive of `files` (stored, not compressed).
    fn zipped(files: &[(&str, &str)]) -> Vec<u8> {
        use std::io::Write;
        let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, text) in files {
            if name.ends_with('/') {
                out.add_directory(*name, options).unwrap();
                continue;
            }
            out.start_file(*name, options).unwrap();
            out.write_all(text.as_bytes()).unwrap();
        }
        out.finish().unwrap().into_inner()
    }

    #[test]
    fn a_pytorch_archive_and_an_empty_file_say_what_they_are() {
        // `torch.save`'s layout: `<name>/data.pkl` beside the tensors' storages.
        let checkpoint = zipped(&[
            ("model/data.pkl", "\u{80}\u{2}."),
            ("model/version", "3\n"),
            ("model/data/0", "0000"),
        ]);
        let e = load(&checkpoint, "model.pt").unwrap_err().to_string();
        assert!(e.contains("a PyTorch archive"), "{e}");
        assert!(
            e.contains("_dump_snapshot") && e.contains("profile_memory=True"),
            "{e}"
        );
        // A zip of one pickle named so is that pickle (here, not a snapshot either).
        let one = zipped(&[("data.pkl", "\u{80}\u{2}.")]);
        let e = load(&one, "snapshot.zip").unwrap_err().to_string();
        assert!(!e.contains("PyTorch archive"), "{e}");
        let e = load(b"", "empty.json").unwrap_err().to_string();
        assert_eq!(e, "the file is empty (0 bytes): there is nothing to plan");
        // A gzip of nothing says it unpacks to nothing.
        let packed = {
            use std::io::Write;
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(b"").unwrap();
            z.finish().unwrap()
        };
        let e = load(&packed, "trace.json.gz").unwrap_err().to_string();
        assert!(e.starts_with("the file unpacks to nothing"), "{e}");
    }

    #[test]
    fn a_zip_holds_one_dump_or_an_xla_pair() {
        let pair = include_str!("testdata/xla-pair.txt");
        let at = pair.find(xla::LIVE_RANGE).unwrap();
        let (assignment, live_range) = (&pair[..at], &pair[at..]);
        let archive = zipped(&[
            ("dump/m.jit_f-live-range.txt", live_range),
            ("dump/m.jit_f-buffer-assignment.txt", assignment),
            ("dump/m.jit_f.txt", "HloModule m"),
        ]);
        let loaded = load(&archive, "dump.zip").unwrap();
        assert_eq!(loaded.format, Format::Xla);
        assert_eq!(loaded.graph, xla::parse(pair).unwrap().graph);
        let csv = zipped(&[("a.csv", "id,lower,upper,size\n0,0,10,4\n")]);
        assert_eq!(load(&csv, "a.zip").unwrap().format, Format::MinimallocCsv);
        let two = zipped(&[
            ("a.csv", "id,lower,upper,size\n"),
            ("b.csv", "id,lower,upper,size\n"),
        ]);
        let e = load(&two, "two.zip").unwrap_err().to_string();
        assert!(e.starts_with("zip archive: it holds 2 files"), "{e}");
        let e = load(b"PK\x03\x04 cut short", "x.zip")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("zip archive: "), "{e}");
    }

    #[test]
    fn a_zip_of_many_files_finds_its_pairs_and_archives_by_name() {
        let pair = include_str!("testdata/xla-pair.txt");
        let at = pair.find(xla::LIVE_RANGE).unwrap();
        let (assignment, live_range) = (&pair[..at], &pair[at..]);
        // Folders first: an entry's index in the archive is not its index among the files.
        let mut entries: Vec<(String, &str)> =
            (0..64).map(|i| (format!("dump/d{i}/"), "")).collect();
        entries.extend((0..2000).map(|i| (format!("dump/module_{i:04}.txt"), "HloModule m")));
        entries.extend([
            ("dump/b-live-range.txt".to_string(), live_range),
            (
                "dump/a-buffer-assignment.txt".to_string(),
                "BufferAssignment:\n",
            ),
            ("dump/b-buffer-assignment.txt".to_string(), assignment),
            ("dump/a-live-range.txt".to_string(), "BufferLiveRange:\n"),
        ]);
        let named: Vec<(&str, &str)> = entries.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let loaded = load(&zipped(&named), "dump.zip").unwrap();
        assert_eq!(loaded.graph, xla::parse(pair).unwrap().graph);
        let note = loaded.warnings.join(" ");
        assert!(
            note.contains("2 XLA modules") && note.contains("b-buffer-assignment"),
            "{note}"
        );
        // A `torch.save` folder listed after them all is still a PyTorch archive.
        let mut archive = named.clone();
        archive.extend([("model/data.pkl", "\u{80}\u{2}."), ("model/version", "3\n")]);
        let e = load(&zipped(&archive), "model.pt").unwrap_err().to_string();
        assert!(e.contains("a PyTorch archive"), "{e}");
    }

    #[test]
    fn format_is_detected_by_content_before_extension() {
        assert_eq!(
            detect("  {\"memplan\":1}", "x.csv"),
            Some(Format::MemplanJson)
        );
        assert_eq!(
            detect("id,lower,upper,size\n", "x.json"),
            Some(Format::MinimallocCsv)
        );
        assert_eq!(
            detect("buffer,start,end,size\n", "G"),
            Some(Format::MinimallocCsv)
        );
        assert_eq!(detect("", "x.csv"), Some(Format::MinimallocCsv));
        assert_eq!(detect("hello", "x.bin"), None);
        assert!(matches!(
            load(&[0xff, 0xfe], "x"),
            Err(FormatError::NotText(_))
        ));
    }

    /// A stop asked for once the file is read ends the load at the next stage, whichever it
    /// is: a snapshot's (each device's pairing, its graph, the resolve) and every format's
    /// resolve. Counted through a load that runs to the end: a stop raised at the `k`-th
    /// question, for each `k` it asks, ends the load with `Cancelled`, not a graph.
    #[test]
    fn a_stop_after_the_reading_ends_the_load_at_its_next_stage() {
        let snapshot = include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle");
        let trace = include_bytes!("../../../tests/data/torch-trace/df_index_resolver.json.gz");
        let json = include_bytes!("../../../static/examples/mlp-training.json");
        // The magma snapshot has one device: asked once it is read, before its pairing, then
        // before the graph and before the resolve.
        for (bytes, name, asks) in [
            (&snapshot[..], "snapshot.pickle", 3),
            (&trace[..], "trace.json.gz", 1),
            (&json[..], "mlp-training.json", 1),
        ] {
            let load_asking = |stop_at: Option<usize>| {
                let asked = std::cell::Cell::new(0);
                let loaded = load_from(
                    std::io::Cursor::new(bytes),
                    bytes.len() as u64,
                    name,
                    &Default::default(),
                    &mut |_, _| {},
                    &|| {
                        asked.set(asked.get() + 1);
                        Some(asked.get()) == stop_at
                    },
                );
                (loaded, asked.get())
            };
            let (loaded, asked) = load_asking(None);
            assert!(loaded.is_ok(), "{name}");
            assert_eq!(asked, asks, "{name}");
            for k in 1..=asked {
                let (stopped, asked) = load_asking(Some(k));
                assert_eq!(
                    stopped.unwrap_err(),
                    FormatError::Cancelled,
                    "{name}, stop {k}"
                );
                assert_eq!(asked, k, "{name}: nothing asked past the stop");
            }
        }
    }
}

#[cfg(test)]
mod fuzz {
    //! Whatever the bytes, loading returns a value or an error: it never panics.
    use super::*;
    use proptest::prelude::*;

    const SEEDS: [&str; 5] = [
        include_str!("../../../static/examples/mlp-training.json"),
        include_str!("../../../static/examples/transformer-decode.json"),
        "id,lower,upper,size,offset\n0,0,10,4,0\n1,10,20,4,0\n2,5,15,8,4\n",
        // A profiler trace: two operators, memory events on two devices, a free before.
        r#"{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":0,"dur":90},{"ph":"X","cat":"python_function","name":"model.py(54): forward","pid":1,"tid":1,"ts":1,"dur":80},{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":5,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":512,"Total Allocated":512,"Total Reserved":2097152,"Ev Idx":1}},{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":6,"args":{"Device Type":0,"Device Id":-1,"Addr":64,"Bytes":-8,"Total Allocated":0,"Total Reserved":0,"Ev Idx":2}},{"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":9,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":-512,"Total Allocated":0,"Total Reserved":2097152,"Ev Idx":3}}]}"#,
        // An XLA dump: a buffer assignment with its live range (in-place reuse, a thread-local, a
        // live-out allocation shared by two values).
        include_str!("testdata/xla-pair.txt"),
    ];

    #[test]
    fn an_xla_pair_seeds_the_fuzzer() {
        assert!(load(SEEDS[4].as_bytes(), "fuzz").is_ok());
    }

    const BINARY_SEEDS: [(&str, &[u8]); 4] = [
        (
            "fuzz.onnx",
            include_bytes!("../../../tests/data/onnx/light_squeezenet.onnx"),
        ),
        (
            "fuzz.pickle",
            include_bytes!("../../../tests/data/torch/magma27_memory_snapshot.pickle"),
        ),
        (
            "fuzz.tflite",
            include_bytes!("../../../tests/data/tflite/trained_lstm.tflite"),
        ),
        (
            "fuzz.tflite",
            include_bytes!("../../../tests/data/tflite/person_detect_vela.tflite"),
        ),
    ];

    /// Loads `bytes` as `name` and, when that works, plans the graph: neither may panic.
    fn load_and_plan(bytes: &[u8], name: &str) {
        if let Ok(loaded) = load(bytes, name) {
            let l = memplan_core::analyze(&loaded.graph, &loaded.resolved);
            let _ = memplan_core::plan(
                &l.problem,
                &memplan_core::PlanOptions {
                    strategy: memplan_core::Strategy::FirstFit.into(),
                    ..memplan_core::PlanOptions::default()
                },
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            for name in ["fuzz", "fuzz.onnx", "fuzz.pickle", "fuzz.tflite"] {
                let _ = load(&bytes, name);
            }
            // As a gzip file (a `.json.gz` trace).
            let mut gzipped = vec![0x1f, 0x8b];
            gzipped.extend(&bytes);
            let _ = load(&gzipped, "fuzz.json.gz");
            // As a zip archive.
            let mut zipped = b"PK\x03\x04".to_vec();
            zipped.extend(&bytes);
            let _ = load(&zipped, "fuzz.zip");
            // As a FlatBuffer with TFLite's identifier.
            let mut flat = bytes.clone();
            if flat.len() >= 8 {
                flat[4..8].copy_from_slice(b"TFL3");
                let _ = load(&flat, "fuzz");
            }
            // As a pickle of every protocol this reader takes.
            for version in 2u8..=5 {
                let mut pickled = vec![0x80, version];
                pickled.extend(&bytes);
                let _ = load(&pickled, "fuzz");
            }
        }

        #[test]
        fn mutated_binary_dumps_never_panic(
            seed in 0usize..BINARY_SEEDS.len(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..3, any::<u8>()), 1..12),
        ) {
            let (name, seed) = BINARY_SEEDS[seed];
            let mut bytes = seed.to_vec();
            for (at, kind, b) in edits {
                let i = at.index(bytes.len().max(1)).min(bytes.len());
                match kind {
                    0 => { if i < bytes.len() { bytes.remove(i); } }
                    1 => bytes.insert(i, b),
                    _ => { if i < bytes.len() { bytes[i] = b; } }
                }
            }
            load_and_plan(&bytes, name);
            // Cut short anywhere.
            let cut = bytes.len() / 2;
            load_and_plan(&bytes[..cut], name);
            // A stream said to be longer or shorter than it is.
            for said in [bytes.len() as u64 + 1 + cut as u64, cut as u64] {
                let cursor = std::io::Cursor::new(&bytes);
                let _ = load_from(cursor, said, name, &Default::default(), &mut |_, _| (), &|| false);
            }
        }

        #[test]
        fn mutated_dumps_never_panic(
            seed in 0usize..SEEDS.len(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..4, any::<char>()), 1..8),
        ) {
            let mut text: Vec<char> = SEEDS[seed].chars().collect();
            for (at, kind, c) in edits {
                let i = at.index(text.len().max(1)).min(text.len());
                match kind {
                    0 => { if i < text.len() { text.remove(i); } }
                    1 => text.insert(i, c),
                    2 => { if i < text.len() { text[i] = c; } }
                    // Digits push sizes and ids towards overflow and collisions.
                    _ => text.insert(i, char::from(b'0' + (c as u32 % 10) as u8)),
                }
            }
            let text: String = text.into_iter().collect();
            if let Ok(loaded) = load(text.as_bytes(), "fuzz") {
                // What loads must plan (or refuse with an error), never panic.
                let l = memplan_core::analyze(&loaded.graph, &loaded.resolved);
                let _ = memplan_core::plan(&l.problem, &memplan_core::PlanOptions {
                    strategy: memplan_core::Strategy::FirstFit.into(),
                    ..memplan_core::PlanOptions::default()
                });
            }
            // Read as a stream (a trace is), it loads as it does whole, or fails as whole.
            let streamed = load_from(std::io::Cursor::new(text.as_bytes()), text.len() as u64, "fuzz", &Default::default(), &mut |_, _| (), &|| false);
            let whole = load(text.as_bytes(), "fuzz");
            prop_assert_eq!(streamed.as_ref().ok().map(|l| &l.graph), whole.as_ref().ok().map(|l| &l.graph));
        }
    }

    fn gunzipped(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).unwrap();
        out
    }

    /// Loads `bytes` with [`load_from`], returning what loaded and the progress heard.
    fn streamed(bytes: &[u8], name: &str) -> (Result<Loaded, FormatError>, Vec<(u64, u64)>) {
        let mut heard = Vec::new();
        let loaded = load_from(
            std::io::Cursor::new(bytes),
            bytes.len() as u64,
            name,
            &Default::default(),
            &mut |done, of| heard.push((done, of)),
            &|| false,
        );
        (loaded, heard)
    }

    #[test]
    fn a_profiler_trace_streams_as_it_loads_whole() {
        let gz = include_bytes!("../../../tests/data/torch-trace/df_index_resolver.json.gz");
        let whole = load(gz, "trace.json.gz").unwrap();
        assert_eq!(whole.format, Format::TorchTrace);
        let json = gunzipped(gz);
        for (bytes, name) in [(&gz[..], "trace.json.gz"), (&json[..], "trace.json")] {
            let (loaded, heard) = streamed(bytes, name);
            let loaded = loaded.unwrap();
            assert_eq!(loaded.format, Format::TorchTrace);
            assert_eq!(loaded.graph, whole.graph, "{name}");
            assert_eq!(loaded.recorded, whole.recorded, "{name}");
            assert_eq!(loaded.warnings, whole.warnings, "{name}");
            // Heard as it reads, up to the whole file.
            assert!(heard.len() > 2, "{name}: {heard:?}");
            assert_eq!(
                heard.last(),
                Some(&(bytes.len() as u64, bytes.len() as u64))
            );
            assert!(heard.windows(2).all(|w| w[0].0 <= w[1].0));
        }
        // A gzip cut short says the gzip failed, not where the JSON ended.
        let (cut, _) = streamed(&gz[..gz.len() / 2], "trace.json.gz");
        let e = cut.unwrap_err();
        assert!(matches!(e, FormatError::Gzip { .. }), "{e}");
        // A JSON error names its line and column, streamed as whole.
        let cut = json[..json.len() / 3]
            .iter()
            .rposition(|&b| b == b'}')
            .unwrap();
        let broken = &json[..cut];
        let (streamed_error, _) = streamed(broken, "trace.json");
        let whole_error = load(broken, "trace.json").unwrap_err().to_string();
        assert_eq!(streamed_error.unwrap_err().to_string(), whole_error);
        assert!(whole_error.contains("line "), "{whole_error}");
    }
}
