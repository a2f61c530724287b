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
pub mod pickle;

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
    #[error("{name} could not be read: {message}")]
    Unreadable { name: String, message: String },
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
    /// An imported `graph`, resolved: the one resolve of a load.
    fn resolved(
        format: Format,
        graph: Graph,
        given_plan: Option<GivenPlan>,
        recorded: Option<memplan_core::recorded::Recorded>,
        warnings: Vec<String>,
    ) -> Result<Loaded, FormatError> {
        let resolved = graph.resolve()?;
        Ok(Loaded {
            format,
            graph,
            resolved,
            given_plan,
            recorded,
            warnings,
        })
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
    if bytes.starts_with(&GZIP_MAGIC) {
        let unpacked = gunzip(bytes, name)?;
        let inner = name.strip_suffix(".gz").unwrap_or(name);
        return load_with(&unpacked, inner, onnx_options);
    }
    if bytes.starts_with(&ZIP_MAGIC) {
        let (inner, unpacked, note) = unzip(bytes, name)?;
        let mut loaded = load_with(&unpacked, &inner, onnx_options)?;
        loaded.warnings.extend(note);
        return Ok(loaded);
    }
    let lower = name.to_ascii_lowercase();
    if tflite::detect(bytes) || lower.ends_with(".tflite") {
        let i = tflite::parse(bytes)?;
        return Loaded::resolved(Format::Tflite, i.graph, i.given_plan, None, i.warnings);
    }
    // A protobuf is binary: an ONNX model by its name, or (not text, first field the IR version)
    // by its content.
    let looks_onnx = std::str::from_utf8(bytes).is_err() && bytes.first() == Some(&0x08);
    if lower.ends_with(".onnx") || looks_onnx {
        let i = onnx::parse(bytes, onnx_options)?;
        return Loaded::resolved(Format::Onnx, i.graph, None, None, i.warnings);
    }
    if is_pickle(bytes) || lower.ends_with(".pickle") || lower.ends_with(".pkl") {
        let i = torch::parse(bytes)?;
        let recorded = Some(i.recorded);
        return Loaded::resolved(Format::TorchSnapshot, i.graph, None, recorded, i.warnings);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| FormatError::NotText(name.to_string()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = detect(text, name).ok_or_else(|| FormatError::Unrecognized(name.to_string()))?;
    match format {
        // Text is never a pickle or a protobuf: `detect` names only the text formats.
        Format::TorchSnapshot | Format::Onnx | Format::Tflite => {
            Err(FormatError::Unrecognized(name.to_string()))
        }
        Format::Xla => {
            let i = xla::parse(text)?;
            Loaded::resolved(format, i.graph, Some(i.given_plan), None, i.warnings)
        }
        Format::TorchTrace => {
            let i = torch_trace::parse(text)?;
            Loaded::resolved(format, i.graph, None, Some(i.recorded), i.warnings)
        }
        Format::MemplanJson => {
            let (graph, resolved) = json::parse_resolved(text)?;
            Ok(Loaded {
                format,
                graph,
                resolved,
                given_plan: None,
                recorded: None,
                warnings: Vec::new(),
            })
        }
        Format::MinimallocCsv => {
            let i = minimalloc::parse(text)?;
            let given_plan = i.offsets.map(|offsets| GivenPlan {
                planner: "the CSV".into(),
                offsets: offsets.into_iter().map(Some).collect(),
            });
            Loaded::resolved(format, i.graph, given_plan, None, Vec::new())
        }
    }
}

/// [`load_with`] from `input`, `len` bytes read in order from its start: a PyTorch snapshot as
/// a stream ([`torch::parse_stream`]: the reader holds the graph, never the file or its
/// events, so snapshots of gigabytes load), any other format whole. `progress(done, of)`
/// hears how far a stream has read.
pub fn load_from<R: std::io::Read + std::io::Seek>(
    mut input: R,
    len: u64,
    name: &str,
    onnx_options: &onnx::Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Loaded, FormatError> {
    let unreadable = |e: std::io::Error| FormatError::Unreadable {
        name: name.to_string(),
        message: e.to_string(),
    };
    let mut head = [0u8; 2];
    let got = input.read(&mut head).map_err(unreadable)?;
    input
        .seek(std::io::SeekFrom::Start(0))
        .map_err(unreadable)?;
    if got == 2 && is_pickle(&head) {
        let of = len.saturating_mul(2);
        let i = torch::parse_stream(input, len, &mut |done| progress(done, of))?;
        let recorded = Some(i.recorded);
        return Loaded::resolved(Format::TorchSnapshot, i.graph, None, recorded, i.warnings);
    }
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes).map_err(unreadable)?;
    load_with(&bytes, name, onnx_options)
}

/// Whether `bytes` start as a pickle of protocol 2 to 5.
pub fn is_pickle(bytes: &[u8]) -> bool {
    matches!(bytes, [0x80, 2..=5, ..])
}

/// The first bytes of a gzip file.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The first bytes of a zip archive.
const ZIP_MAGIC: [u8; 4] = *b"PK\x03\x04";

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
    let mut files: Vec<(String, u64)> = Vec::new();
    for i in 0..archive.len() {
        if let Ok(f) = archive.by_index_raw(i)
            && f.is_file()
        {
            files.push((f.name().to_string(), f.size()));
        }
    }
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
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let pairs = xla::pairs(&names);
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

/// The bytes of a gzip file (a `.json.gz` profiler trace), refused past [`MAX_UNPACKED_BYTES`].
fn gunzip(bytes: &[u8], name: &str) -> Result<Vec<u8>, FormatError> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(bytes)
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
    let start = text.trim_start();
    if start.starts_with('[') || (start.starts_with('{') && text.contains("\"traceEvents\"")) {
        return Some(Format::TorchTrace);
    }
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
            out.start_file(*name, options).unwrap();
            out.write_all(text.as_bytes()).unwrap();
        }
        out.finish().unwrap().into_inner()
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
                let _ = load_from(cursor, said, name, &Default::default(), &mut |_, _| ());
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
        }
    }
}
