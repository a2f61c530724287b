//! Where buffers live: the pools of a device and each buffer's place in one. Plain data that
//! the layouts write and the checker reads; neither owns it, so the checker depends on no
//! strategy.

/// What a pool holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// Buffers with live intervals, sharing bytes over time.
    Arena,
    /// Always-live buffers, one after another.
    Static,
}

impl PoolRole {
    pub fn name(self) -> &'static str {
        match self {
            PoolRole::Arena => "arena",
            PoolRole::Static => "static",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    pub role: PoolRole,
    pub bytes: u64,
}

/// Where one buffer lives: a pool of its device and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub pool: usize,
    pub offset: u64,
}
