//! The memplan JSON dump, version 1: `{"memplan": 1, ...}` with the fields of
//! [`memplan_core::Graph`] (documented in docs/format.md, schema in static/schema/).
//!
//! Reading checks, in order: the JSON syntax (line and column; a key given twice in one object
//! is refused, not silently overwritten), the version, the structure (unknown fields and wrong
//! types, with the JSON path), then every graph invariant ([`Graph::resolve`], naming the
//! element). Writing is canonical: the same graph gives the same bytes, with `memplan` first and
//! defaults left out.
//!
//! A graph's text is read twice: a first pass checks the syntax, the keys and the version and
//! keeps nothing, and the second reads `tensors` and `steps` straight into the graph. A dump of
//! a million tensors held as a tree of JSON values took twice the memory of its graph (a
//! program, small, is still read as one).

use std::fmt;

use memplan_core::graph::Device;
use memplan_core::program::{
    Context, Event, MAX_CONTEXTS, Program, ProgramError, ResolvedProgram, Routine,
};
use memplan_core::{Graph, ResolvedGraph};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::FormatError;

mod path;

/// The version this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// A JSON value read with every object's keys unique.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` is given twice in one object"
                )));
            }
            let StrictValue(v) = map.next_value_seed(StrictSeed)?;
            object.insert(key, v);
        }
        Ok(Value::Object(object))
    }
}

struct StrictSeed;

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = StrictValue;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
        StrictValue::deserialize(d)
    }
}

/// A JSON value read for its syntax and its keys alone: every object's keys unique, nothing
/// kept. The first pass over a dump, so that a dump of a million tensors is never held as a
/// tree of values beside the graph it becomes. At the top level (`Checked(Some(top))`) it notes
/// what the dump's kind and version need.
struct Checked<'a>(Option<&'a mut Top>);

/// A dump's top level as the first pass sees it: whether it is an object, its version field
/// and whether it holds a program.
#[derive(Default)]
struct Top {
    object: bool,
    version: Option<Value>,
    program: bool,
}

impl<'de> DeserializeSeed<'de> for Checked<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked(None))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        if let Some(top) = self.0.as_deref_mut() {
            top.object = true;
        }
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if keys.holds(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` is given twice in one object"
                )));
            }
            match self.0.as_deref_mut() {
                Some(top) if &*key == "memplan" => {
                    top.version = Some(map.next_value::<StrictValue>()?.0)
                }
                top => {
                    if let Some(top) = top {
                        top.program |= &*key == "program";
                    }
                    map.next_value_seed(Checked(None))?;
                }
            }
            keys.add(key);
        }
        Ok(())
    }
}

/// The keys of an object read so far. Objects have a few keys, and a list searched is cheaper
/// than a set; past [`Keys::LISTED`] they move to a set, so that an object of many keys costs
/// no square of their number (200,000 keys, 2.7 MB of JSON, took 27 s to check).
enum Keys<'de> {
    Listed(Vec<Key<'de>>),
    Hashed(rustc_hash::FxHashSet<String>),
}

impl Default for Keys<'_> {
    fn default() -> Self {
        Keys::Listed(Vec::new())
    }
}

impl<'de> Keys<'de> {
    const LISTED: usize = 32;

    fn holds(&self, key: &Key<'de>) -> bool {
        match self {
            Keys::Listed(keys) => keys.contains(key),
            Keys::Hashed(keys) => keys.contains(&**key),
        }
    }

    fn add(&mut self, key: Key<'de>) {
        match self {
            Keys::Listed(keys) if keys.len() < Self::LISTED => keys.push(key),
            Keys::Listed(keys) => {
                let mut hashed: rustc_hash::FxHashSet<String> =
                    keys.drain(..).map(|k| k.0.into_owned()).collect();
                hashed.insert(key.0.into_owned());
                *self = Keys::Hashed(hashed);
            }
            Keys::Hashed(keys) => {
                keys.insert(key.0.into_owned());
            }
        }
    }
}

/// An object's key as the first pass reads it: borrowed from the text where it has no
/// escapes (a million-tensor dump has millions of keys, each an allocation when owned).
#[derive(PartialEq)]
struct Key<'de>(std::borrow::Cow<'de, str>);

impl std::ops::Deref for Key<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A graph's top level, read in one pass: `tensors` and `steps`, which hold nearly all of a
/// large dump, straight into their types; every other field kept as a value, to be read into
/// the rest of the [`Graph`] after (they are small). `memplan` is skipped: the first pass read
/// it.
struct GraphTop {
    tensors: Option<Vec<memplan_core::graph::Tensor>>,
    steps: Option<Vec<memplan_core::graph::Step>>,
    rest: Map<String, Value>,
}

impl<'de> Deserialize<'de> for GraphTop {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(GraphTopVisitor)
    }
}

struct GraphTopVisitor;

impl<'de> Visitor<'de> for GraphTopVisitor {
    type Value = GraphTop;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GraphTop, A::Error> {
        let mut top = GraphTop {
            tensors: None,
            steps: None,
            rest: Map::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "memplan" => {
                    map.next_value::<de::IgnoredAny>()?;
                }
                "tensors" => top.tensors = Some(map.next_value()?),
                "steps" => top.steps = Some(map.next_value()?),
                _ => {
                    let StrictValue(v) = map.next_value()?;
                    top.rest.insert(key, v);
                }
            }
        }
        Ok(top)
    }
}

/// A serde_json error's message without the position it appends (`at line 5 column 41`): a
/// syntax error gives it apart, a structure error gives the JSON path instead.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message,
    }
}

/// Reads a graph's dump (checked by the first pass: valid JSON, keys unique, version 1, no
/// program) into its [`Graph`], structure errors with their JSON path.
fn read_graph(text: &str) -> Result<Graph, FormatError> {
    let top =
        GraphTop::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| {
            let (path, message) = placed(text, &e);
            structure_under("", &path, &message)
        })?;
    graph_of(top, from_value)
}

/// The graph of a dump's top level, its fields besides tensors and steps read by `read_rest`.
fn graph_of(
    top: GraphTop,
    read_rest: fn(Value, &str) -> Result<Graph, FormatError>,
) -> Result<Graph, FormatError> {
    let mut rest = top.rest;
    // The typed fields stand in as empty lists, so a missing one is still missing.
    for (key, given) in [
        ("tensors", top.tensors.is_some()),
        ("steps", top.steps.is_some()),
    ] {
        if given {
            rest.insert(key.into(), Value::Array(Vec::new()));
        }
    }
    let mut graph = read_rest(Value::Object(rest), "")?;
    graph.tensors = top.tensors.unwrap_or_default();
    graph.steps = top.steps.unwrap_or_default();
    // Grown by doubling: what the lists do not use goes back (a million steps left a third
    // of a 176 MB list unused).
    graph.tensors.shrink_to_fit();
    graph.steps.shrink_to_fit();
    Ok(graph)
}

/// A serde message in the product's words: no Rust type names.
pub(crate) fn plain_message(message: &str) -> String {
    message
        .replace("invalid type: map", "invalid type: an object")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: an array")
        .replace("expected a map", "expected an object")
        .replace("invalid type: floating point", "invalid type: the number")
        .replace("expected u64", "expected a non-negative integer below 2^64")
        .replace("expected u32", "expected a non-negative integer below 2^32")
        .replace("expected usize", "expected a non-negative integer")
        .replace("expected a borrowed string", "expected a string")
}

/// Parses and validates a memplan JSON dump.
pub fn parse(text: &str) -> Result<Graph, FormatError> {
    parse_resolved(text).map(|(graph, _)| graph)
}

/// Parses and validates a memplan JSON dump, keeping the resolved graph it was checked with.
/// A program of several routines is refused here, with a message that says so: it plans
/// through [`parse_dump`].
pub fn parse_resolved(text: &str) -> Result<(Graph, ResolvedGraph), FormatError> {
    let graph = read_unresolved(text)?;
    let resolved = graph.resolve()?;
    Ok((graph, resolved))
}

/// A memplan JSON dump: one computation, or a program of several routines in contexts.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Graph(Graph, Box<ResolvedGraph>),
    Program(ParsedProgram),
}

/// A program read and checked: its routines' graphs resolved, its events and sharing valid.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedProgram {
    pub name: String,
    pub devices: Vec<Device>,
    pub program: Program,
    pub resolved: ResolvedProgram,
    /// One per routine, contexts in order.
    pub graphs: Vec<ResolvedGraph>,
}

/// Parses and validates a memplan JSON dump of either kind.
pub fn parse_dump(text: &str) -> Result<Parsed, FormatError> {
    Ok(match read_dump(text)? {
        ReadDump::Graph(graph) => {
            let resolved = graph.resolve()?;
            Parsed::Graph(graph, Box::new(resolved))
        }
        ReadDump::Program(program) => Parsed::Program(program),
    })
}

/// A dump of one computation, its graph read but not resolved: a caller that holds the file's
/// text drops it before the graph resolves.
pub(crate) fn read_unresolved(text: &str) -> Result<Graph, FormatError> {
    match read_dump(text)? {
        ReadDump::Graph(graph) => Ok(graph),
        ReadDump::Program(_) => Err(FormatError::IsProgram),
    }
}

/// A dump as [`read_dump`] reads it: a program whole, a graph not yet resolved.
enum ReadDump {
    Graph(Graph),
    Program(ParsedProgram),
}

/// [`parse_dump`] but for the graph's resolve.
fn read_dump(text: &str) -> Result<ReadDump, FormatError> {
    let syntax = |e: serde_json::Error| FormatError::JsonSyntax {
        line: e.line(),
        column: e.column(),
        message: without_position(&e),
    };
    // The first pass: the syntax, each object's keys, the version and the kind.
    let mut de = serde_json::Deserializer::from_str(text);
    let mut top = Top::default();
    Checked(Some(&mut top))
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(syntax)?;
    if !top.object {
        return Err(FormatError::NotADump(
            "the top level is not a JSON object".into(),
        ));
    }
    match top.version {
        None => {
            return Err(FormatError::NotADump(
                "no `memplan` version field (expected \"memplan\": 1)".into(),
            ));
        }
        Some(v) if v.as_u64() == Some(FORMAT_VERSION) => {}
        Some(v) => {
            return Err(FormatError::Version {
                found: v.to_string(),
            });
        }
    }
    if top.program {
        let mut de = serde_json::Deserializer::from_str(text);
        let Value::Object(mut object) = StrictValue::deserialize(&mut de).map_err(syntax)?.0 else {
            return Err(FormatError::NotADump(
                "the top level is not a JSON object".into(),
            ));
        };
        object.remove("memplan");
        return parse_program(object).map(ReadDump::Program);
    }
    read_graph(text).map(ReadDump::Graph)
}

/// Deserializes `value`, an error's path prefixed with `at` (the path of `value` in the dump).
/// Read as text, which places an error (and shares the readers of a graph's dump).
fn from_value<T: serde::de::DeserializeOwned>(value: Value, at: &str) -> Result<T, FormatError> {
    let text = value.to_string();
    serde_json::from_str(&text).map_err(|e| {
        let (path, message) = placed(&text, &e);
        structure_under(at, &path, &message)
    })
}

/// Where in `text` serde_json's structure error `e` happened (its JSON path), and its message.
fn placed(text: &str, e: &serde_json::Error) -> (String, String) {
    let message = without_position(e);
    (path::path_of(text, e.line(), e.column(), &message), message)
}

/// A structure error at `inner`, a path in the value at `at` in the dump (empty: the top level).
fn structure_under(at: &str, inner: &str, message: &str) -> FormatError {
    let path = match (at.is_empty(), inner) {
        (true, _) => inner.to_string(),
        (false, "." | "") => at.to_string(),
        (false, _) if inner.starts_with('[') => format!("{at}{inner}"),
        (false, _) => format!("{at}.{inner}"),
    };
    FormatError::structure(&path, message)
}

/// The fields a program's top level may have beside `program`: the ones its routines inherit.
const INHERITED: [&str; 4] = ["alignment", "pool_cap", "cost_unit", "devices"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramFields {
    contexts: Vec<Value>,
    /// Each read on its own (see [`events`]).
    events: Vec<Value>,
}

/// A program's events, each read from its own value: an event is a tagged enum, which serde
/// reads whole before its fields, and serde_json places an error in one after the end of the
/// list around it, where the text no longer tells which event (see `path`).
fn events(values: Vec<Value>) -> Result<Vec<Event>, FormatError> {
    (values.into_iter().enumerate())
        .map(|(e, event)| from_value(event, &format!("program.events[{e}]")))
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextFields {
    id: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    routines: Vec<Value>,
}

fn parse_program(mut top: Map<String, Value>) -> Result<ParsedProgram, FormatError> {
    let fields: ProgramFields =
        from_value(top.remove("program").unwrap_or(Value::Null), "program")?;
    let events = events(fields.events)?;
    let name = match top.remove("name") {
        None => String::new(),
        Some(v) => from_value(v, "name")?,
    };
    if let Some(key) = top.keys().find(|k| !INHERITED.contains(&k.as_str())) {
        return Err(FormatError::structure(
            key,
            &format!(
                "a program's top level has `program`, `name` and what its routines inherit ({}); `{key}` belongs in a routine",
                INHERITED.map(|k| format!("`{k}`")).join(", ")
            ),
        ));
    }
    let devices: Vec<Device> = match top.get("devices") {
        None => Vec::new(),
        Some(v) => from_value(v.clone(), "devices")?,
    };
    if fields.contexts.len() > MAX_CONTEXTS {
        return Err(FormatError::structure(
            "program.contexts",
            &format!(
                "{} contexts: a program may have at most {MAX_CONTEXTS} (each run's plan weighs every live context)",
                fields.contexts.len()
            ),
        ));
    }
    let mut contexts = Vec::with_capacity(fields.contexts.len());
    let mut graphs = Vec::new();
    for (c, context) in fields.contexts.into_iter().enumerate() {
        let at = format!("program.contexts[{c}]");
        let ContextFields {
            id,
            parent,
            routines: routine_values,
        } = from_value(context, &at)?;
        let mut routines = Vec::with_capacity(routine_values.len());
        for (r, routine) in routine_values.into_iter().enumerate() {
            let at = format!("{at}.routines[{r}]");
            let Value::Object(mut fields) = routine else {
                return Err(FormatError::structure(&at, "a routine is an object"));
            };
            let routine_id: String = match fields.remove("id") {
                Some(v) => from_value(v, &format!("{at}.id"))?,
                None => return Err(FormatError::structure(&at, "missing field `id`")),
            };
            if fields.contains_key("devices") {
                return Err(FormatError::structure(
                    &format!("{at}.devices"),
                    "a routine runs on the program's devices: declare them at the top level",
                ));
            }
            for key in INHERITED {
                if let Some(v) = top.get(key) {
                    fields.entry(key).or_insert_with(|| v.clone());
                }
            }
            fields
                .entry("name")
                .or_insert_with(|| Value::String(routine_id.clone()));
            let graph: Graph = from_value(Value::Object(fields), &at)?;
            let resolved = graph.resolve().map_err(|e| {
                FormatError::from(ProgramError::Routine {
                    context: id.clone(),
                    routine: routine_id.clone(),
                    detail: e.to_string(),
                })
            })?;
            graphs.push(resolved);
            routines.push(Routine {
                id: routine_id,
                graph,
            });
        }
        contexts.push(Context {
            id,
            parent,
            routines,
        });
    }
    let program = Program { contexts, events };
    let resolved = program.resolve()?;
    let refs: Vec<&ResolvedGraph> = graphs.iter().collect();
    memplan_core::program::sharing(&program, &resolved, &refs)?;
    Ok(ParsedProgram {
        name,
        devices,
        program,
        resolved,
        graphs,
    })
}

#[derive(Serialize)]
struct Dump<'a> {
    memplan: u64,
    #[serde(flatten)]
    graph: &'a Graph,
}

/// Writes `graph` as a memplan JSON dump, pretty-printed.
pub fn write(graph: &Graph) -> String {
    let dump = Dump {
        memplan: FORMAT_VERSION,
        graph: &graph.listed(),
    };
    // Not `expect`: its message would format the error (in wasm, every `io::Error` kind).
    let Ok(mut text) = serde_json::to_string_pretty(&dump) else {
        unreachable!("a graph always serializes")
    };
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use memplan_core::GraphError;

    pub(super) const VALID: &str = r#"{
        "memplan": 1,
        "params": {"B": 4},
        "tensors": [
            {"id": "x", "shape": ["B", 8], "dtype": "f32", "kind": "input"},
            {"id": "y", "bytes": 128, "dtype": "f32"},
            {"id": "y2", "view_of": "y", "view_offset": 64, "bytes": 64},
            {"id": "z", "bytes": 128, "kind": "output"}
        ],
        "steps": [
            {"id": "s0", "op": "relu", "reads": ["x"], "writes": ["y"]},
            {"id": "s1", "op": "add", "reads": ["y2", "x"], "writes": ["z"]}
        ]
    }"#;

    /// The error `VALID` gives after `edit` turns one piece of it into another.
    fn error_after(from: &str, to: &str) -> FormatError {
        assert!(VALID.contains(from), "fixture lacks {from}");
        parse(&VALID.replacen(from, to, 1)).unwrap_err()
    }

    fn graph_error_after(from: &str, to: &str) -> GraphError {
        match error_after(from, to) {
            FormatError::Graph(e) => e,
            other => panic!("expected a graph error, got {other}"),
        }
    }

    #[test]
    fn a_valid_dump_parses_and_round_trips() {
        let graph = parse(VALID).unwrap();
        assert_eq!(graph.tensors.len(), 4);
        assert_eq!(parse(&write(&graph)).unwrap(), graph);
        assert_eq!(write(&graph), write(&parse(&write(&graph)).unwrap()));
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let e = parse("{\n  \"memplan\": 1,,\n}").unwrap_err();
        assert!(matches!(e, FormatError::JsonSyntax { line: 2, .. }), "{e}");
    }

    #[test]
    fn version_is_required_and_checked() {
        assert!(matches!(parse("{}"), Err(FormatError::NotADump(_))));
        assert!(matches!(parse("[1]"), Err(FormatError::NotADump(_))));
        let e = error_after("\"memplan\": 1", "\"memplan\": 2");
        assert_eq!(
            e.to_string(),
            "memplan dump version 2 is not supported (this build reads version 1)"
        );
    }

    #[test]
    fn structure_errors_give_the_json_path() {
        let e = error_after("\"bytes\": 128, \"dtype\"", "\"bytes\": -1, \"dtype\"");
        assert!(e.to_string().starts_with("at `tensors[1].bytes`"), "{e}");
        let e = error_after("\"op\": \"relu\"", "\"opp\": \"relu\"");
        assert!(
            e.to_string()
                .starts_with("at `steps[0]`: unknown field `opp`"),
            "{e}"
        );
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let e = parse(r#"{"memplan": 1, "tensors": [], "steps": [], "tensors": []}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "JSON line 1, column 52: the key `tensors` is given twice in one object"
        );
        let e = error_after("\"op\": \"relu\"", "\"op\": \"relu\", \"op\": \"add\"");
        assert!(e.to_string().contains("the key `op` is given twice"), "{e}");
        // A key spelled with an escape is the same key.
        let e = error_after(
            "\"op\": \"relu\"",
            "\"op\": \"relu\", \"\\u006fp\": \"add\"",
        );
        assert!(e.to_string().contains("the key `op` is given twice"), "{e}");
        // In an object of more keys than are listed (they are hashed), too.
        let many: String = (0..40).map(|k| format!(r#", "k{k}": 0"#)).collect();
        let e = parse(&format!(r#"{{"memplan": 1{many}, "k3": 1}}"#)).unwrap_err();
        assert!(e.to_string().contains("the key `k3` is given twice"), "{e}");
        let e = parse(&format!(r#"{{"memplan": 1{many}}}"#)).unwrap_err();
        assert!(!e.to_string().contains("given twice"), "{e}");
    }

    #[test]
    fn structure_messages_use_the_products_words() {
        let e = error_after("[\"B\", 8]", "[\"B\", -8]");
        assert_eq!(
            e.to_string(),
            "at `tensors[0].shape[1]`: a shape dim is a non-negative integer or the name of a param, not -8"
        );
        let e = error_after("\"bytes\": 128, \"dtype\"", "\"bytes\": 1.5, \"dtype\"");
        assert_eq!(
            e.to_string(),
            "at `tensors[1].bytes`: invalid type: the number `1.5`, expected a non-negative integer below 2^64"
        );
    }

    #[test]
    fn duplicate_ids() {
        let e = graph_error_after("\"id\": \"y\",", "\"id\": \"x\",");
        assert_eq!(e.to_string(), "duplicate tensor id `x`");
    }

    #[test]
    fn dangling_ids() {
        let e = graph_error_after("\"reads\": [\"x\"]", "\"reads\": [\"nope\"]");
        assert_eq!(
            e.to_string(),
            "step `s0` refers to tensor `nope`, which does not exist"
        );
    }

    #[test]
    fn view_cycles() {
        let e = graph_error_after(
            "\"bytes\": 128, \"dtype\"",
            "\"bytes\": 128, \"view_of\": \"y2\", \"dtype\"",
        );
        assert!(matches!(e, GraphError::ViewCycle { .. }), "{e}");
        assert!(e.to_string().contains("y -> y2 -> y"), "{e}");
    }

    #[test]
    fn views_stay_inside_their_base() {
        let e = graph_error_after("\"view_offset\": 64", "\"view_offset\": 65");
        assert!(e.to_string().contains("outside its base `y`"), "{e}");
    }

    #[test]
    fn a_view_of_a_view_stays_inside_its_own_base() {
        let dump = |w_offset: u64| {
            format!(
                r#"{{"memplan": 1, "tensors": [{{"id": "a", "bytes": 100}},
                {{"id": "v", "bytes": 50, "view_of": "a", "view_offset": 40}},
                {{"id": "w", "bytes": 20, "view_of": "v", "view_offset": {w_offset}}},
                {{"id": "o", "bytes": 4}}],
                "steps": [{{"id": "s", "writes": ["a"]}}, {{"id": "t", "reads": ["w"], "writes": ["o"]}}]}}"#
            )
        };
        // Inside the root `a` (80..100) but past the end of `v`, which it views.
        let e = parse_resolved(&dump(40)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor `w`: bytes 40..60 lie outside its base `v` of 50 bytes"
        );
        // Outside the root too: the error still names the base it views.
        let e = parse_resolved(&dump(70)).unwrap_err();
        assert!(e.to_string().contains("outside its base `v`"), "{e}");
        assert!(parse_resolved(&dump(30)).is_ok());
    }

    #[test]
    fn sizes_that_overflow_after_alignment() {
        let e = graph_error_after(
            "\"bytes\": 128, \"kind\"",
            "\"bytes\": 18446744073709551615, \"alignment\": 64, \"kind\"",
        );
        assert!(
            matches!(e, GraphError::SizeOverflow { ref tensor, .. } if tensor == "z"),
            "{e}"
        );
        let e = graph_error_after("\"B\": 4", "\"B\": 4611686018427387904");
        assert!(
            matches!(e, GraphError::SizeOverflow { ref tensor, .. } if tensor == "x"),
            "{e}"
        );
    }

    #[test]
    fn loops_must_be_contiguous() {
        let text = VALID
            .replace("\"writes\": [\"y\"]}", "\"writes\": [\"y\"], \"loop\": \"L\"}")
            .replace("\"steps\": [", "\"loops\": [{\"id\": \"L\"}], \"steps\": [")
            .replace(
                "\"writes\": [\"z\"]}",
                "\"writes\": [\"z\"]}, {\"id\": \"s2\", \"reads\": [\"z\"], \"writes\": [\"y\"], \"loop\": \"L\"}",
            );
        let e = parse(&text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "loop `L`: its steps are not contiguous (step `s2` at position 2 is outside the run of the loop)"
        );
    }

    #[test]
    fn steps_must_write() {
        let e = graph_error_after("\"writes\": [\"z\"]", "\"writes\": []");
        assert_eq!(e.to_string(), "step `s1` writes nothing");
    }

    #[test]
    fn unknown_dtypes() {
        let e = graph_error_after(
            "\"dtype\": \"f32\", \"kind\"",
            "\"dtype\": \"f31\", \"kind\"",
        );
        assert_eq!(e.to_string(), "tensor `x` has unknown dtype `f31`");
    }

    #[test]
    fn unknown_params_and_missing_sizes() {
        let e = graph_error_after("[\"B\", 8]", "[\"C\", 8]");
        assert_eq!(
            e.to_string(),
            "tensor `x`: shape dim `C` is not a param of the graph"
        );
        let e = graph_error_after("\"bytes\": 128, \"kind\"", "\"kind\"");
        assert_eq!(
            e.to_string(),
            "tensor `z` has no size: give `bytes`, or `shape` with `dtype`"
        );
    }

    #[test]
    fn bad_alignment() {
        let e = graph_error_after(
            "\"bytes\": 128, \"kind\"",
            "\"bytes\": 128, \"alignment\": 3, \"kind\"",
        );
        assert_eq!(
            e.to_string(),
            "tensor `z`: alignment 3 is not a power of two"
        );
    }
}

/// The JSON paths of a graph's structure errors, held to serde_path_to_error's, which tracks
/// the path through every read: on dumps with one piece changed (a value of another type, a
/// field left out, one added), written compact or pretty, every error reads the same.
#[cfg(test)]
mod path_tests {
    use super::*;
    use proptest::prelude::*;

    /// [`from_value`] with the path tracked through every read.
    fn from_value_tracked<T: serde::de::DeserializeOwned>(
        value: Value,
        at: &str,
    ) -> Result<T, FormatError> {
        serde_path_to_error::deserialize(value)
            .map_err(|e| structure_under(at, &e.path().to_string(), &e.inner().to_string()))
    }

    /// [`read_graph`] with the path tracked through every read.
    fn tracked_read_graph(text: &str) -> Result<Graph, FormatError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let top = serde_path_to_error::deserialize::<_, GraphTop>(&mut de).map_err(|e| {
            FormatError::structure(&e.path().to_string(), &without_position(e.inner()))
        })?;
        graph_of(top, from_value_tracked)
    }

    /// A dump with every field of a tensor and of a step.
    const EVERY_FIELD: &str = r#"{
        "memplan": 1, "devices": [{"id": "gpu0"}], "loops": [{"id": "l", "trip_count": 2}],
        "tensors": [
            {"id": "a", "name": "a", "bytes": 64, "shape": [2, "B"], "dtype": "f32",
             "alignment": 64, "device": "gpu0", "kind": "param", "held": true,
             "always_live": true, "memory_space": "device_global",
             "stack": [{"function": "f", "file": "m.py", "line": 3}]},
            {"id": "v", "view_of": "a", "view_offset": 8, "elided": false, "size_unknown": false}
        ],
        "steps": [
            {"id": "s", "name": "s", "op": "mm", "device": "gpu0", "kind": "copy",
             "reads": ["a"], "writes": ["v"], "cost": 5, "time": 7, "loop": "l", "pinned": true}
        ]
    }"#;

    /// Every place in `v`, as a JSON pointer.
    fn places(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, x)| places(x, format!("{at}/{k}"), out)),
            Value::Array(a) => {
                (a.iter().enumerate()).for_each(|(i, x)| places(x, format!("{at}/{i}"), out))
            }
            _ => {}
        }
        out.push(at);
    }

    /// `text` with the `pick`-th place changed by `change`: replaced by one of a few values of
    /// every type, left out of its object, or given a field no dump has.
    fn changed(text: &str, pick: usize, change: usize, pretty: bool) -> String {
        let mut v: Value = serde_json::from_str(text).unwrap();
        let mut all = Vec::new();
        places(&v, String::new(), &mut all);
        let at = &all[pick % all.len()];
        let replacements = [
            serde_json::json!(-1),
            serde_json::json!(1.5),
            serde_json::json!("x"),
            serde_json::json!(true),
            Value::Null,
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!([1, "a"]),
            serde_json::json!({"k": 1}),
            serde_json::json!(u64::MAX),
        ];
        let n = replacements.len();
        match change % (n + 2) {
            c if c < n => *v.pointer_mut(at).unwrap() = replacements[c].clone(),
            c if c == n => {
                let (parent, key) = at.rsplit_once('/').unwrap_or_default();
                if let Some(Value::Object(m)) = v.pointer_mut(parent) {
                    m.remove(key);
                }
            }
            _ => {
                if let Some(Value::Object(m)) = v.pointer_mut(at) {
                    m.insert("colour".into(), serde_json::json!(1));
                }
            }
        }
        match pretty {
            true => serde_json::to_string_pretty(&v).unwrap(),
            false => v.to_string(),
        }
    }

    #[test]
    fn the_fixtures_read() {
        for fixture in [tests::VALID, EVERY_FIELD] {
            read_graph(fixture).unwrap();
        }
    }

    /// The part of the serving program at `pointer`, with its `pick`-th place changed by
    /// `change` (see [`changed`]).
    fn program_part_changed(pointer: &str, pick: usize, change: usize) -> Value {
        let program: Value = serde_json::from_str(include_str!(
            "../../../static/examples/serving-program.json"
        ))
        .unwrap();
        let part = program.pointer(pointer).unwrap().to_string();
        serde_json::from_str(&changed(&part, pick, change, false)).unwrap()
    }

    /// A program's errors name their place: an event by its index, a context's by its own.
    #[test]
    fn a_programs_errors_name_their_place() {
        let program = include_str!("../../../static/examples/serving-program.json");
        let error = |from: &str, to: &str| {
            assert!(program.contains(from), "fixture lacks {from}");
            match parse_dump(&program.replacen(from, to, 1)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{to} was read"),
            }
        };
        let e = error("\"routine\": \"load\"", "\"routine\": 7");
        assert_eq!(
            e,
            "at `program.events[1]`: invalid type: integer `7`, expected a string"
        );
        let e = error("\"id\": \"model\"", "\"id\": [1]");
        assert!(
            e.starts_with("at `program.contexts[0].id`: invalid type: an array"),
            "{e}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn a_graphs_errors_are_placed_as_tracking_places_them(
            pick in 0usize..1000, change in 0usize..100, pretty: bool,
        ) {
            for fixture in [tests::VALID, EVERY_FIELD] {
                let text = changed(fixture, pick, change, pretty);
                prop_assert_eq!(read_graph(&text), tracked_read_graph(&text), "{}", text);
            }
        }

        /// A program's routines are read from values, placed in text written again.
        #[test]
        fn a_routines_errors_are_placed_as_tracking_places_them(
            pick in 0usize..1000, change in 0usize..100,
        ) {
            let routine = program_part_changed("/program/contexts/0/routines/0", pick, change);
            let at = "program.contexts[0].routines[0]";
            prop_assert_eq!(
                from_value::<Graph>(routine.clone(), at),
                from_value_tracked::<Graph>(routine, at)
            );
        }

        /// A program's events are read one by one, each at its place in the list.
        #[test]
        fn a_programs_events_errors_are_placed_as_tracking_places_them(
            pick in 0usize..1000, change in 0usize..100,
        ) {
            let listed = program_part_changed("/program/events", pick, change);
            let each = from_value::<Vec<Value>>(listed.clone(), "program.events").and_then(events);
            prop_assert_eq!(each, from_value_tracked::<Vec<Event>>(listed, "program.events"));
        }
    }
}
