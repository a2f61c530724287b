//! Many short lists of indices held in two vectors: a million steps' reads, or a million
//! tensors' producers, are two allocations, not a million (each a header, a heap block and its
//! allocator's overhead, several times the indices they hold).

/// A list of indices per element (a step, a tensor).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lists {
    /// List `i` is `items[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
    items: Vec<usize>,
}

impl Lists {
    /// `n` lists, filled by `each`, which calls `push(list, item)` for each item in order (and
    /// is called twice: once to count, once to fill). An item pushed onto a list that ends
    /// with it already is not added again.
    pub fn collect(n: usize, each: impl Fn(&mut dyn FnMut(usize, usize))) -> Lists {
        let mut last = vec![usize::MAX; n];
        let mut starts = vec![0; n + 1];
        each(&mut |list, item| {
            if last[list] != item {
                last[list] = item;
                starts[list + 1] += 1;
            }
        });
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut items = vec![0; starts[n]];
        let mut next = starts[..n].to_vec();
        last.fill(usize::MAX);
        each(&mut |list, item| {
            if last[list] != item {
                last[list] = item;
                items[next[list]] = item;
                next[list] += 1;
            }
        });
        Lists { starts, items }
    }

    /// Appends a list: lists are numbered in the order they are pushed.
    pub fn push(&mut self, list: impl IntoIterator<Item = usize>) {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.items.extend(list);
        self.starts.push(self.items.len());
    }

    /// [`Lists::push`] of a list whose items may fail: at the first error nothing is pushed.
    pub fn try_push<E>(
        &mut self,
        list: impl IntoIterator<Item = Result<usize, E>>,
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
        self.push([]);
        Ok(())
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
    type Output = [usize];

    fn index(&self, list: usize) -> &[usize] {
        &self.items[self.starts[list]..self.starts[list + 1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn lists_hold_what_was_pushed_without_repeats(
            n in 1usize..8,
            pushes in proptest::collection::vec((0usize..8, 0usize..5), 0..40),
        ) {
            let pushes: Vec<(usize, usize)> = pushes.into_iter().map(|(l, i)| (l % n, i)).collect();
            let lists = Lists::collect(n, |push| {
                for &(list, item) in &pushes {
                    push(list, item);
                }
            });
            let mut expected: Vec<Vec<usize>> = vec![Vec::new(); n];
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
        lists.push([3, 1, 3]);
        lists.push([]);
        lists.push([7]);
        assert_eq!(lists.len(), 3);
        assert_eq!(
            (&lists[0], &lists[1], &lists[2]),
            (&[3, 1, 3][..], &[][..], &[7][..])
        );
        assert_eq!(lists.try_push([Ok(4), Err("no"), Ok(5)]), Err("no"));
        assert_eq!(lists.len(), 3);
        assert_eq!(lists.try_push::<()>([Ok(4), Ok(5)]), Ok(()));
        assert_eq!(
            (lists.len(), &lists[2], &lists[3]),
            (4, &[7][..], &[4, 5][..])
        );
    }
}
