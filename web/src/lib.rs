//! memplan-web: the explorer, a Leptos (client-side) app.
//!
//! A thin shell: it reads bytes from the user (file picker, drop, bundled examples), hands them to
//! memplan-formats and memplan-core through [`analysis`], and shows what comes back. It computes
//! no number of its own, so everything it shows agrees with `memplan plan --json` to the byte.
//! Names from a dump are only ever inserted as text, never as HTML.

pub mod analysis;
pub mod app;
pub mod error;
pub mod page;
pub mod panic;
pub mod views;
pub mod worker;

/// Installs the panic hook and mounts the app on `<body>`.
pub fn start() {
    panic::install();
    leptos::mount::mount_to_body(app::App);
}
