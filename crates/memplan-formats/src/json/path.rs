//! The JSON path of a place in a dump's text (`tensors[1].bytes`): where a structure error that
//! serde_json places by line and column happened, named as a reader of the dump names things.
//!
//! A walk over the text up to that place, keeping each open container's own place in it: an
//! array's index, an object's key. It walks only text serde_json has read without a syntax
//! error, so it needs no error handling of its own. Tracking the path through every read
//! instead (serde_path_to_error) made a copy of every reader of a dump's fields, over 20 KB of
//! the worker's bundle gzipped.
//!
//! Where serde_json puts an error, and so which place it is read as:
//! - after the value it refused (a wrong number, an unknown variant), before one it peeked at
//!   and refused by its type, or after the bracket of a list or object it refused (told by
//!   the message): the place of that value;
//! - after the byte it peeked at, for an error it makes on peeking (no value where a variant
//!   goes: "expected value"): the place before that byte;
//! - after a key it refused (an unknown field): the key's place, which the message then
//!   leaves out;
//! - after the last value of an object a field is missing from: the object's place, not the
//!   last key's (told by the message);
//! - after the key of a variant written as an object (`{"variant": ...}`) that it refused: the
//!   enum's place, not the variant's (told by the message).
//!
//! This holds for values serde_json reads in one pass, as a graph's tensors and steps are. A
//! value read whole before its fields (a tagged enum) is refused after the list around it,
//! where the place is no longer known: a program reads its events one at a time, each from its
//! own value (`json::events`).

use std::ops::Range;

/// An open container's place.
enum Place {
    /// In an object: the key whose value is read (its text, quotes included) once read, and
    /// whether its value has begun (its colon read).
    Key(Option<Range<usize>>, bool),
    /// In an array: the index of the item read, or about to be.
    Index(usize),
}

/// The path (empty at the top level) of what serde_json refused with `message` at `line` and
/// `column` of `text`.
pub(super) fn path_of(text: &str, line: usize, column: usize, message: &str) -> String {
    let mut at = offset_of(text, line, column);
    if message == "expected value" {
        at = at.saturating_sub(1);
    }
    path_at(text, at, message)
}

/// The byte offset in `text` of serde_json's `line` and `column` (both from 1): the byte after
/// the last one it read.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start = match line {
        0 | 1 => 0,
        _ => (text.bytes().enumerate())
            .filter(|&(_, b)| b == b'\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1),
    };
    (line_start + column).min(text.len())
}

/// The path of what is read at byte `at` of `text` (empty at the top level) when serde_json
/// refuses it with `message`.
fn path_at(text: &str, at: usize, message: &str) -> String {
    let bytes = &text.as_bytes()[..at.min(text.len())];
    let mut places: Vec<Place> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => places.push(Place::Key(None, false)),
            b'[' => places.push(Place::Index(0)),
            b'}' | b']' => drop(places.pop()),
            b',' => match places.last_mut() {
                Some(Place::Index(index)) => *index += 1,
                Some(Place::Key(key, begun)) => (*key, *begun) = (None, false),
                None => {}
            },
            b':' => {
                if let Some(Place::Key(_, begun)) = places.last_mut() {
                    *begun = true;
                }
            }
            b'"' => {
                let end = string_end(bytes, i);
                // A string where a key goes is one.
                if let Some(Place::Key(key @ None, _)) = places.last_mut() {
                    *key = Some(i..end);
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // A list or object refused where a value goes: read as a value of any type (a shape's
    // dim), its bracket was read; by its type, it was peeked at and is next. (A list in a
    // list given as a dim reads as the second: one level too deep.)
    let bracket = |b: Option<&u8>| b.is_some_and(|b| matches!(b, b'[' | b'{'));
    let opened_last = bracket((bytes.iter().rev()).find(|b| !b.is_ascii_whitespace()))
        && !bracket((text.as_bytes()[bytes.len()..].iter()).find(|b| !b.is_ascii_whitespace()));
    let refused_container = ["invalid type: sequence", "invalid type: map"]
        .iter()
        .any(|m| message.starts_with(m));
    match places.last_mut() {
        _ if opened_last && refused_container => drop(places.pop()),
        Some(Place::Key(key, _)) if message.starts_with("missing field") => *key = None,
        Some(Place::Key(_, false)) if message.starts_with("unknown variant") => {
            places.pop();
        }
        _ => {}
    }
    let mut path = String::new();
    for place in &places {
        match place {
            Place::Key(Some(key), _) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key_text(&text[key.clone()]));
            }
            Place::Index(index) => path.push_str(&format!("[{index}]")),
            Place::Key(None, _) => {}
        }
    }
    path
}

/// The end of the string whose opening quote is at `start`: the byte after its closing quote
/// (or the end of what was read).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// A key as it reads, from its quoted text: escapes decoded.
fn key_text(quoted: &str) -> String {
    match quoted.contains('\\') {
        true => serde_json::from_str(quoted).unwrap_or_else(|_| quoted.to_string()),
        false => quoted.trim_matches('"').to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path at the end of `text`, as serde_json would place a wrong value's error after
    /// reading it.
    fn at_end(text: &str) -> String {
        path_at(text, text.len(), "invalid value")
    }

    #[test]
    fn keys_and_indices_of_the_open_containers() {
        assert_eq!(
            at_end(r#"{"tensors": [{"id": "a"}, {"bytes": -1"#),
            "tensors[1].bytes"
        );
        assert_eq!(at_end(r#"{"a": {"b": [[1, 2], [3, "x""#), "a.b[1][1]");
        // A key read and its value not yet: the key's place.
        assert_eq!(at_end(r#"{"steps": [{"opp""#), "steps[0].opp");
        // A container just opened: an array's first item is peeked at, an object's first key
        // not yet read.
        assert_eq!(at_end(r#"{"a": ["#), "a[0]");
        assert_eq!(at_end(r#"{"a": {"#), "a");
        assert_eq!(at_end(r#"{"#), "");
        // Past a closed container, a comma and a string value with a quote and a comma in it.
        assert_eq!(
            at_end(r#"{"a": [1, {"b": 2}], "c": "x\",y", "d": true"#),
            "d"
        );
        // An escaped key reads decoded.
        assert_eq!(at_end(r#"{"\u006fp": 3"#), "op");
    }

    #[test]
    fn a_missing_field_is_the_objects_a_refused_variant_the_enums_and_a_refused_list_its_own() {
        let text = r#"{"steps": [{"id": "s", "op": "relu"}"#;
        let at = text.len() - 1;
        assert_eq!(path_at(text, at, "missing field `writes`"), "steps[0]");
        assert_eq!(path_at(text, at, "invalid type"), "steps[0].op");
        assert_eq!(
            path_at(r#"{"steps": [{"#, 12, "missing field `id`"),
            "steps[0]"
        );
        let variant = r#"{"tensors": [{"kind": {"k""#;
        assert_eq!(
            path_at(variant, variant.len(), "unknown variant `k`"),
            "tensors[0].kind"
        );
        // A list refused where a value goes: after its bracket was read, or before it.
        let dim = r#"{"tensors": [{"shape": [[1, 2]]}]}"#;
        let at = dim.find("[1").unwrap() + 1;
        assert_eq!(
            path_at(dim, at, "invalid type: sequence"),
            "tensors[0].shape[0]"
        );
        assert_eq!(
            path_at(dim, at - 1, "invalid type: sequence"),
            "tensors[0].shape[0]"
        );
        let variant = r#"{"tensors": [{"kind": "k""#;
        assert_eq!(
            path_at(variant, variant.len(), "unknown variant `k`"),
            "tensors[0].kind"
        );
    }

    #[test]
    fn lines_and_columns_are_offsets() {
        let text = "{\n  \"a\": 1,\n  \"b\": x";
        assert_eq!(offset_of(text, 1, 1), 1);
        assert_eq!(&text[..offset_of(text, 3, 7)], "{\n  \"a\": 1,\n  \"b\": ");
        assert_eq!(offset_of(text, 9, 9), text.len());
    }

    /// An error made on peeking is placed after the byte peeked at: a list where a variant
    /// goes is the variant's place, not the list's first item.
    #[test]
    fn a_peeked_byte_is_not_read() {
        let text = r#"{"kind": [1]}"#;
        let column = text.find('[').unwrap() + 1;
        assert_eq!(path_of(text, 1, column, "expected value"), "kind");
        assert_eq!(path_of(text, 1, column, "invalid value"), "kind[0]");
    }
}
