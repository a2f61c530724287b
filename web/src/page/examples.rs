//! The bundled example dumps (static/examples/), compiled in so they load instantly and offline.

/// One bundled example.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The stable name, used in `data-testid="example-<name>"` and in URLs.
    pub name: &'static str,
    pub title: &'static str,
    pub text: &'static str,
}

/// The example `$name` (static/examples/`$name`.json): the name is the file's, so they agree.
macro_rules! example {
    ($name:literal, $title:literal) => {
        Example {
            name: $name,
            title: $title,
            text: include_str!(concat!("../../../static/examples/", $name, ".json")),
        }
    };
}

pub const EXAMPLES: &[Example] = &[
    example!("mlp-training", "MLP training step"),
    example!("transformer-decode", "Transformer decode"),
    example!("convnet-training", "Convnet training step"),
    example!("decoder-serving", "Decoder serving (B, S)"),
];

/// The bundled programs: several routines in contexts, shown with the program view above the
/// views of the routine opened.
pub const PROGRAMS: &[Example] = &[
    example!("serving-program", "Serving program"),
    example!("schedule-search-program", "Schedule search program"),
];

/// The bundled example or program named `name`.
pub fn named(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().chain(PROGRAMS).find(|e| e.name == name)
}

/// The example shown when the page opens.
pub const DEFAULT_EXAMPLE: &Example = &EXAMPLES[0];
