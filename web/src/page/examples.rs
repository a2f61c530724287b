//! The bundled example dumps (static/examples/), compiled in so they load instantly and offline.

/// One bundled example.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// The stable name, used in `data-testid="example-<name>"` and in URLs.
    pub name: &'static str,
    pub title: &'static str,
    pub text: &'static str,
}

pub const EXAMPLES: &[Example] = &[
    Example {
        name: "mlp-training",
        title: "MLP training step",
        text: include_str!("../../../static/examples/mlp-training.json"),
    },
    Example {
        name: "transformer-decode",
        title: "Transformer decode",
        text: include_str!("../../../static/examples/transformer-decode.json"),
    },
    Example {
        name: "convnet-training",
        title: "Convnet training step",
        text: include_str!("../../../static/examples/convnet-training.json"),
    },
    Example {
        name: "decoder-serving",
        title: "Decoder serving (B, S)",
        text: include_str!("../../../static/examples/decoder-serving.json"),
    },
];

/// The bundled programs: several routines in contexts, shown with the program view above the
/// views of the routine opened.
pub const PROGRAMS: &[Example] = &[
    Example {
        name: "serving-program",
        title: "Serving program",
        text: include_str!("../../../static/examples/serving-program.json"),
    },
    Example {
        name: "schedule-search-program",
        title: "Schedule search program",
        text: include_str!("../../../static/examples/schedule-search-program.json"),
    },
];

/// The bundled example or program named `name`.
pub fn named(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().chain(PROGRAMS).find(|e| e.name == name)
}

/// The example shown when the page opens.
pub const DEFAULT_EXAMPLE: &Example = &EXAMPLES[0];
