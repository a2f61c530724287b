//! The page's state and what feeds it: the signals (`state`), the link (`url`), the bundled
//! examples, and dumps a parent page posts (`embed`).

pub mod embed;
pub mod examples;
pub mod fetch;
pub mod state;
pub mod url;
