//! The planning problem: buffers with sizes, devices and live intervals, and nothing else.
//!
//! This is what layout strategies and the checker see. [`crate::liveness`] builds it from a
//! graph; tests and benchmarks build it directly. Positions are abstract: `0..positions`.
//!
//! Invariants ([`Problem::validate`]): alignments are powers of two; a buffer's size rounded up
//! to its alignment (its *occupied size*, what it holds in an arena) fits in a `u64`; live
//! intervals are closed, ordered and inside `0..positions`; devices index `device_ids`; the
//! occupied sizes of all buffers, with alignment slack, add up to less than 2^64, so no sum of
//! bytes over buffers, pools or devices overflows.

use crate::dtype::DType;
use crate::graph::align_up;

/// The padding any strategy may add per buffer beyond its alignment (TLSF's granule).
pub(crate) const MAX_GRANULE_SLACK: u64 = 256;

/// A closed interval of positions `[first, last]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiveInterval {
    pub first: u32,
    pub last: u32,
}

impl LiveInterval {
    pub fn new(first: u32, last: u32) -> Self {
        debug_assert!(first <= last);
        LiveInterval { first, last }
    }

    /// Whether the two intervals share a position.
    pub fn overlaps(self, other: LiveInterval) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// The number of positions it spans.
    pub fn len(self) -> u32 {
        self.last - self.first + 1
    }

    /// Never true: an interval holds at least its first position.
    pub fn is_empty(self) -> bool {
        false
    }
}

/// When a buffer needs its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifetime {
    /// During these positions only; it may share bytes with buffers live at other positions.
    Live(LiveInterval),
    /// For the whole schedule and beyond: it conflicts with every buffer.
    Always,
}

/// One buffer to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffer {
    /// What the user calls it (the tensor id).
    pub name: crate::graph::Id,
    pub device: usize,
    pub size: u64,
    pub alignment: u64,
    /// The precision class: with classes on, only buffers of equal dtype share bytes.
    pub dtype: Option<DType>,
    pub lifetime: Lifetime,
}

impl Buffer {
    /// The bytes it holds in an arena: its size rounded up to its alignment. Rounding the
    /// occupancy (not just the offset) keeps the lower bound a true bound on every layout.
    pub fn occupied_size(&self) -> u64 {
        align_up(self.size, self.alignment).expect("validated: occupied size fits in u64")
    }

    pub fn is_always_live(&self) -> bool {
        self.lifetime == Lifetime::Always
    }

    /// Its live interval, with always-live buffers spanning every position.
    pub fn span(&self, positions: u32) -> LiveInterval {
        match self.lifetime {
            Lifetime::Live(i) => i,
            Lifetime::Always => LiveInterval::new(0, positions.saturating_sub(1)),
        }
    }
}

/// Buffers to place, per device, over `positions` positions. Buffer order is canonical order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Problem {
    pub device_ids: Vec<String>,
    pub positions: u32,
    pub buffers: Vec<Buffer>,
    /// When each position starts, in the source's time units, where every step says
    /// ([`crate::graph::Step::time`]) and the times strictly increase; else empty: each position
    /// lasts one unit. `search`'s preorderings read it (a lifetime's length in time, as MiniMalloc
    /// ranks buffers), and an export in the source's own times.
    pub position_times: Vec<u64>,
}

/// Why a problem cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemError {
    #[error("buffer `{buffer}`: alignment {alignment} is not a power of two")]
    BadAlignment { buffer: String, alignment: u64 },
    #[error("buffer `{buffer}`: {size} bytes rounded up to alignment {alignment} overflow 64 bits")]
    SizeOverflow {
        buffer: String,
        size: u64,
        alignment: u64,
    },
    #[error(
        "buffer `{buffer}`: live interval [{first}, {last}] is not inside positions 0..{positions}"
    )]
    BadInterval {
        buffer: String,
        first: u32,
        last: u32,
        positions: u32,
    },
    #[error("buffer `{buffer}`: device #{device} does not exist ({devices} devices)")]
    BadDevice {
        buffer: String,
        device: usize,
        devices: usize,
    },
    #[error(
        "buffer `{buffer}`: {size} bytes leave no room below 2^64 for the padding a layout may add (its alignment twice, at least 256 bytes)"
    )]
    BufferTooLarge { buffer: String, size: u64 },
    /// Every buffer of a dump is laid out in 64-bit addresses, live together or not (a bump
    /// layout holds them all at once), so their padded total must fit.
    #[error(
        "the buffers, each with the padding a layout may add, add up to more than 2^64 bytes (at buffer `{buffer}`); memplan needs every buffer of a dump, live together or not, to fit in 64-bit addresses end to end"
    )]
    TotalOverflow { buffer: String },
}

impl Problem {
    /// When position `p` starts: its time ([`Problem::position_times`]), or `p` without times.
    pub fn time_at(&self, p: u32) -> u64 {
        match self.position_times.get(p as usize) {
            Some(&t) if self.position_times.len() == self.positions as usize => t,
            _ => u64::from(p),
        }
    }

    /// When the position after `p` starts (one unit after `p` does, for the last).
    pub fn time_after(&self, p: u32) -> u64 {
        match p.checked_add(1).filter(|&next| next < self.positions) {
            Some(next) => self.time_at(next),
            None => self.time_at(p).saturating_add(1),
        }
    }

    /// Checks the invariants of the module docs.
    pub fn validate(&self) -> Result<(), ProblemError> {
        let mut total = 0u64;
        for b in &self.buffers {
            if !b.alignment.is_power_of_two() {
                return Err(ProblemError::BadAlignment {
                    buffer: b.name.to_string(),
                    alignment: b.alignment,
                });
            }
            let occupied =
                align_up(b.size, b.alignment).ok_or_else(|| ProblemError::SizeOverflow {
                    buffer: b.name.to_string(),
                    size: b.size,
                    alignment: b.alignment,
                })?;
            if let Lifetime::Live(i) = b.lifetime
                && (i.first > i.last || i.last >= self.positions)
            {
                return Err(ProblemError::BadInterval {
                    buffer: b.name.to_string(),
                    first: i.first,
                    last: i.last,
                    positions: self.positions,
                });
            }
            if b.device >= self.device_ids.len() {
                return Err(ProblemError::BadDevice {
                    buffer: b.name.to_string(),
                    device: b.device,
                    devices: self.device_ids.len(),
                });
            }
            // Any layout's extent is at most the sum of the occupied sizes plus alignment padding
            // (at least TLSF's 256-byte granule), and a device's pools laid end to end, each base
            // aligned, add less than one alignment per pool; so bounding that sum once, over every
            // device, lets every strategy add offsets, every device address be computed and every
            // report add devices without overflow.
            let padded = occupied
                .checked_add(b.alignment.max(MAX_GRANULE_SLACK))
                .and_then(|p| p.checked_add(b.alignment));
            let Some(padded) = padded else {
                return Err(ProblemError::BufferTooLarge {
                    buffer: b.name.to_string(),
                    size: b.size,
                });
            };
            total = total
                .checked_add(padded)
                .ok_or_else(|| ProblemError::TotalOverflow {
                    buffer: b.name.to_string(),
                })?;
        }
        Ok(())
    }

    /// The indices of the buffers on `device`, in canonical order.
    pub fn buffers_on(&self, device: usize) -> impl Iterator<Item = usize> + '_ {
        self.buffers
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.device == device)
            .map(|(i, _)| i)
    }
}
