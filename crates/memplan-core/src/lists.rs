//! Many short lists of indices held in two vectors: a million steps' reads, or a million
//! tensors' producers, are two allocations, not a million (each a header, a heap block and its
//! allocator's overhead, several times the indices they hold). Indices and list bounds are
//! `u32`, as every index of a resolved graph is ([`crate::graph::MAX_ELEMENTS`]): half the
//! memory of `usize` on a 64-bit target.

/// An index of a resolved graph, or none, in four bytes where an `Option<u32>` takes eight: a
/// snapshot has a step and a position per event, each with its loop, and a label per
/// allocation, with its stack; millions of each. `u32::MAX`, which no index of a resolved
/// graph reaches ([`crate::graph::MAX_ELEMENTS`]), reads as none.
/// Written and read as an `Option<u32>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(from = "Option<u32>", into = "Option<u32>")]
pub struct OptionalIndex(Option<std::num::NonZeroU32>);

impl From<Option<u32>> for OptionalIndex {
    fn from(index: Option<u32>) -> OptionalIndex {
        OptionalIndex::new(index)
    }
}

impl From<OptionalIndex> for Option<u32> {
    fn from(index: OptionalIndex) -> Option<u32> {
        index.get()
    }
}

impl OptionalIndex {
    pub fn new(index: Option<u32>) -> OptionalIndex {
        OptionalIndex(index.and_then(|i| std::num::NonZeroU32::new(i.wrapping_add(1))))
    }

    pub fn get(self) -> Option<u32> {
        self.0.map(|i| i.get() - 1)
    }
}

/// A list of indices per element (a step, a tensor), holding at most `u32::MAX` indices in all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lists {
    /// List `i` is `items[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    items: Vec<u32>,
}

/// More indices than a [`Lists`] holds: `u32::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl Lists {
    /// `n` lists, filled by `each`, which calls `push(list, item)` for each item in order (and
    /// is called twice: once to count, once to fill). An item pushed onto a list that ends
    /// with it already is not added again. Items are below `u32::MAX` (an index of a resolved
    /// graph); `Full` when the lists would hold more than `u32::MAX` items.
    pub fn collect(n: usize, each: impl Fn(&mut dyn FnMut(usize, u32))) -> Result<Lists, Full> {
        let mut last = vec![u32::MAX; n];
        // Each list's count in place, then summed: a count can wrap only where the total
        // passes `u32::MAX`, which is refused.
        let mut starts = vec![0u32; n + 1];
        let mut total = 0u64;
        each(&mut |list, item| {
            if last[list] != item {
                last[list] = item;
                starts[list + 1] = starts[list + 1].wrapping_add(1);
                total += 1;
            }
        });
        if u32::try_from(total).is_err() {
            return Err(Full);
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut items = vec![0; total as usize];
        let mut next = starts[..n].to_vec();
        last.fill(u32::MAX);
        each(&mut |list, item| {
            if last[list] != item {
                last[list] = item;
                items[next[list] as usize] = item;
                next[list] += 1;
            }
        });
        Ok(Lists { starts, items })
    }

    /// Room for `lists` more lists of `items` more items in all, reserved exactly: a graph's
    /// steps are known before their lists are, and growing by doubling left up to half of each
    /// vector unused.
    pub fn reserve_exact(&mut self, lists: usize, items: usize) {
        self.starts
            .reserve_exact(lists + usize::from(self.starts.is_empty()));
        self.items.reserve_exact(items);
    }

    /// Appends a list: lists are numbered in the order they are pushed. `Full` (and nothing
    /// pushed) past `u32::MAX` items.
    pub fn push(&mut self, list: impl IntoIterator<Item = u32>) -> Result<(), Full> {
        self.try_push(list.into_iter().map(Ok), || Full)
    }

    /// [`Lists::push`] of a list whose items may fail: at the first error, or `full()` past
    /// `u32::MAX` items, nothing is pushed.
    pub fn try_push<E>(
        &mut self,
        list: impl IntoIterator<Item = Result<u32, E>>,
        full: impl FnOnce() -> E,
    ) -> Result<(), E> {
        let end = self.items.len();
        for item in list {
            match item {
                Ok(item) => self.items.push(item),
                Err(e) => {
                    self.items.truncate(end);
                    return Err(e);
                }
            }
        }
        let Ok(len) = u32::try_from(self.items.len()) else {
            self.items.truncate(end);
            return Err(full());
        };
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.starts.push(len);
        Ok(())
    }

    /// How many items, in all lists.
    pub fn items_len(&self) -> usize {
        self.items.len()
    }

    /// How many lists.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::ops::Index<usize> for Lists {
    type Output = [u32];

    fn index(&self, list: usize) -> &[u32] {
        &self.items[self.starts[list] as usize..self.starts[list + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_index_reads_back_as_made_in_four_bytes() {
        for index in [None, Some(0), Some(7), Some(u32::MAX - 1)] {
            assert_eq!(OptionalIndex::new(index).get(), index);
        }
        assert_eq!(OptionalIndex::new(Some(u32::MAX)).get(), None);
        assert_eq!(OptionalIndex::default().get(), None);
        assert_eq!(std::mem::size_of::<OptionalIndex>(), 4);
    }

    proptest::proptest! {
        #[test]
        fn lists_hold_what_was_pushed_without_repeats(
            n in 1usize..8,
            pushes in proptest::collection::vec((0usize..8, 0u32..5), 0..40),
        ) {
            let pushes: Vec<(usize, u32)> = pushes.into_iter().map(|(l, i)| (l % n, i)).collect();
            let lists = Lists::collect(n, |push| {
                for &(list, item) in &pushes {
                    push(list, item);
                }
            }).unwrap();
            let mut expected: Vec<Vec<u32>> = vec![Vec::new(); n];
            for &(list, item) in &pushes {
                if expected[list].last() != Some(&item) {
                    expected[list].push(item);
                }
            }
            proptest::prop_assert_eq!(lists.len(), n);
            for (list, items) in expected.iter().enumerate() {
                proptest::prop_assert_eq!(&lists[list], &items[..]);
            }
        }
    }

    #[test]
    fn pushed_lists_read_back_in_order() {
        let mut lists = Lists::default();
        assert!(lists.is_empty());
        assert_eq!(lists.push([3, 1, 3]), Ok(()));
        assert_eq!(lists.push([]), Ok(()));
        assert_eq!(lists.push([7]), Ok(()));
        assert_eq!(lists.len(), 3);
        assert_eq!(
            (&lists[0], &lists[1], &lists[2]),
            (&[3, 1, 3][..], &[][..], &[7][..])
        );
        assert_eq!(
            lists.try_push([Ok(4), Err("no"), Ok(5)], || "full"),
            Err("no")
        );
        assert_eq!(lists.len(), 3);
        assert_eq!(
            lists.try_push([Ok(4), Ok(5)], || "full"),
            Ok::<(), &str>(())
        );
        assert_eq!(
            (lists.len(), &lists[2], &lists[3]),
            (4, &[7][..], &[4, 5][..])
        );
    }
}
