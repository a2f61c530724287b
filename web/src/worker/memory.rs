//! The worker's allocator: another's (the system's), which says what ran out before the worker
//! ends. A page's worker has wasm's 4 GiB at most, which planning a large dump can meet; an
//! allocation past it ends the worker with a bare `RuntimeError: unreachable`, and the page
//! would say only that the worker failed. [`Reporting`] hands the size asked for to its
//! `report` first (the worker posts it, with what it holds, to the page), then fails as the
//! allocator it wraps does.
//!
//! `report` runs inside the allocator: it must not allocate (a nested failure is not reported
//! again, so it cannot loop).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

/// `inner`, reporting each allocation it fails to `report` (the size asked for), once.
pub struct Reporting<A> {
    inner: A,
    report: fn(usize),
    reported: AtomicBool,
}

impl<A> Reporting<A> {
    pub const fn new(inner: A, report: fn(usize)) -> Self {
        Reporting {
            inner,
            report,
            reported: AtomicBool::new(false),
        }
    }

    /// `p`, reporting `size` first if it is null.
    fn heard(&self, p: *mut u8, size: usize) -> *mut u8 {
        if p.is_null() && !self.reported.swap(true, Ordering::Relaxed) {
            (self.report)(size);
        }
        p
    }
}

// SAFETY: every call is forwarded to `inner` with the caller's arguments; `report` only reads
// the size.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Reporting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.heard(unsafe { self.inner.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.heard(unsafe { self.inner.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.heard(
            unsafe { self.inner.realloc(ptr, layout, new_size) },
            new_size,
        )
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::sync::atomic::AtomicUsize;

    /// The system's allocator, failing every request past `most` bytes.
    struct Capped {
        most: usize,
    }

    unsafe impl GlobalAlloc for Capped {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            match layout.size() <= self.most {
                true => unsafe { System.alloc(layout) },
                false => std::ptr::null_mut(),
            }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            match new_size <= self.most {
                true => unsafe { System.realloc(ptr, layout, new_size) },
                false => std::ptr::null_mut(),
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    static ASKED: AtomicUsize = AtomicUsize::new(0);
    static REPORTS: AtomicUsize = AtomicUsize::new(0);

    fn report(size: usize) {
        ASKED.store(size, Ordering::Relaxed);
        REPORTS.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn a_failed_allocation_is_reported_once_with_its_size_and_still_fails() {
        let alloc = Reporting::new(Capped { most: 1 << 10 }, report);
        let small = Layout::from_size_align(64, 8).unwrap();
        let p = unsafe { alloc.alloc(small) };
        assert!(!p.is_null());
        assert_eq!(
            REPORTS.load(Ordering::Relaxed),
            0,
            "a success is not reported"
        );
        // Grown past the cap: the new size is what is reported, and the old block stays.
        let grown = unsafe { alloc.realloc(p, small, 4096) };
        assert!(grown.is_null());
        assert_eq!(
            (
                ASKED.load(Ordering::Relaxed),
                REPORTS.load(Ordering::Relaxed)
            ),
            (4096, 1)
        );
        let big = Layout::from_size_align(1 << 20, 8).unwrap();
        assert!(unsafe { alloc.alloc_zeroed(big) }.is_null());
        assert_eq!(REPORTS.load(Ordering::Relaxed), 1, "reported once");
        unsafe { alloc.dealloc(p, small) };
    }
}
