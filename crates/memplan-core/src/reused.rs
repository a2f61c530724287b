//! What a value keeps only to go faster next time (a decode's emptied occupancy, a
//! rematerializer's moved spans): not part of what the value is. A clone starts without it,
//! equality ignores it, and debug output names it only.

/// Memory or state a value reuses, if it has any.
pub(crate) struct Reused<T>(pub(crate) Option<T>);

impl<T> Default for Reused<T> {
    fn default() -> Self {
        Reused(None)
    }
}

impl<T> Clone for Reused<T> {
    fn clone(&self) -> Self {
        Reused(None)
    }
}

impl<T> PartialEq for Reused<T> {
    fn eq(&self, _: &Reused<T>) -> bool {
        true
    }
}

impl<T> Eq for Reused<T> {}

impl<T> std::fmt::Debug for Reused<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reused")
    }
}
