//! The depth-first search over canonical layouts, with its path on an explicit stack (`Frame`)
//! so that it pauses when its nodes run out and resumes later where it stopped; a region split
//! where nothing unplaced crosses a time is searched part by part (`Part`, `Split`).

use super::*;

/// How one depth-first run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Found,
    Exhausted,
    /// Out of nodes: says nothing.
    OutOfNodes,
    /// The caller stopped it.
    Stopped,
}

/// Unplaced buffers that share no time with the other unplaced buffers outside positions
/// `lo..hi`: a sub-problem solved on its own (dynamic decomposition).
pub(super) struct Part {
    pub(super) members: Vec<u32>,
    pub(super) lo: usize,
    pub(super) hi: usize,
}

/// Positions `lo..hi` cut after each of `cuts`: the bounds of the pieces.
pub(super) fn pieces(lo: usize, hi: usize, cuts: &[usize]) -> Vec<usize> {
    let mut bounds = vec![lo];
    bounds.extend(cuts.iter().map(|&p| p + 1));
    bounds.push(hi);
    bounds
}

/// What a frame's step leaves the search to do next.
pub(super) enum Step {
    /// A child was pushed: run it.
    Descend,
    /// The frame is done: this is its answer, for the frame below.
    Return(Run),
    /// Out of nodes, or stopped: the stack stays as it is.
    Pause(Run),
}

/// What one placement changed, as offsets into the search's undo stacks.
pub(super) struct Mark {
    pub(super) raised: usize,
    pub(super) sections: usize,
    pub(super) cuts: usize,
}

/// A node of the depth-first search still open: the search keeps its path as a stack of
/// these rather than on the call stack, so that it can pause when its node budget runs out and
/// resume where it stopped (and so that a region of many buffers cannot overflow the stack).
pub(super) enum Frame {
    Node(Node),
    Split(Split),
}

/// Places the unplaced buffers of `parts[part]`, the last one placed at `last`.
pub(super) struct Node {
    pub(super) part: usize,
    pub(super) last: (u64, u32),
    /// Where its candidates start in the search's `candidates`, once counted.
    pub(super) base: Option<usize>,
    /// The next candidate to try...
    pub(super) next: usize,
    /// ...and the one placed now, with what to undo when its subtree returns.
    pub(super) trying: Option<(usize, Mark)>,
}

impl Node {
    pub(super) fn fresh(part: usize, last: (u64, u32)) -> Frame {
        Frame::Node(Node {
            part,
            last,
            base: None,
            next: 0,
            trying: None,
        })
    }
}

/// Solves the pieces of `parts[part]` between `bounds` one after another: they share no
/// unplaced buffer, so one failing fails them all and no combination needs retrying.
pub(super) struct Split {
    pub(super) part: usize,
    pub(super) bounds: Vec<usize>,
    /// The next piece...
    pub(super) next: usize,
    /// ...and the ranks the piece being solved replaced.
    pub(super) replaced: Option<Vec<(u32, u32)>>,
}

/// The problem a search runs on, shared by every preordering, with the state every search
/// starts from (nothing placed).
pub(super) struct Shape<'a> {
    /// The items, time compressed.
    pub(super) items: Vec<Item>,
    pub(super) neighbours: &'a [Vec<u32>],
    pub(super) positions: usize,
    /// The buffers live at each position, all unplaced.
    pub(super) live_at: Unplaced,
    pub(super) sections: Sections,
    pub(super) crossing: Vec<u32>,
    /// The pieces of the whole region where nothing crosses: every search's first split.
    pub(super) bounds: Vec<usize>,
    /// Buffers with the same size, alignment and interval share a class: at one floor, trying
    /// one of them tries them all.
    pub(super) class: Vec<u32>,
    /// How long each buffer lives, in the region's positions before compression...
    pub(super) width: Vec<u64>,
    /// ...and in the problem's time units, where it has them (else empty).
    pub(super) duration: &'a [u64],
    /// How many nodes pass between two reports to the caller (and questions whether to stop).
    pub(super) report_every: u64,
}

impl<'a> Shape<'a> {
    pub(super) fn new(items: &[Item], neighbours: &'a [Vec<u32>], durations: &'a [u64]) -> Self {
        let width = items.iter().map(|i| u64::from(i.live.len())).collect();
        let items = compress(items);
        let positions = items
            .iter()
            .map(|i| i.live.last as usize + 1)
            .max()
            .unwrap_or(1);
        let mut crossing = vec![0u32; positions];
        for it in &items {
            for p in it.live.first..it.live.last {
                crossing[p as usize] += 1;
            }
        }
        let mut classes: Vec<(u64, u64, u32, u32, u32)> = items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.size, it.alignment, it.live.first, it.live.last, i as u32))
            .collect();
        classes.sort_unstable();
        let mut class = vec![0u32; items.len()];
        for (k, w) in classes.iter().enumerate() {
            let same = k > 0 && {
                let p = classes[k - 1];
                (p.0, p.1, p.2, p.3) == (w.0, w.1, w.2, w.3)
            };
            class[w.4 as usize] = if same {
                class[classes[k - 1].4 as usize]
            } else {
                k as u32
            };
        }
        let cuts: Vec<usize> = (0..positions - 1).filter(|&p| crossing[p] == 0).collect();
        Shape {
            report_every: report_every(items.len()),
            bounds: pieces(0, positions, &cuts),
            live_at: Unplaced::new(&items, positions),
            sections: Sections::new(&items, positions),
            items,
            neighbours,
            positions,
            crossing,
            class,
            width,
            duration: durations,
        }
    }
}

pub(super) struct Search<'a> {
    pub(super) shape: &'a Shape<'a>,
    pub(super) heuristic: Heuristic,
    /// Seeds the random tie-break (the restart's number).
    pub(super) seed: u64,
    /// Each buffer's place in its part's preordering (ties between equal floors).
    pub(super) rank: Vec<u32>,
    pub(super) capacity: u64,
    pub(super) floor: Vec<u64>,
    pub(super) offset: Vec<u64>,
    pub(super) placed: Vec<bool>,
    pub(super) unplaced: Unplaced,
    /// Per buffer, its neighbours not yet placed.
    pub(super) open_neighbours: Vec<u32>,
    /// The offsets of the parts solved so far (each part's search unwinds when it returns).
    pub(super) solution: Vec<u64>,
    pub(super) sections: Sections,
    /// Per boundary `p` (between positions `p` and `p + 1`): the unplaced buffers live on both
    /// sides. At zero the part splits there.
    pub(super) crossing: Vec<u32>,
    /// Undo stacks: raised floors `(buffer, floor before)`, the sections' journal, and the
    /// boundaries that fell to zero.
    pub(super) raised: Vec<(u32, u64)>,
    pub(super) journal: Journal,
    pub(super) cuts: Vec<usize>,
    /// The candidates of every node on the current path, each node's above its parent's.
    pub(super) candidates: Vec<u32>,
    /// The open path, and the parts its splits made (the whole region first).
    pub(super) stack: Vec<Frame>,
    pub(super) parts: Vec<Part>,
    /// How the search ended, once its stack is empty.
    pub(super) done: Option<Run>,
    pub(super) nodes: u64,
    pub(super) limit: u64,
    /// What the caller hears every `report_every` nodes (its evaluations: those before this resume),
    /// and the nodes counted when it resumed.
    pub(super) heard: Progress,
    pub(super) resumed_at: u64,
    /// The position where the last placement that failed overflowed: most fail where the one
    /// before did (seven in ten on minimalloc's D), and [`Search::overflows_at`] asks there
    /// first, without placing.
    pub(super) last_overflow: usize,
}

impl<'a> Search<'a> {
    /// A search of `shape` with nothing placed yet, its first step to split the region where
    /// nothing crosses.
    pub(super) fn new(
        shape: &'a Shape<'a>,
        heuristic: Heuristic,
        seed: u64,
        capacity: u64,
    ) -> Self {
        let n = shape.items.len();
        let whole = Part {
            members: (0..n as u32).collect(),
            lo: 0,
            hi: shape.positions,
        };
        Search {
            stack: vec![Frame::Split(Split {
                bounds: shape.bounds.clone(),
                part: 0,
                next: 0,
                replaced: None,
            })],
            parts: vec![whole],
            done: None,
            shape,
            heuristic,
            seed,
            rank: vec![0; n],
            capacity,
            floor: vec![0; n],
            offset: vec![0; n],
            placed: vec![false; n],
            unplaced: shape.live_at.clone(),
            open_neighbours: shape.neighbours.iter().map(|n| n.len() as u32).collect(),
            solution: vec![0; n],
            sections: shape.sections.clone(),
            crossing: shape.crossing.clone(),
            raised: Vec::new(),
            journal: Journal {
                changed: Vec::new(),
                seen: vec![0; shape.positions],
                stamp: 0,
            },
            cuts: Vec::new(),
            candidates: Vec::new(),
            nodes: 0,
            limit: 0,
            heard: Progress {
                device: 0,
                evaluations: 0,
                exact: true,
                best_bytes: u64::MAX,
                bound_bytes: 0,
            },
            resumed_at: 0,
            last_overflow: 0,
        }
    }

    /// Runs the search on from where it stopped until it finds a layout, proves there is none,
    /// has counted `limit` nodes in all (`OutOfNodes`: call again with a higher limit to go on),
    /// or the caller stops it.
    /// `heard` is what the caller hears every `report_every` nodes, its evaluations those counted before
    /// this call.
    pub(super) fn resume(&mut self, limit: u64, heard: Progress, control: &mut Control<'_>) -> Run {
        self.limit = limit;
        (self.heard, self.resumed_at) = (heard, self.nodes);
        // What the frame last popped found, for the frame below it (and, once the stack is
        // empty, for every later call).
        let mut returned = self.done;
        while let Some(frame) = self.stack.pop() {
            let step = match frame {
                Frame::Node(node) => self.step_node(node, returned.take(), control),
                Frame::Split(split) => self.step_split(split, returned.take()),
            };
            match step {
                Step::Descend => {}
                Step::Return(run) => returned = Some(run),
                Step::Pause(run) => return run,
            }
        }
        self.done = returned;
        returned.unwrap_or(Run::Exhausted)
    }

    /// Takes `node` a step on: counts it when new, takes back what its last child placed, and
    /// places its next candidate (pushing the node back with the child above it).
    pub(super) fn step_node(
        &mut self,
        mut node: Node,
        returned: Option<Run>,
        control: &mut Control<'_>,
    ) -> Step {
        if let Some((c, mark)) = node.trying.take() {
            let run = returned.expect("a child returns to its node");
            self.unplace(c, mark);
            // A buffer with nothing unplaced beside it changes nothing for the rest: placed
            // later, it would leave them the same problem, which just failed.
            if run != Run::Exhausted || self.open_neighbours[c] == 0 {
                return self.leave(&node, run);
            }
        }
        let base = match node.base {
            Some(base) => base,
            None => match self.enter(&node, control) {
                Ok(base) => {
                    node.base = Some(base);
                    node.next = base;
                    base
                }
                Err(Step::Pause(run)) => {
                    self.stack.push(Frame::Node(node));
                    return Step::Pause(run);
                }
                Err(step) => return step,
            },
        };
        let (lo, hi) = (self.parts[node.part].lo, self.parts[node.part].hi);
        while node.next < self.candidates.len() {
            let c = self.candidates[node.next] as usize;
            node.next += 1;
            // A twin has this floor: in `(floor, rank)` order (floors are as at the node's
            // entry: every child undoes its placements), those are right before it.
            let at = self.floor[c];
            let twin = (self.candidates[base..node.next - 1].iter().rev())
                .take_while(|&&d| self.floor[d as usize] == at)
                .any(|&d| self.shape.class[d as usize] == self.shape.class[c]);
            if twin {
                continue;
            }
            let Some(mark) = self.try_place(c, lo..hi) else {
                if self.open_neighbours[c] == 0 {
                    break;
                }
                continue;
            };
            let child = if self.cuts.len() == mark.cuts {
                Node::fresh(node.part, (at, self.rank[c]))
            } else {
                let cuts = &self.cuts[mark.cuts..];
                Frame::Split(Split {
                    bounds: pieces(self.parts[node.part].lo, self.parts[node.part].hi, cuts),
                    part: node.part,
                    next: 0,
                    replaced: None,
                })
            };
            node.trying = Some((c, mark));
            self.stack.push(Frame::Node(node));
            self.stack.push(child);
            return Step::Descend;
        }
        self.leave(&node, Run::Exhausted)
    }

    /// A new node: finds the part placed (a layout: `Return(Found)`), or counts the node and
    /// lists its candidates, in `(floor, rank)` order, returning where they start.
    pub(super) fn enter(&mut self, node: &Node, control: &mut Control<'_>) -> Result<usize, Step> {
        let items = &self.shape.items[..];
        let part = &self.parts[node.part];
        // A buffer placed at `f` leaves what is still to place at each time above `f`: none
        // goes where the most bytes still to place at one time would pass the capacity.
        let unplaced = self.sections.maxima.max(part.lo, part.hi)[UNPLACED];
        let highest = self.capacity.saturating_sub(unplaced);
        // One pass over the members: the candidates by those bounds, and the least height an
        // unplaced buffer reaches (no buffer goes at or above an unplaced one's floor + size:
        // that one would fit below), which prunes them after.
        let base = self.candidates.len();
        let mut min_height = u64::MAX;
        let mut any = false;
        for &i in &part.members {
            let u = i as usize;
            if self.placed[u] {
                continue;
            }
            any = true;
            let floor = self.floor[u];
            min_height = min_height.min(floor.saturating_add(items[u].size.max(1)));
            if floor <= highest && (floor, self.rank[u]) >= node.last {
                self.candidates.push(i);
            }
        }
        if !any {
            self.record(node.part);
            return Err(Step::Return(Run::Found));
        }
        let pause = |search: &mut Self, run| {
            search.candidates.truncate(base);
            Err(Step::Pause(run))
        };
        if self.nodes >= self.limit {
            return pause(self, Run::OutOfNodes);
        }
        if (self.nodes + 1).is_multiple_of(self.shape.report_every) {
            control.report(Progress {
                evaluations: self.heard.evaluations + (self.nodes + 1 - self.resumed_at),
                ..self.heard
            });
            if control.stop() {
                return pause(self, Run::Stopped);
            }
        }
        self.nodes += 1;
        let floor = &self.floor;
        let mut kept = base;
        for k in base..self.candidates.len() {
            let c = self.candidates[k];
            if floor[c as usize] < min_height {
                self.candidates[kept] = c;
                kept += 1;
            }
        }
        self.candidates.truncate(kept);
        let rank = &self.rank;
        self.candidates[base..].sort_unstable_by_key(|&i| (floor[i as usize], rank[i as usize]));
        Ok(base)
    }

    /// A node is done: its candidates go.
    pub(super) fn leave(&mut self, node: &Node, run: Run) -> Step {
        if let Some(base) = node.base {
            self.candidates.truncate(base);
        }
        Step::Return(run)
    }

    /// Places `c` at its floor if what is left of `part` still fits under the capacity (else
    /// leaves everything as it was): first asked, without placing, where the last placement
    /// that failed overflowed.
    pub(super) fn try_place(&mut self, c: usize, part: std::ops::Range<usize>) -> Option<Mark> {
        let t = self.last_overflow;
        if part.contains(&t) && self.overflows_at(c, t) {
            return None;
        }
        let at = self.floor[c];
        let (lo, hi) = (part.start, part.end);
        let (mark, dead) = self.place(c, part);
        if dead || self.sections.top(lo, hi, at) > self.capacity {
            self.unplace(c, mark);
            return None;
        }
        Some(mark)
    }

    /// Places `c` at its floor: raises its unplaced neighbours' floors, updates the sections,
    /// and notes the boundaries nothing unplaced crosses any more. Says whether a raised floor
    /// already passes the capacity, or whether what is left to place at a position of `part`
    /// whose lowest floor rose does: then it stops there, leaving the sections for
    /// [`Search::unplace`] to mend (seven placements in ten fail so on some problems, and the
    /// rescans after the first that fails were most of their cost).
    pub(super) fn place(&mut self, c: usize, part: std::ops::Range<usize>) -> (Mark, bool) {
        let shape = self.shape;
        let items = &shape.items[..];
        let it = items[c];
        let at = self.floor[c];
        let end = at + it.size;
        let mark = Mark {
            raised: self.raised.len(),
            sections: self.journal.changed.len(),
            cuts: self.cuts.len(),
        };
        self.placed[c] = true;
        self.unplaced.remove(items, c);
        self.offset[c] = at;
        self.journal.stamp += 1;
        let (first, last) = (it.live.first as usize, it.live.last as usize);
        for (p, crossing) in (first..last).zip(&mut self.crossing[first..last]) {
            *crossing -= 1;
            if *crossing == 0 {
                self.cuts.push(p);
            }
        }
        self.sections
            .take(&mut self.journal, first, last, it.size, at);
        let mut dead = false;
        for &j in &self.shape.neighbours[c] {
            let j = j as usize;
            if self.placed[j] {
                continue;
            }
            self.open_neighbours[j] -= 1;
            let old = self.floor[j];
            let lifted = align_up(end, items[j].alignment).unwrap_or(u64::MAX);
            if lifted <= old {
                continue;
            }
            self.raised.push((j as u32, old));
            self.floor[j] = lifted;
            dead |= lifted.saturating_add(items[j].size) > self.capacity;
            let live = items[j].live;
            let (a, b) = (live.first as usize, live.last as usize);
            if self.sections.maxima.max(a, b + 1)[RESTING_ON] < old {
                continue;
            }
            self.sections.lift(&mut self.journal, a, b, old);
        }
        // Rescan where the last buffer resting on the lowest floor left, the latest lifts first:
        // a placement that fails mostly overflows there.
        let (mut lo, mut hi) = (usize::MAX, 0);
        for k in (mark.sections..self.journal.changed.len()).rev() {
            let t = self.journal.changed[k].0 as usize;
            if self.sections.resting[t] == 0 {
                // Branch-free: the hottest loop of the search, and its comparisons are coin tosses.
                let (mut lowest, mut resting) = (u64::MAX, 0u32);
                for &i in self.unplaced.at(t) {
                    let floor = self.floor[i as usize];
                    resting = if floor < lowest {
                        1
                    } else {
                        resting + u32::from(floor == lowest)
                    };
                    lowest = lowest.min(floor);
                }
                self.sections.lowest[t] = lowest;
                self.sections.resting[t] = resting;
                let stacked = Sections::stacked(lowest, self.sections.need[t]);
                if stacked > self.capacity && part.contains(&t) {
                    self.last_overflow = t;
                    return (mark, true);
                }
            }
            self.sections.write(t);
            (lo, hi) = (lo.min(t), hi.max(t));
        }
        if lo <= hi {
            self.sections.rebuild(lo, hi);
        }
        (mark, dead)
    }

    /// Whether placing `c` at its floor would leave more to place at position `t` than fits
    /// above the lowest floor there: what [`Search::place`] would find, without placing it.
    pub(super) fn overflows_at(&self, c: usize, t: usize) -> bool {
        let items = &self.shape.items[..];
        let it = items[c];
        let end = self.floor[c].saturating_add(it.size);
        let (first, last) = (it.live.first, it.live.last);
        let inside = (first as usize..=last as usize).contains(&t);
        let need = self.sections.need[t] - if inside { it.size } else { 0 };
        if need == 0 {
            return false;
        }
        let mut lowest = u64::MAX;
        for &j in self.unplaced.at(t) {
            let j = j as usize;
            if j == c {
                continue;
            }
            let other = items[j];
            // Placing `c` lifts each buffer beside it to its end.
            let beside = other.live.first <= last && first <= other.live.last;
            let lifted = align_up(end, other.alignment).unwrap_or(u64::MAX);
            let floor = if beside {
                self.floor[j].max(lifted)
            } else {
                self.floor[j]
            };
            lowest = lowest.min(floor);
        }
        Sections::stacked(lowest, need) > self.capacity
    }

    pub(super) fn unplace(&mut self, c: usize, mark: Mark) {
        let it = self.shape.items[c];
        for &(j, old) in self.raised[mark.raised..].iter().rev() {
            self.floor[j as usize] = old;
        }
        self.raised.truncate(mark.raised);
        for &j in &self.shape.neighbours[c] {
            if !self.placed[j as usize] {
                self.open_neighbours[j as usize] += 1;
            }
        }
        for need in &mut self.sections.need[it.live.first as usize..it.live.last as usize + 1] {
            *need += it.size;
        }
        let (mut lo, mut hi) = (usize::MAX, 0);
        for k in (mark.sections..self.journal.changed.len()).rev() {
            let (t, lowest, resting) = self.journal.changed[k];
            let t = t as usize;
            self.sections.lowest[t] = lowest;
            self.sections.resting[t] = resting;
            self.sections.write(t);
            (lo, hi) = (lo.min(t), hi.max(t));
        }
        self.journal.changed.truncate(mark.sections);
        if lo <= hi {
            self.sections.rebuild(lo, hi);
        }
        for crossing in &mut self.crossing[it.live.first as usize..it.live.last as usize] {
            *crossing += 1;
        }
        self.cuts.truncate(mark.cuts);
        self.unplaced.restore(it.live);
        self.placed[c] = false;
    }

    /// Takes `split` a step on: restores the ranks its last piece replaced and, unless that
    /// piece failed, ranks the next piece and pushes it (with the split back below it).
    pub(super) fn step_split(&mut self, mut split: Split, returned: Option<Run>) -> Step {
        if let Some(replaced) = split.replaced.take() {
            for (i, r) in replaced {
                self.rank[i as usize] = r;
            }
            self.parts.pop();
            let run = returned.expect("a piece returns to its split");
            if run != Run::Found {
                return Step::Return(run);
            }
        }
        while split.next + 1 < split.bounds.len() {
            let (lo, hi) = (split.bounds[split.next], split.bounds[split.next + 1]);
            split.next += 1;
            let members: Vec<u32> = self.parts[split.part]
                .members
                .iter()
                .copied()
                .filter(|&i| {
                    let live = self.shape.items[i as usize].live;
                    !self.placed[i as usize]
                        && (live.first as usize) < hi
                        && live.last as usize >= lo
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            split.replaced = Some(self.preorder(&members));
            self.parts.push(Part { members, lo, hi });
            let piece = Node::fresh(self.parts.len() - 1, (0, 0));
            self.stack.push(Frame::Split(split));
            self.stack.push(piece);
            return Step::Descend;
        }
        self.record(split.part);
        Step::Return(Run::Found)
    }

    /// Ranks `members` by the search's heuristic, their totals taken from what is still to place
    /// (as MiniMalloc ranks each sub-problem afresh); returns the ranks it replaced.
    pub(super) fn preorder(&mut self, members: &[u32]) -> Vec<(u32, u32)> {
        let shape = self.shape;
        let mut keyed: Vec<((u64, u64, u64), u32)> = members
            .iter()
            .map(|&i| {
                let u = i as usize;
                let live = shape.items[u].live;
                let total = (live.first as usize..=live.last as usize)
                    .map(|t| self.sections.need[t])
                    .max()
                    .unwrap_or(0);
                let width = match self.heuristic {
                    Heuristic::TotalDurationArea => shape.duration.get(u).copied(),
                    _ => None,
                }
                .unwrap_or(shape.width[u]);
                let area = shape.items[u].size.saturating_mul(width);
                let random = scramble(i, self.seed);
                (self.heuristic.key(width, area, total, random), i)
            })
            .collect();
        keyed.sort_unstable_by_key(|&(key, i)| (std::cmp::Reverse(key), i));
        keyed
            .iter()
            .enumerate()
            .map(|(r, &(_, i))| (i, std::mem::replace(&mut self.rank[i as usize], r as u32)))
            .collect()
    }

    /// Keeps the offsets of the part's placed buffers.
    pub(super) fn record(&mut self, part: usize) {
        for &i in &self.parts[part].members {
            if self.placed[i as usize] {
                self.solution[i as usize] = self.offset[i as usize];
            }
        }
    }
}
