//! XLA buffer assignments: the `*-buffer-assignment.txt` that `--xla_dump_to` writes, read with
//! the `*-live-range.txt` of the same module (the two texts one after the other, in either
//! order: the CLI and the page join the pair).
//!
//! The buffer assignment lists XLA's allocations (`allocation N: size S, <kinds>:`) and the
//! values in each (`value: <id name @n> (size=S,offset=O): shape`). The live range gives the
//! instruction sequence (positions `0..max`) and each value's closed interval `name{index}:s-e`;
//! `e == max` is live out of the program.
//!
//! The mapping:
//! - Each value is a tensor with XLA's size, named by its instruction (with the shape index of a
//!   tuple element), with its shape and dtype.
//! - Each instruction that defines a value is a step writing the values that start there and
//!   reading those that end there (a value ending at an instruction that defines none, or live
//!   out, ends at the last step before). Instructions that define no value (bitcasts, tuple
//!   elements) are not steps: conflicts are the same. Steps are pinned: a live range names a
//!   value's last reader, not every reader, so no order may move one.
//! - The preallocated-temp allocation (one per color) is the problem memplan plans: its values
//!   are intermediates with their live ranges. Where XLA writes a value over an operand that dies
//!   at the value's own instruction (the same bytes, intervals that meet at that instruction),
//!   the smaller is a view of the larger: XLA's in-place reuse, an aliasing decision memplan
//!   keeps.
//! - Every other allocation (parameters, constants, live-out buffers, and those XLA allocates
//!   alone) lives for the whole run, as XLA's runtime holds it: one always-live tensor, its values
//!   views at their offsets (a lone value of the allocation's size is the tensor itself).
//!   Thread-local values (inside fused computations, on the stack of the thread that runs them)
//!   are tensors no step takes: listed, not planned.
//! - A color other than 0 (another memory space) is a device of its own, `color N`.
//! - XLA's offsets are a given plan: per device, the temp arena from 0, then the other
//!   allocations one after another in allocation order.
//! - The alignment is the largest power of two, up to 64, that divides every offset of the temp
//!   arenas: what XLA's plan shows of its own alignment, so that its plan passes the checker.

use rustc_hash::FxHashMap as HashMap;

use memplan_core::graph::{Device, Dim, Graph, Id, Step, Tensor, TensorKind};

use crate::{FormatError, GivenPlan};

/// What an XLA dump holds: the graph, and XLA's plan as offsets.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    pub given_plan: GivenPlan,
    pub warnings: Vec<String>,
}

/// The first line of a buffer assignment.
pub const BUFFER_ASSIGNMENT: &str = "BufferAssignment:";
/// The first line of a live-range file starts so.
pub const LIVE_RANGE: &str = "HloLiveRange";

/// How the buffer assignment's file name ends.
pub const ASSIGNMENT_SUFFIX: &str = "-buffer-assignment.txt";
/// How the live range's file name ends.
pub const LIVE_RANGE_SUFFIX: &str = "-live-range.txt";

/// The file name of the other half of a pair (`-buffer-assignment.txt` and `-live-range.txt`).
pub fn companion(name: &str) -> Option<String> {
    const PAIRS: [(&str, &str); 2] = [
        (ASSIGNMENT_SUFFIX, LIVE_RANGE_SUFFIX),
        (LIVE_RANGE_SUFFIX, ASSIGNMENT_SUFFIX),
    ];
    PAIRS
        .iter()
        .find_map(|(this, other)| name.strip_suffix(this).map(|stem| format!("{stem}{other}")))
}

/// The pairs among file `names`: `(buffer assignment, live range)` indices into `names`, in
/// the order of the buffer assignments. Each companion is looked for in the list: for the few
/// files a reader chooses at once; [`pairs_by`] takes an index.
pub fn pairs<S: AsRef<str>>(names: &[S]) -> Vec<(usize, usize)> {
    pairs_by(names, |other| {
        names.iter().position(|m| m.as_ref() == other)
    })
}

/// [`pairs`], where `find` gives the index of a name in `names` (an archive's own index of its
/// entries: a zip may list hundreds of thousands).
pub fn pairs_by<S: AsRef<str>>(
    names: &[S],
    find: impl Fn(&str) -> Option<usize>,
) -> Vec<(usize, usize)> {
    (names.iter().enumerate())
        .filter(|(_, n)| n.as_ref().ends_with(ASSIGNMENT_SUFFIX))
        .filter_map(|(a, n)| Some((a, find(&companion(n.as_ref())?)?)))
        .collect()
}

/// The text [`parse`] reads of a pair: the buffer assignment, a newline, the live range.
pub fn join(assignment: &[u8], live_range: &[u8]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(assignment.len() + 1 + live_range.len());
    joined.extend_from_slice(assignment);
    joined.push(b'\n');
    joined.extend_from_slice(live_range);
    joined
}

/// What another file of an XLA dump is, by its start: the module's HLO text (`X.txt`) or
/// XLA's memory usage report (`X-memory-usage-report.txt`), both beside the pair memplan reads.
pub fn other_file(text: &str) -> Option<&'static str> {
    let start = text.trim_start();
    if start.starts_with("HloModule ") {
        Some("HLO module text")
    } else if start.starts_with("Memory Space:") {
        Some("memory usage report")
    } else {
        None
    }
}

/// The buffer assignment written beside another file of the optimized module's dump, by its
/// file name: `X-buffer-assignment.txt` beside `X.txt` and `X-memory-usage-report.txt`, where
/// `X` ends `after_optimizations` (XLA writes a buffer assignment only for the optimized
/// module).
pub fn assignment_beside(name: &str) -> Option<String> {
    let stem =
        (name.strip_suffix("-memory-usage-report.txt")).or_else(|| name.strip_suffix(".txt"))?;
    stem.ends_with("after_optimizations")
        .then(|| format!("{stem}{ASSIGNMENT_SUFFIX}"))
}

/// Where `text`, named `name`, is another file of an XLA dump ([`other_file`]): what it is,
/// and the files to give instead (the caller names the file).
pub fn refer(text: &str, name: &str) -> Option<String> {
    let what = other_file(text)?;
    let file = (name.bytes().rposition(|b| b == b'/')).map_or(name, |at| &name[at + 1..]);
    let assignment = assignment_beside(file);
    let assignment = assignment.as_deref().unwrap_or("*-buffer-assignment.txt");
    Some(format!(
        "this is XLA's {what}: memplan reads `{assignment}` with the `*-live-range.txt` beside it"
    ))
}

/// Whether `text` is (or starts with) one half of an XLA dump.
pub fn detect(text: &str) -> bool {
    let start = text.trim_start();
    start.starts_with(BUFFER_ASSIGNMENT) || start.starts_with(LIVE_RANGE)
}

fn err(line: usize, message: impl Into<String>) -> FormatError {
    FormatError::Xla {
        line,
        message: message.into(),
    }
}

/// What an allocation is, from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Temp,
    Parameter,
    Constant,
    ThreadLocal,
    LiveOut,
    /// Allocated alone with none of the flags above.
    Other,
}

impl Role {
    fn kind(self) -> TensorKind {
        match self {
            Role::Parameter => TensorKind::Input,
            Role::Constant => TensorKind::Constant,
            Role::LiveOut => TensorKind::Output,
            Role::ThreadLocal => TensorKind::Scratch,
            Role::Temp | Role::Other => TensorKind::Intermediate,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Role::Temp => "preallocated-temp",
            Role::Parameter => "parameter",
            Role::Constant => "constant",
            Role::ThreadLocal => "thread-local",
            Role::LiveOut => "maybe-live-out",
            Role::Other => "allocation",
        }
    }
}

struct Allocation {
    index: u64,
    size: u64,
    color: u64,
    role: Role,
    /// Indices into `values`.
    values: Vec<usize>,
}

struct Value {
    /// The live-range key: `name{index}`.
    key: String,
    instruction: String,
    shape_index: String,
    size: u64,
    offset: u64,
    shape: String,
    allocation: usize,
    line: usize,
}

/// Parses an XLA dump: the buffer assignment and the live range, joined.
pub fn parse(text: &str) -> Result<Imported, FormatError> {
    let (assignment, live_range) = split(text)?;
    let (allocations, values) = parse_assignment(assignment)?;
    let ranges = parse_live_range(live_range)?;
    build(allocations, values, ranges)
}

/// The buffer assignment's lines and the live range's, each with its line numbers in `text`.
/// Lines with their numbers in the whole text.
type Lines<'a> = Vec<(usize, &'a str)>;

fn split(text: &str) -> Result<(Lines<'_>, Lines<'_>), FormatError> {
    let mut assignment = Vec::new();
    let mut live_range = Vec::new();
    let mut into: Option<bool> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start_matches('\u{feff}');
        if trimmed.starts_with(BUFFER_ASSIGNMENT) {
            into = Some(true);
        } else if trimmed.starts_with(LIVE_RANGE) {
            into = Some(false);
        }
        match into {
            Some(true) => assignment.push((i + 1, trimmed)),
            Some(false) => live_range.push((i + 1, trimmed)),
            None if trimmed.trim().is_empty() => {}
            None => {
                return Err(err(
                    i + 1,
                    format!(
                        "expected `{BUFFER_ASSIGNMENT}` or `{LIVE_RANGE}`, found `{}`",
                        clip(line)
                    ),
                ));
            }
        }
    }
    match (assignment.is_empty(), live_range.is_empty()) {
        (false, false) => Ok((assignment, live_range)),
        (true, _) => Err(err(
            1,
            "the buffer assignment (`*-buffer-assignment.txt`) is missing: give it with the live range",
        )),
        (_, true) => Err(err(
            1,
            "the live range (`*-live-range.txt`, beside the buffer assignment in the dump) is missing: give both files together",
        )),
    }
}

/// At most 80 characters of a line, for messages.
fn clip(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_string(),
    }
}

fn number(line: usize, what: &str, text: &str) -> Result<u64, FormatError> {
    text.trim().parse().map_err(|_| {
        err(
            line,
            format!("{what} `{}` is not a non-negative integer", clip(text)),
        )
    })
}

/// The allocation header's flags, outside `|...|` (a shape may hold commas).
fn header_flags(rest: &str) -> Vec<&str> {
    let mut flags = Vec::new();
    let (mut start, mut in_shape) = (0, false);
    for (i, c) in rest.char_indices() {
        match c {
            '|' => in_shape = !in_shape,
            ',' if !in_shape => {
                flags.push(rest[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    flags.push(rest[start..].trim());
    flags
}

fn parse_assignment(lines: Lines<'_>) -> Result<(Vec<Allocation>, Vec<Value>), FormatError> {
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut values: Vec<Value> = Vec::new();
    for (n, line) in lines {
        if let Some(rest) = line.strip_prefix("allocation ") {
            let (head, flags) = rest
                .trim_end()
                .strip_suffix(':')
                .and_then(|r| r.split_once(':'))
                .ok_or_else(|| {
                    err(
                        n,
                        format!("allocation header `{}` does not end with `:`", clip(line)),
                    )
                })?;
            let index = number(n, "allocation index", head)?;
            let flags = header_flags(flags);
            let size = flags
                .first()
                .and_then(|f| f.strip_prefix("size "))
                .ok_or_else(|| err(n, format!("allocation {index} gives no `size`")))?;
            let size = number(n, "allocation size", size)?;
            let mut color = 0;
            let mut role = Role::Other;
            for flag in &flags[1..] {
                if let Some(c) = flag.strip_prefix("color ") {
                    color = number(n, "color", c)?;
                } else if flag.starts_with("parameter ") {
                    role = Role::Parameter;
                } else if *flag == "constant" && role == Role::Other {
                    role = Role::Constant;
                } else if *flag == "thread-local" {
                    role = Role::ThreadLocal;
                } else if *flag == "maybe-live-out" && role == Role::Other {
                    role = Role::LiveOut;
                } else if *flag == "preallocated-temp" {
                    role = Role::Temp;
                }
            }
            allocations.push(Allocation {
                index,
                size,
                color,
                role,
                values: Vec::new(),
            });
        } else if let Some(rest) = line.trim_start().strip_prefix("value: ") {
            let allocation = allocations
                .len()
                .checked_sub(1)
                .ok_or_else(|| err(n, "a value before any allocation"))?;
            values.push(parse_value(n, rest, allocation)?);
            allocations[allocation].values.push(values.len() - 1);
        } else if line.trim().is_empty() || line.starts_with(BUFFER_ASSIGNMENT) {
        } else if allocations.is_empty() {
            return Err(err(
                n,
                format!("expected an allocation, found `{}`", clip(line)),
            ));
        } else {
            // What follows the allocations (newer XLA prints a summary and the heap traces).
            break;
        }
    }
    Ok((allocations, values))
}

/// `<id name[{index}][ (phi)] @n> (size=S,offset=O): shape`.
fn parse_value(n: usize, rest: &str, allocation: usize) -> Result<Value, FormatError> {
    let bad = || err(n, format!("cannot read the value `{}`", clip(rest)));
    let inner = rest.strip_prefix('<').ok_or_else(bad)?;
    let (inner, after) = inner.split_once('>').ok_or_else(bad)?;
    let mut words = inner.split_whitespace();
    let _id = words.next().ok_or_else(bad)?;
    let named = words.next().ok_or_else(bad)?;
    let (instruction, shape_index) = match named.find('{') {
        Some(at) => (&named[..at], &named[at..]),
        None => (named, "{}"),
    };
    if instruction.is_empty() {
        return Err(bad());
    }
    let (placement, shape) = after.split_once(':').ok_or_else(bad)?;
    let placement = placement
        .trim()
        .strip_prefix("(")
        .and_then(|p| p.strip_suffix(")"))
        .ok_or_else(bad)?;
    let (mut size, mut offset) = (None, None);
    for field in placement.split(',') {
        match field.trim().split_once('=') {
            Some(("size", v)) => size = Some(number(n, "value size", v)?),
            Some(("offset", v)) => offset = Some(number(n, "value offset", v)?),
            _ => {}
        }
    }
    let (Some(size), Some(offset)) = (size, offset) else {
        return Err(err(n, format!("value `{named}` gives no size or offset")));
    };
    Ok(Value {
        key: format!("{instruction}{shape_index}"),
        instruction: instruction.to_string(),
        shape_index: shape_index.to_string(),
        size,
        offset,
        shape: shape.trim().to_string(),
        allocation,
        line: n,
    })
}

/// The live range: the instruction sequence and each value's closed interval.
struct Ranges {
    /// Instruction names by position.
    sequence: Vec<String>,
    /// One past the last position: a value ending here is live out.
    max: u64,
    intervals: HashMap<String, (u64, u64)>,
}

fn parse_live_range(lines: Lines<'_>) -> Result<Ranges, FormatError> {
    let mut max = None;
    let mut sequence: Vec<String> = Vec::new();
    let mut intervals = HashMap::default();
    let mut section = "";
    for (n, line) in lines {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix(LIVE_RANGE) {
            let m = rest
                .trim()
                .strip_prefix("(max ")
                .and_then(|r| r.strip_suffix("):"))
                .ok_or_else(|| err(n, format!("expected `{LIVE_RANGE} (max N):`")))?;
            max = Some(number(n, "max", m)?);
            continue;
        }
        match trimmed {
            "InstructionSequence:" | "BufferLiveRange:" => {
                section = if trimmed.starts_with('I') {
                    "sequence"
                } else {
                    "ranges"
                };
                continue;
            }
            "" => continue,
            _ if !line.starts_with("    ") => {
                // Another section (the peak report): nothing more to read.
                section = "";
                continue;
            }
            _ => {}
        }
        match section {
            "sequence" => {
                let (at, name) = trimmed.split_once(':').ok_or_else(|| {
                    err(
                        n,
                        format!("expected `position:instruction`, found `{}`", clip(trimmed)),
                    )
                })?;
                let at = number(n, "position", at)?;
                if at != sequence.len() as u64 {
                    return Err(err(
                        n,
                        format!("position {at} out of order (expected {})", sequence.len()),
                    ));
                }
                sequence.push(name.trim().to_string());
            }
            "ranges" => {
                let (key, range) = trimmed.rsplit_once(':').ok_or_else(|| {
                    err(
                        n,
                        format!(
                            "expected `name{{index}}:start-end`, found `{}`",
                            clip(trimmed)
                        ),
                    )
                })?;
                let (start, end) = range.split_once('-').ok_or_else(|| {
                    err(n, format!("expected `start-end`, found `{}`", clip(range)))
                })?;
                let (start, end) = (number(n, "start", start)?, number(n, "end", end)?);
                if start > end {
                    return Err(err(
                        n,
                        format!("`{key}` ends at {end}, before it starts at {start}"),
                    ));
                }
                intervals.insert(key.to_string(), (start, end));
            }
            _ => {}
        }
    }
    let max = max.ok_or_else(|| {
        err(
            1,
            format!("the live range has no `{LIVE_RANGE} (max N):` line"),
        )
    })?;
    if sequence.is_empty() {
        return Err(err(1, "the live range lists no instruction sequence"));
    }
    Ok(Ranges {
        sequence,
        max,
        intervals,
    })
}

/// A tensor's shape and dtype from an XLA shape (`f32[256,1024]{1,0}`), when it has one and
/// they give XLA's size; tuples and padded layouts keep `bytes`.
fn sized(tensor: &mut Tensor, shape: &str, size: u64) {
    tensor.bytes = Some(size);
    let Some((dtype, rest)) = shape.split_once('[') else {
        return;
    };
    let Some((dims, _layout)) = rest.split_once(']') else {
        return;
    };
    let dtype = match dtype {
        "pred" => "bool".to_string(),
        "f8e4m3fn" => "f8e4m3".to_string(),
        d if d.starts_with('s') && d[1..].parse::<u32>().is_ok() => format!("i{}", &d[1..]),
        d => d.to_string(),
    };
    let Ok(parsed) = dtype.parse::<memplan_core::DType>() else {
        return;
    };
    let dims: Option<Vec<u64>> = if dims.is_empty() {
        Some(Vec::new())
    } else {
        dims.split(',').map(|d| d.trim().parse().ok()).collect()
    };
    let Some(dims) = dims else { return };
    let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    tensor.declared.dtype = Some(dtype.into());
    if elements.and_then(|e| parsed.bytes_for(e)) == Some(size) {
        tensor.bytes = None;
        tensor.declared.shape = Some(dims.into_iter().map(Dim::Fixed).collect());
    }
}

/// The op of an instruction: its name without the `.N` XLA numbers names with.
fn op_of(instruction: &str) -> String {
    match instruction.rsplit_once('.') {
        Some((op, n)) if !op.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => op.into(),
        _ => instruction.into(),
    }
}

fn build(
    allocations: Vec<Allocation>,
    values: Vec<Value>,
    ranges: Ranges,
) -> Result<Imported, FormatError> {
    if values.is_empty() {
        return Err(err(1, "the buffer assignment lists no values"));
    }
    let mut warnings = Vec::new();
    let colors: Vec<u64> = {
        let mut c: Vec<u64> = allocations.iter().map(|a| a.color).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let device_of = |color: u64| (colors.len() > 1).then(|| format!("color {color}"));
    // Tensor ids: the live-range key, made unique with the value's line where XLA repeats one.
    let mut seen: HashMap<String, usize> = HashMap::default();
    let ids: Vec<String> = values
        .iter()
        .map(|v| {
            let count = seen.entry(v.key.clone()).or_insert(0);
            *count += 1;
            let base = if v.shape_index == "{}" {
                v.instruction.clone()
            } else {
                v.key.clone()
            };
            if *count == 1 {
                base
            } else {
                format!("{base}#{}", v.line)
            }
        })
        .collect();

    // The alignment XLA's temp offsets show.
    let temp_offsets = allocations
        .iter()
        .filter(|a| a.role == Role::Temp)
        .flat_map(|a| a.values.iter().map(|&v| values[v].offset));
    let alignment = temp_offsets.fold(64u64, |a, o| {
        if o == 0 {
            a
        } else {
            a.min(1 << o.trailing_zeros().min(6))
        }
    });

    let mut tensors: Vec<Tensor> = Vec::with_capacity(values.len());
    for (v, value) in values.iter().enumerate() {
        let mut t = Tensor {
            id: Id::from(ids[v].as_str()),
            device: device_of(allocations[value.allocation].color).map(Into::into),
            ..Tensor::default()
        };
        sized(&mut t, &value.shape, value.size);
        tensors.push(t);
    }

    // Given offsets per tensor (values first, allocation tensors appended after).
    let mut offsets: Vec<u64> = vec![0; values.len()];
    // Per color: where the next allocation outside the temp arena goes.
    let mut next: HashMap<u64, u64> = HashMap::default();
    for a in allocations.iter().filter(|a| a.role == Role::Temp) {
        let end = next.entry(a.color).or_insert(0);
        *end = (*end).max(a.size);
    }
    let mut thread_local = (0usize, 0u64);
    let mut in_place = 0usize;
    for a in &allocations {
        match a.role {
            Role::Temp => {
                for &v in &a.values {
                    offsets[v] = values[v].offset;
                    if !ranges.intervals.contains_key(&values[v].key) {
                        return Err(err(
                            values[v].line,
                            format!(
                                "value `{}` of the temp allocation has no live range",
                                values[v].key
                            ),
                        ));
                    }
                }
                in_place += alias_in_place(a, &values, &ranges, &ids, &mut tensors);
            }
            Role::ThreadLocal => {
                for &v in &a.values {
                    tensors[v].kind = TensorKind::Scratch;
                    thread_local.0 += 1;
                    thread_local.1 = thread_local.1.saturating_add(values[v].size);
                }
            }
            role => {
                let base = next.entry(a.color).or_insert(0);
                let at = base.div_ceil(alignment).saturating_mul(alignment);
                *base = at.saturating_add(a.size);
                let lone = match a.values[..] {
                    [v] if values[v].offset == 0 && values[v].size == a.size => Some(v),
                    _ => None,
                };
                let root = match lone {
                    Some(v) => v,
                    None => {
                        tensors.push(Tensor {
                            id: format!("allocation {}", a.index).into(),
                            name: Some(format!("allocation {} ({})", a.index, role.name()).into()),
                            bytes: Some(a.size),
                            device: device_of(a.color).map(Into::into),
                            ..Tensor::default()
                        });
                        offsets.push(at);
                        tensors.len() - 1
                    }
                };
                tensors[root].kind = role.kind();
                tensors[root].always_live = Some(true);
                for &v in &a.values {
                    if v != root {
                        tensors[v].declared.view_of = Some(tensors[root].id.as_str().into());
                        tensors[v].declared.view_offset = values[v].offset;
                        tensors[v].kind = role.kind();
                        tensors[v].always_live = Some(true);
                    }
                    offsets[v] = at.saturating_add(values[v].offset);
                }
                offsets[root] = at;
            }
        }
    }
    if thread_local.0 > 0 {
        warnings.push(format!(
            "thread-local values, on the stack of the thread that runs them, not planned: {} ({} B)",
            thread_local.0, thread_local.1
        ));
    }
    if in_place > 0 {
        warnings.push(format!(
            "temp values written in place over an operand that dies at their instruction, each a view of it, as XLA's plan reuses its bytes: {in_place}"
        ));
    }

    let steps = schedule(&allocations, &values, &ranges, &tensors)?;
    let devices = if colors.len() > 1 {
        colors
            .iter()
            .map(|&c| Device {
                id: format!("color {c}"),
                hardware_class: None,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Imported {
        graph: Graph {
            name: String::new(),
            alignment,
            devices,
            tensors,
            steps,
            // Values and live ranges, not a dataflow graph: nothing can be recomputed.
            remat_candidates: Some(Vec::new()),
            ..Graph::default()
        },
        given_plan: GivenPlan {
            planner: "XLA".into(),
            offsets: offsets.into_iter().map(Some).collect(),
        },
        warnings,
    })
}

/// The steps: each instruction that starts a value writes the values that start there and reads
/// those whose interval ends there (or, ending where no step is, at the last step before).
fn schedule(
    allocations: &[Allocation],
    values: &[Value],
    ranges: &Ranges,
    tensors: &[Tensor],
) -> Result<Vec<Step>, FormatError> {
    let last = ranges
        .max
        .min(ranges.sequence.len() as u64)
        .saturating_sub(1);
    let mut starts: Vec<Vec<usize>> = vec![Vec::new(); ranges.sequence.len()];
    let mut ends: Vec<(u64, usize)> = Vec::new();
    for (v, value) in values.iter().enumerate() {
        if allocations[value.allocation].role == Role::ThreadLocal {
            continue;
        }
        let Some(&(start, end)) = ranges.intervals.get(&value.key) else {
            continue;
        };
        if start > last {
            return Err(err(
                value.line,
                format!(
                    "value `{}` starts at {start}, past the last instruction ({last})",
                    value.key
                ),
            ));
        }
        starts[start as usize].push(v);
        ends.push((end.min(last), v));
    }
    let mut position_of_step: Vec<Option<usize>> = vec![None; ranges.sequence.len()];
    let mut steps: Vec<Step> = Vec::new();
    for (p, written) in starts.iter().enumerate() {
        if written.is_empty() {
            continue;
        }
        position_of_step[p] = Some(steps.len());
        steps.push(Step {
            id: Id::from(ranges.sequence[p].as_str()),
            op: op_of(&ranges.sequence[p]).into(),
            writes: written.iter().map(|&v| tensors[v].id.clone()).collect(),
            time: Some(p as u64),
            pinned: true,
            ..Step::default()
        });
    }
    // A read at the last step at or before the end: the floor of the end among the steps.
    let floor: Vec<Option<usize>> = position_of_step
        .iter()
        .scan(None, |last, s| {
            if s.is_some() {
                *last = *s;
            }
            Some(*last)
        })
        .collect();
    ends.sort_unstable();
    for (end, v) in ends {
        let (start, _) = ranges.intervals[&values[v].key];
        let (Some(s), Some(first)) = (floor[end as usize], position_of_step[start as usize]) else {
            continue;
        };
        if s != first {
            steps[s].reads.push(tensors[v].id.clone());
        }
    }
    for step in &mut steps {
        step.reads.dedup();
    }
    Ok(steps)
}

/// Makes each temp value that XLA writes in place over a dying operand a view of the larger of
/// the two (their union, when chains form, a view of its largest member); returns how many.
fn alias_in_place(
    a: &Allocation,
    values: &[Value],
    ranges: &Ranges,
    ids: &[String],
    tensors: &mut [Tensor],
) -> usize {
    let interval = |v: usize| ranges.intervals[&values[v].key];
    let bytes = |v: usize| {
        (
            values[v].offset,
            values[v].offset.saturating_add(values[v].size),
        )
    };
    // Union-find over the allocation's values. Each set lies within its root's bytes (a lone
    // value does; a merge keeps it), so a set fits inside another's root iff its root does.
    let mut parent: HashMap<usize, usize> = a.values.iter().map(|&v| (v, v)).collect();
    fn find(parent: &mut HashMap<usize, usize>, v: usize) -> usize {
        let mut root = v;
        while parent[&root] != root {
            root = parent[&root];
        }
        let mut at = v;
        while at != root {
            let next = parent[&at];
            parent.insert(at, root);
            at = next;
        }
        root
    }
    // The values ending at each time, by their first byte, with the longest one's length: a
    // value starting then meets only those whose bytes it overlaps, found by bisection, where
    // trying each one made thousands of values ending where thousands start (a loop's tuple)
    // cost their product.
    let mut ending: HashMap<u64, (Vec<(u64, usize)>, u64)> = HashMap::default();
    for (order, &v) in a.values.iter().enumerate() {
        let (d0, d1) = bytes(v);
        let (dying, longest) = ending.entry(interval(v).1).or_default();
        dying.push((d0, order));
        *longest = (*longest).max(d1 - d0);
    }
    for (dying, _) in ending.values_mut() {
        dying.sort_unstable();
    }
    let mut merged = 0;
    let mut by_start: Vec<usize> = a.values.clone();
    by_start.sort_by_key(|&v| (interval(v).0, v));
    let mut met: Vec<usize> = Vec::new();
    for b in by_start {
        let (start, _) = interval(b);
        let Some((dying, longest)) = ending.get(&start) else {
            continue;
        };
        let (b0, b1) = bytes(b);
        // Those starting below `b`'s end and reaching past its start, in the allocation's order.
        met.clear();
        let below = dying.partition_point(|&(d0, _)| d0 < b1);
        for &(d0, order) in dying[..below].iter().rev() {
            if d0.saturating_add(*longest) <= b0 {
                break;
            }
            if bytes(a.values[order]).1 > b0 {
                met.push(order);
            }
        }
        met.sort_unstable();
        for d in met.iter().map(|&order| a.values[order]) {
            let rd = find(&mut parent, d);
            let rb = find(&mut parent, b);
            if rd == rb || interval(d).0 == start {
                continue;
            }
            // The larger root keeps its bytes; the other set must lie inside them.
            let (keep, other) = if values[rd].size >= values[rb].size {
                (rd, rb)
            } else {
                (rb, rd)
            };
            let ((k0, k1), (o0, o1)) = (bytes(keep), bytes(other));
            if o0 >= k0 && o1 <= k1 {
                parent.insert(other, keep);
                merged += 1;
            }
        }
    }
    for &v in &a.values {
        let r = find(&mut parent, v);
        if r != v {
            tensors[v].declared.view_of = Some(ids[r].as_str().into());
            tensors[v].declared.view_offset = values[v].offset - values[r].offset;
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer assignment and its live range, joined: in-place reuse, a thread-local value, a
    /// live-out allocation two values share, an instruction that defines no value.
    const PAIR: &str = include_str!("testdata/xla-pair.txt");

    fn halves() -> (&'static str, &'static str) {
        let at = PAIR.find(LIVE_RANGE).unwrap();
        (&PAIR[..at], &PAIR[at..])
    }

    #[test]
    fn the_other_files_of_a_dump_are_told_apart_and_named_after_their_module() {
        assert_eq!(
            other_file("HloModule jit_f, is_scheduled=true"),
            Some("HLO module text")
        );
        assert_eq!(
            other_file("Memory Space: default (color=0)\nTotal bytes: 1"),
            Some("memory usage report")
        );
        assert_eq!(other_file(PAIR), None);
        let stem = "module_0030.jit_step.cpu_after_optimizations";
        let assignment = Some(format!("{stem}{ASSIGNMENT_SUFFIX}"));
        assert_eq!(assignment_beside(&format!("{stem}.txt")), assignment);
        assert_eq!(
            assignment_beside(&format!("{stem}-memory-usage-report.txt")),
            assignment
        );
        // Before optimization, XLA writes no buffer assignment of the module.
        assert_eq!(
            assignment_beside("module_0030.jit_step.before_optimizations.txt"),
            None
        );
        assert_eq!(assignment_beside("notes.md"), None);
        let e = crate::load("HloModule m\n".as_bytes(), &format!("dump/{stem}.txt")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "this is XLA's HLO module text: memplan reads `{stem}-buffer-assignment.txt` with the `*-live-range.txt` beside it"
            )
        );
    }

    fn imported() -> Imported {
        parse(PAIR).unwrap()
    }

    #[test]
    fn values_become_tensors_with_xla_sizes_and_roles() {
        let i = imported();
        let t = |id: &str| i.graph.tensors.iter().find(|t| t.id == id).unwrap();
        assert_eq!(t("p.1").kind, TensorKind::Input);
        assert_eq!(t("p.1").declared.shape, Some(vec![Dim::Fixed(16)]));
        assert_eq!(t("p.1").declared.dtype.as_deref(), Some("f32"));
        // A tuple keeps XLA's bytes.
        assert_eq!(t("tuple.2").bytes, Some(8));
        assert_eq!(t("tuple.2").kind, TensorKind::Output);
        // Two values share a live-out allocation: views of it.
        assert_eq!(t("b.3").declared.view_of.as_deref(), Some("allocation 2"));
        assert_eq!(t("allocation 2").bytes, Some(64));
        assert_eq!(t("allocation 2").always_live, Some(true));
        assert_eq!(t("r.9").kind, TensorKind::Scratch);
        assert!(
            i.warnings
                .iter()
                .any(|w| w.ends_with("not planned: 1 (4 B)"))
        );
        // Temp values are intermediates with their live ranges.
        assert_eq!(t("a.2").kind, TensorKind::Intermediate);
        assert_eq!(t("a.2").always_live, None);
        i.graph.resolve().unwrap();
    }

    #[test]
    fn only_instructions_that_define_values_are_steps() {
        let i = imported();
        let ids: Vec<&str> = i.graph.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["p.1", "a.2", "b.3", "c.4", "d.5", "tuple.2"]);
        let step = |id: &str| i.graph.steps.iter().find(|s| s.id == id).unwrap();
        // a.2 ends at 3, where c.4 starts: c.4 reads it.
        assert_eq!(step("c.4").reads, ["b.3", "a.2"]);
        // c.4 ends at 5 (d.5 starts there); live-out values end at the last step.
        assert_eq!(step("tuple.2").reads, ["p.1", "d.5"]);
        assert_eq!(&*step("c.4").op, "c");
    }

    #[test]
    fn in_place_reuse_is_a_view_and_xla_offsets_are_a_given_plan() {
        let i = imported();
        let t = |id: &str| i.graph.tensors.iter().position(|t| t.id == id).unwrap();
        // a.2 ends at 3, where c.4 starts, on other bytes; d.5 starts at 5, where c.4 ends,
        // over c.4's bytes: in place.
        assert_eq!(i.graph.tensors[t("a.2")].declared.view_of, None);
        assert_eq!(
            i.graph.tensors[t("d.5")].declared.view_of.as_deref(),
            Some("c.4")
        );
        assert!(
            i.warnings
                .iter()
                .any(|w| w.starts_with("temp values written in place") && w.ends_with(": 1"))
        );
        let offsets: Vec<u64> = i.given_plan.offsets.iter().map(|o| o.unwrap()).collect();
        assert_eq!(offsets[t("c.4")], 64);
        // Past the temp arena (128 B), in allocation order, 64-aligned: p.1, tuple.2, allocation 2.
        assert_eq!(offsets[t("p.1")], 128);
        assert_eq!(offsets[t("tuple.2")], 192);
        assert_eq!(offsets[t("allocation 2")], 256);
        assert_eq!(offsets[t("out.6")], 256);
        assert_eq!(i.graph.alignment, 64);
    }

    #[test]
    fn the_pair_is_read_in_either_order_and_one_half_alone_is_refused() {
        let (assignment, live_range) = halves();
        let reversed = parse(&format!("{live_range}{assignment}")).unwrap();
        assert_eq!(reversed, imported());
        let e = parse(assignment).unwrap_err().to_string();
        assert!(e.contains("live range (`*-live-range.txt`"), "{e}");
        let e = parse(live_range).unwrap_err().to_string();
        assert!(
            e.contains("buffer assignment (`*-buffer-assignment.txt`) is missing"),
            "{e}"
        );
        assert_eq!(
            companion("dir/m.jit_f-buffer-assignment.txt").as_deref(),
            Some("dir/m.jit_f-live-range.txt")
        );
        assert_eq!(
            companion("m-live-range.txt").as_deref(),
            Some("m-buffer-assignment.txt")
        );
        let names = [
            "b-live-range.txt",
            "a-buffer-assignment.txt",
            "b-buffer-assignment.txt",
            "x.txt",
        ];
        assert_eq!(pairs(&names), [(2, 0)]);
        let joined = join(assignment.as_bytes(), live_range.as_bytes());
        assert_eq!(
            parse(std::str::from_utf8(&joined).unwrap()).unwrap(),
            imported()
        );
    }

    #[test]
    fn a_long_chain_of_in_place_writes_is_one_buffer() {
        // Value k lives k..=k+1 at offset 0: each is written over the one before as it dies.
        let n = 20_000;
        let mut text =
            String::from("BufferAssignment:\nallocation 0: size 64, preallocated-temp:\n");
        for k in 0..n {
            text += &format!(" value: <{k} v.{k} @0> (size=64,offset=0): f32[16]{{0}}\n");
        }
        text += &format!("HloLiveRange (max {n}):\n  InstructionSequence:\n");
        for k in 0..n {
            text += &format!("    {k}:v.{k}\n");
        }
        text += "  BufferLiveRange:\n";
        for k in 0..n {
            text += &format!("    v.{k}{{}}:{k}-{}\n", (k + 1).min(n - 1));
        }
        let i = parse(&text).unwrap();
        let roots = i
            .graph
            .tensors
            .iter()
            .filter(|t| t.declared.view_of.is_none())
            .count();
        assert_eq!(roots, 1);
        assert!(
            i.graph.tensors[1..]
                .iter()
                .all(|t| t.declared.view_of.as_deref() == Some("v.0"))
        );
        i.graph.resolve().unwrap();
    }

    /// The in-place rule as first written, over every pair of a value ending and one starting
    /// at the same instruction: each value's root, from `(start, end, offset, size)` in the
    /// allocation's order.
    fn in_place_roots_pair_by_pair(values: &[(u64, u64, u64, u64)]) -> Vec<usize> {
        let mut root: Vec<usize> = (0..values.len()).collect();
        let find = |root: &[usize], mut v: usize| {
            while root[v] != v {
                v = root[v];
            }
            v
        };
        let bytes = |v: usize| (values[v].2, values[v].2 + values[v].3);
        let mut by_start: Vec<usize> = (0..values.len()).collect();
        by_start.sort_by_key(|&v| (values[v].0, v));
        for b in by_start {
            let start = values[b].0;
            for d in (0..values.len()).filter(|&d| values[d].1 == start && values[d].0 != start) {
                let (rd, rb) = (find(&root, d), find(&root, b));
                let ((d0, d1), (b0, b1)) = (bytes(d), bytes(b));
                if rd == rb || d0 >= b1 || b0 >= d1 {
                    continue;
                }
                let (keep, other) = if values[rd].3 >= values[rb].3 {
                    (rd, rb)
                } else {
                    (rb, rd)
                };
                let ((k0, k1), (o0, o1)) = (bytes(keep), bytes(other));
                if o0 >= k0 && o1 <= k1 {
                    root[other] = keep;
                }
            }
        }
        (0..values.len()).map(|v| find(&root, v)).collect()
    }

    proptest::proptest! {
        /// The in-place views of random temp values (on a few offsets and times, so many meet)
        /// are those the pair-by-pair rule gives.
        #[test]
        fn in_place_views_are_those_of_the_pair_by_pair_rule(
            values in proptest::collection::vec((0u64..7, 0u64..4, 0u64..8, 0u64..4), 1..40),
        ) {
            let values: Vec<(u64, u64, u64, u64)> = (values.iter())
                .map(|&(start, long, slot, size)| (start, (start + long).min(7), 64 * slot, 64 * size))
                .collect();
            let mut text = String::from("BufferAssignment:\nallocation 0: size 704, preallocated-temp:\n");
            for (k, &(_, _, offset, size)) in values.iter().enumerate() {
                text += &format!(" value: <{k} v.{k} @0> (size={size},offset={offset}): f32[]\n");
            }
            text += "HloLiveRange (max 8):\n  InstructionSequence:\n";
            for t in 0..8 {
                text += &format!("    {t}:t.{t}\n");
            }
            text += "  BufferLiveRange:\n";
            for (k, &(start, end, _, _)) in values.iter().enumerate() {
                text += &format!("    v.{k}{{}}:{start}-{end}\n");
            }
            let tensors = parse(&text).unwrap().graph.tensors;
            for (k, root) in in_place_roots_pair_by_pair(&values).into_iter().enumerate() {
                let expected = (root != k).then(|| format!("v.{root}"));
                proptest::prop_assert_eq!(tensors[k].declared.view_of.as_deref(), expected.as_deref());
            }
        }
    }

    /// Many values end where many start, in one temp allocation (the elements of a tuple given
    /// to a loop, and of the loop's result): each new value written over an old one's bytes is
    /// a view of it, and no other pair is.
    #[test]
    fn in_place_writes_among_many_values_ending_and_starting_at_once_pair_by_their_bytes() {
        let n = 20_000;
        let mut text = format!(
            "BufferAssignment:\nallocation 0: size {}, preallocated-temp:\n",
            64 * n
        );
        for (name, first) in [("old", 0), ("new", n)] {
            for k in 0..n {
                let (id, offset) = (first + k, 64 * k);
                text += &format!(
                    " value: <{id} {name}{{{k}}} @0> (size=64,offset={offset}): f32[16]{{0}}\n"
                );
            }
        }
        text += "HloLiveRange (max 3):\n  InstructionSequence:\n    0:old\n    1:new\n    2:end\n";
        text += "  BufferLiveRange:\n";
        for (name, range) in [("old", "0-1"), ("new", "1-2")] {
            for k in 0..n {
                text += &format!("    {name}{{{k}}}:{range}\n");
            }
        }
        let i = parse(&text).unwrap();
        let tensors = &i.graph.tensors;
        assert_eq!(tensors.len(), 2 * n);
        for (old, new) in tensors[..n].iter().zip(&tensors[n..]) {
            assert_eq!(old.declared.view_of, None);
            assert_eq!(new.declared.view_of.as_deref(), Some(old.id.as_str()));
        }
        i.graph.resolve().unwrap();
    }

    #[test]
    fn a_color_other_than_0_is_a_device_of_its_own() {
        let (assignment, live_range) = halves();
        let colored = assignment.replace(
            "allocation 4: size 128, preallocated-temp:",
            "allocation 4: size 128, color 1, preallocated-temp:",
        );
        let i = parse(&format!("{colored}{live_range}")).unwrap();
        let ids: Vec<&str> = i.graph.devices.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["color 0", "color 1"]);
        let device = |id: &str| {
            let t = i.graph.tensors.iter().find(|t| t.id == id).unwrap();
            t.device.as_deref().unwrap().to_string()
        };
        assert_eq!(device("c.4"), "color 1");
        assert_eq!(device("p.1"), "color 0");
        // Each color's address space starts at 0: the parameter is the first of color 0.
        let t = |id: &str| i.graph.tensors.iter().position(|t| t.id == id).unwrap();
        assert_eq!(i.given_plan.offsets[t("p.1")], Some(0));
        assert_eq!(i.given_plan.offsets[t("c.4")], Some(64));
        i.graph.resolve().unwrap();
    }

    #[test]
    fn errors_name_the_line() {
        let (assignment, live_range) = halves();
        let broken = assignment.replace("(size=64,offset=64)", "(size=64,offset=x)");
        let e = parse(&format!("{broken}{live_range}"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("XLA dump line 13: value offset `x`"), "{e}");
        let missing = live_range.replace("    c.4{}:3-5\n", "");
        let e = parse(&format!("{assignment}{missing}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("value `c.4{}` of the temp allocation has no live range"),
            "{e}"
        );
    }
}
