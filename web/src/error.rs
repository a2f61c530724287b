//! What can go wrong in the page and the worker, typed; the page shows each as one message.

use memplan_engine::EngineError;
use memplan_render::svg::RenderError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebError {
    /// The browser could not do a step of something the page asked of it.
    #[error("the browser could not {0}")]
    Browser(&'static str),
    #[error("the background worker could not start: {0}")]
    WorkerStart(String),
    #[error("{url}: {reason}")]
    Fetch { url: String, reason: FetchFailure },
    /// A message to the worker that it cannot read (a bug of the page, or a stale worker).
    #[error("an unreadable request to the worker: {0}")]
    Request(String),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Why a `?src=` fetch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchFailure {
    #[error("the request failed (network, or the server does not allow cross-origin reads)")]
    Network,
    #[error("the server answered {0}")]
    Status(u16),
    #[error("the body cannot be read")]
    Body,
}
