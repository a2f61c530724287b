//! Hardware classes: a device class's memory terms, from a TOML file with a strict `[memory]`
//! table (static/hardware/README.md documents it). Every key is required and no other is
//! accepted: a class with a missing or unknown key, a per mille over 1000 or a util ceiling
//! outside (0, 1] is an error naming the class and the problem, never a default. The classes
//! that ship with memplan are compiled in ([`BUNDLED`]); users pass their own file.

use memplan_core::budget::DriverTerms;
use serde::Deserialize;

/// A device class.
#[derive(Debug, Clone, PartialEq)]
pub struct HardwareClass {
    /// How it is named on the command line and in a dump (the file's stem).
    pub class: String,
    /// A display name.
    pub name: String,
    /// The granularity of the device's allocator: a program's pools each start on a page.
    /// Optional in the file: [`memplan_core::program::DEFAULT_PAGE_BYTES`] when absent.
    pub page_bytes: u64,
    pub memory: DriverTerms,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    page_bytes: Option<u64>,
    memory: DriverTerms,
}

/// Why a hardware class could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("hardware class `{class}`: {detail}")]
pub struct HardwareError {
    pub class: String,
    pub detail: String,
}

/// The classes that ship with memplan, in the order they are offered: each is
/// `static/hardware/CLASS.toml`, compiled in as constants by build.rs (no TOML is parsed to read
/// one).
pub const BUNDLED: [&str; 5] = [
    "h100-sxm-80gb",
    "a100-40gb",
    "l4-24gb",
    "rtx-4090-24gb",
    "jetson-agx-orin-64gb",
];

include!(concat!(env!("OUT_DIR"), "/bundled_classes.rs"));

/// Reads class `class` from its TOML text.
pub fn parse(class: &str, text: &str) -> Result<HardwareClass, HardwareError> {
    let err = |detail: String| HardwareError {
        class: class.to_string(),
        detail,
    };
    let file: File = toml::from_str(text).map_err(|e| {
        // One line: the message and where, not toml's multi-line snippet.
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let message = e.message().trim().replace('\n', " ");
        err(match line {
            Some(line) => format!("line {line}: {message}"),
            None => message,
        })
    })?;
    file.memory
        .validate()
        .map_err(|e| err(format!("[memory]: {e}")))?;
    let page_bytes = file
        .page_bytes
        .unwrap_or(memplan_core::program::DEFAULT_PAGE_BYTES);
    if !page_bytes.is_power_of_two() {
        return Err(err(format!(
            "page_bytes {page_bytes} is not a power of two"
        )));
    }
    Ok(HardwareClass {
        class: class.to_string(),
        name: file.name,
        page_bytes,
        memory: file.memory,
    })
}

/// A bundled class by name; `None` when no class of that name ships.
pub fn bundled(class: &str) -> Option<HardwareClass> {
    BUNDLED_CLASSES
        .iter()
        .find(|(name, ..)| *name == class && BUNDLED.contains(name))
        .map(|(class, name, page_bytes, memory)| HardwareClass {
            class: class.to_string(),
            name: name.to_string(),
            page_bytes: page_bytes.unwrap_or(memplan_core::program::DEFAULT_PAGE_BYTES),
            memory: *memory,
        })
}

/// The names of the bundled classes.
pub fn bundled_names() -> Vec<&'static str> {
    BUNDLED.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundled class's file, as a user's would be read.
    fn file_of(class: &str) -> String {
        let path = format!(
            "{}/../../static/hardware/{class}.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn every_bundled_class_parses_to_its_compiled_constants() {
        assert_eq!(BUNDLED_CLASSES.len(), BUNDLED.len(), "a name per file");
        for name in BUNDLED {
            let c = parse(name, &file_of(name)).unwrap();
            assert_eq!(bundled(name), Some(c.clone()), "{name}");
            assert!(c.memory.device_bytes > 20_000_000_000, "{name}");
            assert!(c.memory.budget(c.memory.util_ceiling).unwrap().usable_bytes > 0);
        }
        assert!(bundled("a100-40gb").is_some());
        assert!(bundled("jetson-agx-orin-64gb").unwrap().memory.unified);
        assert_eq!(bundled("h200"), None);
    }

    const GOOD: &str = "name = \"x\"\n[memory]\ndevice_bytes = 1000000\ndriver_fixed_bytes = 10\ndriver_budget_per_mille = 5\nunified = false\nutil_ceiling = 0.9\n";

    #[test]
    fn a_missing_or_unknown_key_is_an_error_naming_the_class_never_a_default() {
        assert!(parse("mine", GOOD).is_ok());
        let e = parse("mine", &GOOD.replace("unified = false\n", "")).unwrap_err();
        assert_eq!(e.class, "mine");
        assert!(e.to_string().starts_with("hardware class `mine`: "), "{e}");
        assert!(e.to_string().contains("missing field `unified`"), "{e}");
        let e = parse("mine", &GOOD.replace("unified", "unifed")).unwrap_err();
        assert!(e.to_string().contains("unknown field `unifed`"), "{e}");
        let e = parse("mine", &format!("{GOOD}extra = 1\n")).unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
        let e = parse("mine", "name = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("missing field `memory`"), "{e}");
        assert_eq!(e.to_string().lines().count(), 1);
    }

    #[test]
    fn out_of_range_terms_are_errors() {
        let e = parse("mine", &GOOD.replace("= 5\n", "= 1001\n")).unwrap_err();
        assert!(e.to_string().contains("more than 1000"), "{e}");
        let e = parse("mine", &GOOD.replace("0.9", "1.2")).unwrap_err();
        assert!(e.to_string().contains("not in (0, 1]"), "{e}");
        let e = parse("mine", &GOOD.replace("0.9", "0")).unwrap_err();
        assert!(e.to_string().contains("not in (0, 1]"), "{e}");
    }
}
