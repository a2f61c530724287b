//! The engine's side of the page: what the page and the worker say to each other (`protocol`),
//! the worker's logic (`job`: the loaded session and the job planning it), its warm-up, and the
//! page's link to it (`client`).

pub mod client;
pub mod job;
pub mod protocol;
pub mod warm_up;
