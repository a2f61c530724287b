//! Running out of memory says so in one line and exits 4, where Rust's default printed
//! "memory allocation of N bytes failed" and aborted (SIGABRT: 134 in a shell): a large snapshot or
//! CSV on a small machine, or under a memory limit, is a user's situation, not a crash.
//!
//! The process's allocator is the system's, wrapped: a request the system refuses is reported
//! from inside the allocator, so nothing here may allocate. The message is written from a
//! buffer on the stack, and the process exits without unwinding (there is no memory to unwind
//! with).
//!
//! Under glibc, blocks past a fixed size are mapped apart ([`map_large_blocks`]), so a large
//! list freed goes back to the system.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::io::Write as _;

/// The exit code of a run the system refused memory to.
pub const EXIT_CODE: i32 = 4;

/// The system's allocator, which reports a refusal and exits.
pub struct Reporting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, and returns
// what `System` returns, but for a null pointer, after which it never returns.
unsafe impl GlobalAlloc for Reporting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, which is `System::alloc`'s.
        refused_unless(unsafe { System.alloc(layout) }, layout.size())
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        refused_unless(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and the caller upholds `realloc`'s contract.
        refused_unless(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

#[inline]
fn refused_unless(ptr: *mut u8, bytes: usize) -> *mut u8 {
    if ptr.is_null() {
        refused(bytes)
    }
    ptr
}

#[cold]
#[inline(never)]
fn refused(bytes: usize) -> ! {
    let mut line = StackLine::default();
    let _ = write!(line, "{}", message(bytes));
    let _ = std::io::stderr().write_all(line.as_bytes());
    std::process::exit(EXIT_CODE)
}

/// The size from which glibc maps a block apart: its default, kept fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAPPED_FROM: i32 = 128 << 10;

/// Fixes glibc's threshold for mapping a block apart at its default; `false` if glibc refuses
/// (its default behaviour stays, and nothing is wrong). Left to itself, glibc raises the
/// threshold to the largest mapped block freed, and blocks below it then come from the heap,
/// where a freed one stays in the process and a growing one is copied, not remapped. A plan
/// frees lists of megabytes on its way (a read's buffers, a layout tried and dropped), so the
/// peaks after them stood on what those left: with the threshold fixed, `memplan plan` of a
/// generated 241 MiB snapshot peaks 8% lower (GNU time, the same build with and without), at
/// the same speed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn map_large_blocks() -> bool {
    // SAFETY: `mallopt` takes any parameter and value, and reports one it refuses by returning
    // 0; it is called before any thread starts.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_FROM) == 1 }
}

/// What a refusal of `bytes` says, formatted without allocating.
fn message(bytes: usize) -> impl std::fmt::Display {
    struct Message(usize);
    impl std::fmt::Display for Message {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "memplan: out of memory: the system refused {} more bytes",
                self.0
            )?;
            if self.0 >= 1 << 20 {
                write!(f, " ({:.1} MiB)", self.0 as f64 / f64::from(1u32 << 20))?;
            }
            f.write_str(
                "; this input needs more memory than the process may use (docs/benchmarks.md, \
                 \"A million buffers\" and \"Large PyTorch snapshots\", shows what large \
                 inputs take)\n",
            )
        }
    }
    Message(bytes)
}

/// A line formatted into a fixed buffer on the stack; what does not fit is cut.
struct StackLine {
    buf: [u8; 512],
    len: usize,
}

impl Default for StackLine {
    fn default() -> Self {
        StackLine {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl StackLine {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_one_line_with_the_size() {
        let mut line = StackLine::default();
        write!(line, "{}", message(113_320_512)).unwrap();
        let text = std::str::from_utf8(line.as_bytes()).unwrap();
        assert!(
            text.starts_with(
                "memplan: out of memory: the system refused 113320512 more bytes (108.1 MiB)"
            ),
            "{text}"
        );
        assert_eq!(text.matches('\n').count(), 1, "{text}");
        assert!(text.ends_with('\n'));
        let mut small = StackLine::default();
        write!(small, "{}", message(24)).unwrap();
        let text = std::str::from_utf8(small.as_bytes()).unwrap();
        assert!(
            text.starts_with("memplan: out of memory: the system refused 24 more bytes; "),
            "{text}"
        );
    }

    /// glibc takes the threshold (a parameter or value it did not know would be refused).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_maps_large_blocks_apart_from_the_fixed_size() {
        assert!(map_large_blocks());
    }
}
