//! minimalloc CSV: `id,lower,upper,size[,alignment][,offset]`, one buffer a row.
//!
//! Lifetimes are half-open `[lower, upper)` in the file's own time units (upstream minimalloc's
//! convention: a buffer ending at t may share bytes with one starting at t). As upstream's parser
//! reads them, an `end` column is inclusive instead, `begin` or `start` name the lower end, and
//! `buffer` or `buffer_id` the id (its older files say `buffer,start,end`). An `offset` column is
//! a given plan. Upstream's `gaps` (times within a lifespan when a buffer is not live) are
//! refused: a lifetime here is one interval.
//!
//! Import makes a graph with one step per distinct start time, in time order: the step at time
//! t writes the buffers starting at t and reads those whose last start-time position it is (the
//! graph records these as each buffer's two steps, `Graph::lifetimes`, not as lists of ids).
//! Two half-open lifetimes overlap iff the later start lies in both, so this keeps every conflict
//! and every live set that matters (the lower bound is reached at some start) while a million
//! time units become a few hundred positions. Steps are named `t=<time>`.
//!
//! Export writes the planning problem back in its own times where it has them (a minimalloc CSV
//! read in: `lower` its start, `upper` the next start, or one past the last), else with positions
//! as times (`upper = last + 1`); the
//! alignments when any is not 1, and the offsets of a plan when one is given.

use memplan_core::graph::{
    Declaration, Element, EventRun, Events, Graph, GraphError, ResolvedGraph, Tensor,
};
use memplan_core::{Lifetime, Problem};
use std::sync::Arc;

use crate::FormatError;

/// What a minimalloc CSV holds: the buffers as a graph, resolved, and the offsets when the file
/// gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub graph: Graph,
    pub resolved: ResolvedGraph,
    /// The `offset` column, one per tensor in graph order.
    pub offsets: Option<Vec<u64>>,
}

/// The columns read, each under the names upstream's parser accepts for it (its older files
/// say `buffer,start,end`; its writer's old format `id,start,end`).
pub(crate) const ID: [&str; 3] = ["id", "buffer", "buffer_id"];
const LOWER: [&str; 3] = ["lower", "begin", "start"];
/// `upper` is half-open, `end` inclusive, whichever name the start has (as upstream reads them).
const UPPER: [&str; 1] = ["upper"];
const END: [&str; 1] = ["end"];
const OTHERS: [&str; 3] = ["size", "alignment", "offset"];

/// Parses a minimalloc CSV and resolves its graph. A row is read into its tensor and its
/// lifetime and nothing else is kept of it; ids are checked unique once, by the resolve, whose
/// error is given the row's line.
pub fn parse(text: &str) -> Result<Imported, FormatError> {
    let err = |line: u64, message: String| FormatError::Csv { line, message };
    // Headers and numbers are trimmed; ids are kept verbatim, so an id with surrounding spaces
    // survives a round trip (the writer quotes it).
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::Headers)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| err(1, format!("cannot read the header: {e}")))?
        .clone();
    let named = |h: &str, names: &[&str]| names.iter().any(|n| h.eq_ignore_ascii_case(n));
    let known = [&ID[..], &LOWER, &UPPER, &END, &OTHERS].concat();
    for h in &headers {
        if h.eq_ignore_ascii_case("gaps") {
            return Err(err(
                1,
                "column `gaps` (times within a lifespan when the buffer is not live) is not \
                 supported: memplan's lifetimes are one interval each"
                    .into(),
            ));
        }
        if !named(h, &known) {
            return Err(err(
                1,
                format!("unknown column `{h}` (known: {})", known.join(", ")),
            ));
        }
    }
    // The one column of a role, under any of its names.
    let column = |names: &[&str], role: &str| -> Result<Option<usize>, FormatError> {
        let mut found = headers.iter().enumerate().filter(|(_, h)| named(h, names));
        match (found.next(), found.next()) {
            (Some((c, _)), None) => Ok(Some(c)),
            (None, _) => Ok(None),
            (Some((_, a)), Some((_, b))) => Err(err(
                1,
                format!("columns `{a}` and `{b}` both give the {role}"),
            )),
        }
    };
    let need = |names: &[&str], role: &str| {
        column(names, role)?.ok_or_else(|| {
            let other_names = match names {
                [_, others @ ..] if !others.is_empty() => {
                    format!(" (or `{}`)", others.join("`, `"))
                }
                _ => String::new(),
            };
            err(1, format!("missing column `{}`{other_names}", names[0]))
        })
    };
    let id = need(&ID, "id")?;
    let size = need(&["size"], "size")?;
    let start = need(&LOWER, "start of each lifetime")?;
    let (stop, inclusive) = match (
        column(&UPPER, "end of each lifetime")?,
        column(&END, "end of each lifetime")?,
    ) {
        (Some(u), None) => (u, false),
        (None, Some(e)) => (e, true),
        _ => {
            return Err(err(
                1,
                "give each lifetime's end as `upper` (half-open) or `end` (inclusive), one of them"
                    .into(),
            ));
        }
    };
    let alignment = column(&["alignment"], "alignment")?;
    let offset = column(&["offset"], "offset")?;

    let mut tensors = Vec::new();
    let mut lifetimes = Vec::new();
    let mut offsets = offset.map(|_| Vec::new());
    let mut record = csv::ByteRecord::new();
    for line in 2u64.. {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(err(line, e.to_string())),
        }
        // The text is UTF-8, and the reader splits it only at ASCII bytes.
        let text_of = |c: usize| std::str::from_utf8(record.get(c).unwrap_or(b"")).unwrap_or("");
        let field = |c: usize, name: &str| -> Result<u64, FormatError> {
            let text = text_of(c).trim();
            text.parse::<u64>().map_err(|_| {
                err(
                    line,
                    format!("`{name}` is `{text}`, not a non-negative integer"),
                )
            })
        };
        let optional = |c: Option<usize>, name: &str| c.map(|c| field(c, name)).transpose();
        let row_id = text_of(id);
        if row_id.trim().is_empty() {
            return Err(err(line, "empty `id`".into()));
        }
        let lower = field(start, &headers[start])?;
        let mut upper = field(stop, &headers[stop])?;
        if inclusive {
            upper = upper
                .checked_add(1)
                .ok_or_else(|| err(line, "`end` overflows".into()))?;
        }
        if lower >= upper {
            return Err(err(
                line,
                format!("buffer `{row_id}`: lower {lower} is not below upper {upper}"),
            ));
        }
        let bytes = field(size, "size")?;
        let row_alignment = optional(alignment, "alignment")?;
        // A placement's end must be an address: offset plus the bytes it occupies.
        if let (Some(offsets), Some(offset)) = (&mut offsets, optional(offset, "offset")?) {
            // (An alignment that is not a power of two is refused when the graph resolves.)
            let occupied = match row_alignment.filter(|a| a.is_power_of_two()) {
                Some(alignment) => memplan_core::graph::align_up(bytes, alignment),
                None => Some(bytes),
            };
            if occupied.and_then(|o| offset.checked_add(o)).is_none() {
                return Err(err(
                    line,
                    format!(
                        "buffer `{row_id}`: offset {offset} plus its {bytes} bytes passes 2^64"
                    ),
                ));
            }
            offsets.push(offset);
        }
        tensors.push(Tensor {
            id: row_id.into(),
            bytes: Some(bytes),
            declared: Declaration {
                alignment: row_alignment,
                ..Declaration::default()
            }
            .into(),
            ..Tensor::default()
        });
        lifetimes.push((lower, upper));
    }
    // Grown by doubling: what the rows did not use goes back (in wasm, for what comes next).
    tensors.shrink_to_fit();
    let mut events = EventsBuilder::default();
    let lifetimes = steps_of_lifetimes(&mut events, &lifetimes, "", None);
    let graph = Graph {
        tensors,
        events: events.finish(),
        lifetimes,
        // Buffers and lifetimes, no ops: nothing can be recomputed.
        remat_candidates: Some(Vec::new()),
        ..Graph::default()
    };
    let resolved = graph.resolve().map_err(|e| match e {
        // The second row of the id: tensors are the rows in order, from line 2.
        GraphError::DuplicateId {
            what: Element::Tensor,
            id,
        } => {
            let second = (graph.tensors.iter().enumerate())
                .filter(|(_, t)| t.id == id)
                .nth(1)
                .map_or(0, |(t, _)| t as u64);
            err(second + 2, format!("duplicate id `{id}`"))
        }
        e => FormatError::Graph(e),
    })?;
    Ok(Imported {
        graph,
        resolved,
        offsets,
    })
}

/// [`Events`] being appended to, run by run ([`steps_of_lifetimes`]).
#[derive(Default)]
pub(crate) struct EventsBuilder {
    times: Vec<u64>,
    runs: Vec<EventRun>,
}

impl EventsBuilder {
    /// The events, none when there are no steps.
    pub(crate) fn finish(self) -> Option<Events> {
        (!self.times.is_empty()).then(|| Events {
            times: self.times.into(),
            runs: self.runs,
        })
    }
}

/// The schedule that gives buffers with half-open lifetimes `[lower, upper)` (`lower < upper`)
/// their conflicts: one step per distinct start time, in time order, appended to `out` as a run
/// of events on `device` (the first device when `None`) whose ids start with `prefix`; and per
/// buffer, the step that writes it (its start's) and the one that last reads it (the last
/// start-time position it spans), as the graph records them ([`Graph::lifetimes`]) rather
/// than as lists of ids in every step (two allocations a step; see the module docs). The
/// steps are events, pinned: they stand for given lifetimes (a problem's, or a recorded run's
/// events), not for operators whose dataflow would let them move, so no reorder moves them.
/// A step index past `u32` is held at `u32::MAX`: a graph of that many steps is refused when
/// it resolves.
pub(crate) fn steps_of_lifetimes(
    out: &mut EventsBuilder,
    lifetimes: &[(u64, u64)],
    prefix: &str,
    device: Option<Arc<str>>,
) -> Vec<(u32, u32)> {
    // Each lifetime's first and last position, from its ends in sorted order: a sweep, where a
    // binary search per end missed the cache at every step on a million rows.
    let ends_sorted = |end: &dyn Fn(&(u64, u64)) -> u64| {
        let mut sorted: Vec<(u64, usize)> = (lifetimes.iter().enumerate())
            .map(|(i, l)| (end(l), i))
            .collect();
        sorted.sort_unstable();
        sorted
    };
    let base = out.times.len();
    let step = |position: usize| u32::try_from(base + position).unwrap_or(u32::MAX);
    let times = &mut out.times;
    let mut recorded = vec![(0, 0); lifetimes.len()];
    for (lower, i) in ends_sorted(&|l| l.0) {
        if times.len() == base || times.last() != Some(&lower) {
            times.push(lower);
        }
        recorded[i].0 = step(times.len() - 1 - base);
    }
    // The last position is that of the latest start at or before `upper - 1` (one exists: its
    // own lower).
    let own = &times[base..];
    let mut at = 0;
    for (end, i) in ends_sorted(&|l| l.1 - 1) {
        while at < own.len() && own[at] <= end {
            at += 1;
        }
        recorded[i].1 = step(at - 1);
    }
    if own.is_empty() {
        return recorded;
    }
    // Grown by doubling: what it did not use goes back (in wasm, for what comes next).
    times.shrink_to_fit();
    let end = u32::try_from(times.len()).unwrap_or(u32::MAX);
    out.runs.push(EventRun {
        end,
        device,
        prefix: prefix.into(),
    });
    recorded
}

/// Writes `problem` as minimalloc CSV, each buffer named by `name` (see
/// [`crate::report::PlanReport::new`]), with `offsets` (one per buffer, e.g.
/// [`memplan_core::Plan::device_offsets`]) when given. Always-live buffers span every position.
/// Views and elided tensors own no buffer and are not written.
pub fn write(problem: &Problem, name: &dyn Fn(usize) -> String, offsets: Option<&[u64]>) -> String {
    let mut writer = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Necessary)
        .from_writer(Vec::new());
    // Alignments other than 1 are written, so the buffers occupy the same bytes when read back.
    let aligned = problem.buffers.iter().any(|b| b.alignment() != 1);
    let mut header = vec!["id", "lower", "upper", "size"];
    if aligned {
        header.push("alignment");
    }
    if offsets.is_some() {
        header.push("offset");
    }
    writer.write_record(&header).expect("writing to memory");
    for (b, buffer) in problem.buffers.iter().enumerate() {
        let span = match buffer.lifetime() {
            Lifetime::Live(i) => i,
            Lifetime::Always => buffer.span(problem.positions),
        };
        let mut record = vec![
            name(b),
            problem.time_at(span.first).to_string(),
            problem.time_after(span.last).to_string(),
            buffer.size.to_string(),
        ];
        if aligned {
            record.push(buffer.alignment().to_string());
        }
        if let Some(offsets) = offsets {
            record.push(offsets[b].to_string());
        }
        writer.write_record(&record).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("CSV of UTF-8 fields")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_open_lifetimes_that_touch_do_not_conflict() {
        let imported = parse("id,lower,upper,size\n0,0,10,4\n1,10,20,4\n2,5,15,8\n").unwrap();
        let live = memplan_core::liveness_of(&imported.graph).unwrap();
        let spans: Vec<_> = live.problem.buffers.iter().map(|b| b.lifetime()).collect();
        // Start times 0, 5, 10 are positions 0, 1, 2.
        use memplan_core::LiveInterval as I;
        assert_eq!(
            spans,
            vec![
                Lifetime::Live(I::new(0, 1)),
                Lifetime::Live(I::new(2, 2)),
                Lifetime::Live(I::new(1, 2))
            ]
        );
        assert_eq!(imported.offsets, None);
        // The start times stay beside the positions, for `search`'s preorder by time.
        assert_eq!(live.problem.position_times, [0, 5, 10]);
        // A step per start, recorded as events: pinned, named by their time, listing nothing.
        let g = &imported.graph;
        assert!(g.steps.is_empty() && g.events.is_some());
        let ids: Vec<String> = g.schedule().map(|s| s.id.to_string()).collect();
        assert_eq!(ids, ["t=0", "t=5", "t=10"]);
        assert!(
            g.schedule()
                .all(|s| s.pinned && s.reads.is_empty() && s.writes.is_empty())
        );
    }

    #[test]
    fn bad_rows_name_their_line() {
        let e = parse("id,lower,upper,size\n0,0,10,4\n1,10,10,4\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CSV line 3: buffer `1`: lower 10 is not below upper 10"
        );
        let e = parse("id,lower,upper,size\n0,0,x,4\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CSV line 2: `upper` is `x`, not a non-negative integer"
        );
        let e = parse("id,lower,upper,size\n0,0,1,4\n0,0,1,4\n").unwrap_err();
        assert_eq!(e.to_string(), "CSV line 3: duplicate id `0`");
        let e = parse("id,lower,upper\n").unwrap_err();
        assert_eq!(e.to_string(), "CSV line 1: missing column `size`");
        // Header errors say which column and why.
        for (header, says) in [
            (
                "id,lower,upper,size,gaps",
                "column `gaps` (times within a lifespan",
            ),
            (
                "id,lower,upper,size,colour",
                "unknown column `colour` (known: id, buffer",
            ),
            (
                "buffer,lower,size",
                "`upper` (half-open) or `end` (inclusive)",
            ),
            (
                "lower,upper,size",
                "missing column `id` (or `buffer`, `buffer_id`)",
            ),
            (
                "id,start,begin,upper,size",
                "columns `start` and `begin` both give",
            ),
            (
                "id,lower,upper,end,size",
                "`upper` (half-open) or `end` (inclusive), one of them",
            ),
        ] {
            let e = parse(&format!("{header}\n")).unwrap_err().to_string();
            assert!(
                e.starts_with("CSV line 1: ") && e.contains(says),
                "{header}: {e}"
            );
        }
    }

    /// Upstream's parser takes `buffer` or `buffer_id` for the id and `start` or `begin` for the
    /// lower end, and reads `end` as inclusive whatever the start is called: its older benchmark
    /// files say `buffer,start,end,size`, its writer's old format `id,start,end,size`.
    #[test]
    fn upstream_column_names_read_as_upstream_reads_them() {
        let half_open = parse("id,lower,upper,size\na,0,10,4\nb,10,20,4\n").unwrap();
        for text in [
            "buffer,start,end,size\na,0,9,4\nb,10,19,4\n",
            "id,start,end,size\na,0,9,4\nb,10,19,4\n",
            "buffer_id,begin,end,size\na,0,9,4\nb,10,19,4\n",
            "id,start,upper,size\na,0,10,4\nb,10,20,4\n",
            "ID,Lower,End,Size\na,0,9,4\nb,10,19,4\n",
        ] {
            assert_eq!(parse(text).unwrap(), half_open, "{text}");
        }
    }

    #[test]
    fn an_offset_whose_end_passes_2_64_is_refused() {
        let e = parse("id,lower,upper,size,offset\n0,0,10,100,18446744073709551600\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CSV line 2: buffer `0`: offset 18446744073709551600 plus its 100 bytes passes 2^64"
        );
        // Rounded up to its alignment, the buffer ends past 2^64 too.
        let text = "id,lower,upper,size,alignment,offset\n0,0,10,100,64,18446744073709551500\n";
        assert!(parse(text).is_err());
        assert!(parse("id,lower,upper,size,offset\n0,0,10,100,18446744073709551515\n").is_ok());
        let text = "id,lower,upper,size,alignment,offset\n0,0,10,100,3,0\n";
        assert!(matches!(parse(text), Ok(_) | Err(FormatError::Graph(_))));
    }

    #[test]
    fn offsets_and_inclusive_ends_are_read() {
        let imported = parse("id,begin,end,size,offset\na,0,9,4,0\nb,10,19,4,0\n").unwrap();
        assert_eq!(imported.offsets, Some(vec![0, 0]));
        let live = memplan_core::liveness_of(&imported.graph).unwrap();
        assert!(
            !live.problem.buffers[0]
                .span(2)
                .overlaps(live.problem.buffers[1].span(2))
        );
    }

    /// The problem of a minimalloc CSV, its buffers named.
    fn problem_of(text: &str) -> Problem {
        let graph = parse(text).unwrap().graph;
        memplan_core::liveness_of(&graph).unwrap().named(&graph)
    }

    fn written(problem: &Problem, offsets: Option<&[u64]>) -> String {
        write(problem, &|b| problem.buffer_name(b), offsets)
    }

    #[test]
    fn ids_with_spaces_survive_a_round_trip() {
        let text = "id,lower,upper,size\n\" a \",0,2,4\n\"b, c\", 1 , 3 ,8\n";
        let first = problem_of(text);
        assert_eq!(first.names, [" a ", "b, c"]);
        let again = problem_of(&written(&first, None));
        assert_eq!(first, again);
    }

    #[test]
    fn export_then_import_keeps_every_conflict() {
        let text = "id,lower,upper,size\n0,0,10,4\n1,10,20,4\n2,5,15,8\n3,0,20,2\n";
        let first = problem_of(text);
        let csv = written(&first, None);
        let again = problem_of(&csv);
        assert_eq!(first.buffers, again.buffers);
        // In the file's own times: each lifetime from its start to the next start after it.
        assert_eq!(again.position_times, [0, 5, 10]);
        assert_eq!(
            csv,
            "id,lower,upper,size\n0,0,10,4\n1,10,11,4\n2,5,11,8\n3,0,11,2\n"
        );
        // A problem without times writes its positions.
        let untimed = Problem {
            position_times: Vec::new(),
            ..first
        };
        assert!(written(&untimed, None).ends_with("\n3,0,3,2\n"));
    }
}
