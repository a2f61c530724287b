//! The engine's side of the page: what the page and the worker say to each other (`protocol`),
//! the worker's logic (`job`: the loaded session and the job planning it), its warm-up, its
//! allocator (`memory`: what ran out, said before the worker ends), and the page's link to it
//! (`client`).

pub mod client;
pub mod job;
pub mod memory;
pub mod protocol;
pub mod warm_up;
