//! memplan-web: the explorer, a Leptos (client-side) app.
//!
//! A thin shell: it reads bytes from the user (file picker, drop, bundled examples), hands them to
//! memplan-formats and memplan-core through [`analysis`], and shows what comes back. It computes
//! no number of its own, so everything it shows agrees with `memplan plan --json` to the byte.
//! Names from a dump are only ever inserted as text, never as HTML.

pub mod analysis;
pub mod app;
pub mod canvas;
pub mod compare;
pub mod devices;
pub mod embed_api;
pub mod error;
pub mod examples;
pub mod export;
pub mod flips;
pub mod panels;
pub mod panic;
pub mod spaces;
pub mod state;
pub mod sweep;
pub mod url_state;
pub mod worker_client;
pub mod worker_protocol;

/// Installs the panic hook and mounts the app on `<body>`.
pub fn start() {
    panic::install();
    leptos::mount::mount_to_body(app::App);
}
