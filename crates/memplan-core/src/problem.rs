//! The planning problem: buffers with sizes, devices and live intervals, and nothing else.
//!
//! This is what layout strategies and the checker see. [`crate::liveness`] builds it from a
//! graph; tests and benchmarks build it directly. Positions are abstract: `0..positions`.
//!
//! Invariants ([`Problem::validate`]; an alignment is a power of two by construction): buffer
//! indices fit `u32`; a buffer's size rounded up to its alignment (its *occupied size*, what it
//! holds in an arena) fits in a `u64`; live intervals are closed, ordered and inside
//! `0..positions`; devices index `device_ids`; the occupied sizes of all buffers, with alignment
//! slack, add up to less than 2^64, so no sum of bytes over buffers, pools or devices overflows.

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

/// One buffer to place, in 24 bytes: a problem holds one per tensor that owns storage, ten
/// million of them in a large trace. Its name is the problem's ([`Problem::names`]), not its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffer {
    pub size: u64,
    /// Its live interval; unread when it is always-live.
    live: LiveInterval,
    device: u32,
    /// The alignment's log2 in the low six bits, [`ALWAYS_LIVE`] above them.
    alignment_and_always: u8,
    /// The precision class: with classes on, only buffers of equal dtype share bytes.
    pub dtype: Option<DType>,
}

/// The flag of an always-live buffer, above its alignment's log2 (at most 63).
const ALWAYS_LIVE: u8 = 0x80;

impl Buffer {
    /// A buffer of `size` bytes aligned to `2^alignment_log2` (at most `2^63`) on device
    /// `device`.
    pub fn new(
        device: u32,
        size: u64,
        alignment_log2: u8,
        dtype: Option<DType>,
        lifetime: Lifetime,
    ) -> Buffer {
        assert!(alignment_log2 < 64, "an alignment is a power of two in u64");
        let (live, always) = match lifetime {
            Lifetime::Live(live) => (live, 0),
            Lifetime::Always => (LiveInterval { first: 0, last: 0 }, ALWAYS_LIVE),
        };
        Buffer {
            size,
            live,
            device,
            alignment_and_always: alignment_log2 | always,
            dtype,
        }
    }

    /// The device index (into [`Problem::device_ids`]).
    pub fn device(&self) -> usize {
        self.device as usize
    }

    /// Bytes, a power of two.
    pub fn alignment(&self) -> u64 {
        1 << self.alignment_log2()
    }

    /// The alignment's log2.
    pub fn alignment_log2(&self) -> u8 {
        self.alignment_and_always & !ALWAYS_LIVE
    }

    /// When it needs its bytes.
    pub fn lifetime(&self) -> Lifetime {
        match self.alignment_and_always & ALWAYS_LIVE {
            0 => Lifetime::Live(self.live),
            _ => Lifetime::Always,
        }
    }

    /// The bytes it holds in an arena: its size rounded up to its alignment. Rounding the
    /// occupancy (not just the offset) keeps the lower bound a true bound on every layout.
    pub fn occupied_size(&self) -> u64 {
        align_up(self.size, self.alignment()).expect("validated: occupied size fits in u64")
    }

    pub fn is_always_live(&self) -> bool {
        self.alignment_and_always & ALWAYS_LIVE != 0
    }

    /// Its live interval, with always-live buffers spanning every position.
    pub fn span(&self, positions: u32) -> LiveInterval {
        match self.lifetime() {
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
    /// What the user calls each buffer, in buffer order; empty where the names are kept
    /// elsewhere (a graph's problem: its tensors' ids, [`crate::liveness::Liveness::named`]), and a
    /// buffer is then named by its index ([`Problem::buffer_name`]). A layout never reads them.
    pub names: Vec<crate::graph::Id>,
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
    /// A plan indexes buffers in 32 bits (half the bytes of its lists at a million buffers).
    #[error("{buffers} buffers: a plan indexes at most 2^32 of them")]
    TooManyBuffers { buffers: usize },
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
        let buffers = self.buffers.len();
        if buffers as u64 > 1 << 32 {
            return Err(ProblemError::TooManyBuffers { buffers });
        }
        let mut total = 0u64;
        for (k, b) in self.buffers.iter().enumerate() {
            let occupied =
                align_up(b.size, b.alignment()).ok_or_else(|| ProblemError::SizeOverflow {
                    buffer: self.buffer_name(k),
                    size: b.size,
                    alignment: b.alignment(),
                })?;
            if let Lifetime::Live(i) = b.lifetime()
                && (i.first > i.last || i.last >= self.positions)
            {
                return Err(ProblemError::BadInterval {
                    buffer: self.buffer_name(k),
                    first: i.first,
                    last: i.last,
                    positions: self.positions,
                });
            }
            if b.device() >= self.device_ids.len() {
                return Err(ProblemError::BadDevice {
                    buffer: self.buffer_name(k),
                    device: b.device(),
                    devices: self.device_ids.len(),
                });
            }
            // Any layout's extent is at most the sum of the occupied sizes plus alignment padding
            // (at least TLSF's 256-byte granule), and a device's pools laid end to end, each base
            // aligned, add less than one alignment per pool; so bounding that sum once, over every
            // device, lets every strategy add offsets, every device address be computed and every
            // report add devices without overflow.
            let padded = occupied
                .checked_add(b.alignment().max(MAX_GRANULE_SLACK))
                .and_then(|p| p.checked_add(b.alignment()));
            let Some(padded) = padded else {
                return Err(ProblemError::BufferTooLarge {
                    buffer: self.buffer_name(k),
                    size: b.size,
                });
            };
            total = total
                .checked_add(padded)
                .ok_or_else(|| ProblemError::TotalOverflow {
                    buffer: self.buffer_name(k),
                })?;
        }
        Ok(())
    }

    /// What the user calls buffer `b`: its listed name, else `#b`.
    pub fn buffer_name(&self, b: usize) -> String {
        match self.names.get(b) {
            Some(name) => name.to_string(),
            None => format!("#{b}"),
        }
    }

    /// The indices of the buffers on `device`, in canonical order.
    pub fn buffers_on(&self, device: usize) -> impl Iterator<Item = usize> + '_ {
        self.buffers
            .iter()
            .enumerate()
            .filter(move |(_, b)| b.device() == device)
            .map(|(i, _)| i)
    }
}
