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

/// The example shown when the page opens.
pub const DEFAULT_EXAMPLE: &Example = &EXAMPLES[0];
