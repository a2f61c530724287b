//! A safe unpickler: Python pickles (protocols 2 to 5) read into plain values, executing nothing.
//!
//! It understands the opcodes that build data (none, booleans, integers, floats, strings,
//! bytes, lists, tuples, dicts, sets, the memo, frames) and refuses every opcode that imports or
//! calls (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `NEWOBJ`, `INST`, `OBJ`, persistent ids,
//! extensions), naming the global it was asked for. A PyTorch memory snapshot needs none of
//! those; a pickle that does is not one this reader will trust.
//!
//! Limits, so a hostile file cannot hang or exhaust the reader: lengths are checked against the
//! bytes left before anything is allocated, containers nest at most [`MAX_DEPTH`] deep (depths
//! are counted as values are built, never by walking them, so a list the memo makes contain
//! itself cannot loop the reader), and a value may be fetched from the memo (and so shared) but
//! the reader never copies it. Consumers walk only the shapes they expect, to a fixed depth.
//! Errors name the byte offset and the opcode.

use std::cell::RefCell;
use std::rc::Rc;

/// The deepest containers may nest.
pub const MAX_DEPTH: usize = 200;

/// A value a pickle builds. Containers are shared (`Rc`), as the memo shares them in Python.
#[derive(Debug, Clone)]
pub enum Value {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    List(Rc<RefCell<Vec<Value>>>),
    Tuple(Rc<[Value]>),
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    Set(Rc<RefCell<Vec<Value>>>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i128::from(*b)),
            _ => None,
        }
    }

    /// The value of `key` in a dict with string keys.
    pub fn get(&self, key: &str) -> Option<Value> {
        match self {
            Value::Dict(d) => d
                .borrow()
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub fn items(&self) -> Option<Vec<Value>> {
        match self {
            Value::List(l) => Some(l.borrow().clone()),
            Value::Tuple(t) => Some(t.to_vec()),
            _ => None,
        }
    }
}

/// Why a pickle could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("pickle byte {offset}: {message}")]
pub struct PickleError {
    pub offset: usize,
    pub message: String,
}

enum Item {
    Mark,
    Value(Value, usize),
}

/// Reads one pickled value from `bytes`.
pub fn read(bytes: &[u8]) -> Result<Value, PickleError> {
    Unpickler {
        bytes,
        at: 0,
        stack: Vec::new(),
        memo: Vec::new(),
    }
    .run()
}

struct Unpickler<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Values with their nesting depth, and marks.
    stack: Vec<Item>,
    memo: Vec<Option<(Value, usize)>>,
}

impl Unpickler<'_> {
    fn err(&self, message: impl Into<String>) -> PickleError {
        PickleError {
            offset: self.at,
            message: message.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        if self.bytes.len() - self.at < n {
            return Err(self.err(format!(
                "wants {n} bytes, {} are left: the file is cut short",
                self.bytes.len() - self.at
            )));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let b = self.take(n)?;
        Ok(b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    }

    fn len(&mut self, n: usize) -> Result<usize, PickleError> {
        let v = self.uint(n)?;
        usize::try_from(v).map_err(|_| self.err("a length past this machine's reach"))
    }

    /// Pushes a scalar or an empty container.
    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        self.push_at(v, 0)
    }

    fn push_at(&mut self, v: Value, depth: usize) -> Result<(), PickleError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("containers nest deeper than {MAX_DEPTH}")));
        }
        self.stack.push(Item::Value(v, depth));
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        self.pop_with_depth().map(|(v, _)| v)
    }

    fn pop_with_depth(&mut self) -> Result<(Value, usize), PickleError> {
        match self.stack.pop() {
            Some(Item::Value(v, d)) => Ok((v, d)),
            Some(Item::Mark) => Err(self.err("a mark where a value was expected")),
            None => Err(self.err("the stack is empty")),
        }
    }

    fn top(&mut self) -> Result<&Value, PickleError> {
        match self.stack.last() {
            Some(Item::Value(v, _)) => Ok(v),
            _ => Err(PickleError {
                offset: self.at,
                message: "no value on the stack".into(),
            }),
        }
    }

    /// The values since the last mark (which is removed), and the deepest of them.
    fn pop_mark(&mut self) -> Result<(Vec<Value>, usize), PickleError> {
        let Some(mark) = self.stack.iter().rposition(|i| matches!(i, Item::Mark)) else {
            return Err(self.err("no mark to pop to"));
        };
        let mut depth = 0;
        let items = self
            .stack
            .drain(mark + 1..)
            .map(|i| match i {
                Item::Value(v, d) => {
                    depth = depth.max(d);
                    v
                }
                Item::Mark => Value::None,
            })
            .collect();
        self.stack.pop();
        Ok((items, depth))
    }

    /// Raises the depth recorded for the container on top to hold children `child_depth` deep.
    fn deepen_top(&mut self, child_depth: usize) -> Result<(), PickleError> {
        if child_depth + 1 > MAX_DEPTH {
            return Err(self.err(format!("containers nest deeper than {MAX_DEPTH}")));
        }
        if let Some(Item::Value(_, d)) = self.stack.last_mut() {
            *d = (*d).max(child_depth + 1);
        }
        Ok(())
    }

    fn text(&mut self, n: usize) -> Result<Value, PickleError> {
        let at = self.at;
        let raw = self.take(n)?;
        let s = std::str::from_utf8(raw).map_err(|_| PickleError {
            offset: at,
            message: "a string that is not UTF-8".into(),
        })?;
        Ok(Value::Str(Rc::from(s)))
    }

    fn memo_put(&mut self, index: usize) -> Result<(), PickleError> {
        let (v, depth) = match self.stack.last() {
            Some(Item::Value(v, d)) => (v.clone(), *d),
            _ => return Err(self.err("no value on the stack to remember")),
        };
        if index > self.bytes.len() {
            return Err(self.err(format!("memo index {index} is implausibly large")));
        }
        if self.memo.len() <= index {
            self.memo.resize(index + 1, None);
        }
        self.memo[index] = Some((v, depth));
        Ok(())
    }

    fn memo_get(&mut self, index: usize) -> Result<(), PickleError> {
        let (v, depth) = self
            .memo
            .get(index)
            .cloned()
            .flatten()
            .ok_or_else(|| self.err(format!("memo entry {index} was never stored")))?;
        self.push_at(v, depth)
    }

    fn append(&mut self, items: Vec<Value>, depth: usize) -> Result<(), PickleError> {
        self.deepen_top(depth)?;
        match self.top()? {
            Value::List(l) => l.borrow_mut().extend(items),
            Value::Set(s) => s.borrow_mut().extend(items),
            _ => return Err(self.err("appending to a value that is not a list")),
        }
        Ok(())
    }

    fn set_items(&mut self, items: Vec<Value>, depth: usize) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.err("a dict update with a key but no value"));
        }
        self.deepen_top(depth)?;
        let Value::Dict(d) = self.top()? else {
            return Err(self.err("setting an item of a value that is not a dict"));
        };
        let mut d = d.borrow_mut();
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            // A later key replaces an earlier equal one, as in Python.
            match d.iter_mut().find(|(old, _)| same_key(old, &k)) {
                Some(slot) => slot.1 = v,
                None => d.push((k, v)),
            }
        }
        Ok(())
    }

    fn run(mut self) -> Result<Value, PickleError> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let version = self.u8()?;
                    if !(2..=5).contains(&version) {
                        return Err(self.err(format!(
                            "pickle protocol {version} (this reader reads 2 to 5)"
                        )));
                    }
                }
                0x95 => {
                    self.take(8)?;
                }
                b'.' => {
                    let v = self.pop()?;
                    return Ok(v);
                }
                b'(' => self.stack.push(Item::Mark),
                b'0' => {
                    self.stack.pop();
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let (v, d) = self.pop_with_depth()?;
                    self.push_at(v.clone(), d)?;
                    self.push_at(v, d)?;
                }
                b'N' => self.push(Value::None)?,
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'J' => {
                    let v = self.uint(4)? as u32 as i32;
                    self.push(Value::Int(i128::from(v)))?
                }
                b'K' => {
                    let v = self.uint(1)?;
                    self.push(Value::Int(i128::from(v)))?
                }
                b'M' => {
                    let v = self.uint(2)?;
                    self.push(Value::Int(i128::from(v)))?
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.len(1)?
                    } else {
                        self.len(4)?
                    };
                    if n > 16 {
                        return Err(self.err(format!("an integer of {n} bytes, past 128 bits")));
                    }
                    let raw = self.take(n)?;
                    let mut v: i128 = 0;
                    for (k, &b) in raw.iter().enumerate() {
                        v |= i128::from(b) << (8 * k);
                    }
                    if n > 0 && n < 16 && raw[n - 1] & 0x80 != 0 {
                        v -= 1i128 << (8 * n);
                    }
                    self.push(Value::Int(v))?
                }
                b'G' => {
                    let raw = self.take(8)?;
                    let v = f64::from_be_bytes(raw.try_into().expect("8 bytes"));
                    self.push(Value::Float(v))?
                }
                0x8c => {
                    let n = self.len(1)?;
                    let v = self.text(n)?;
                    self.push(v)?
                }
                b'X' => {
                    let n = self.len(4)?;
                    let v = self.text(n)?;
                    self.push(v)?
                }
                0x8d => {
                    let n = self.len(8)?;
                    let v = self.text(n)?;
                    self.push(v)?
                }
                b'U' | b'T' => {
                    // Protocol 1 strings (bytes in Python 2): read as text when UTF-8.
                    let n = if op == b'U' {
                        self.len(1)?
                    } else {
                        self.len(4)?
                    };
                    let v = self.text(n)?;
                    self.push(v)?
                }
                b'C' | 0x42 | 0x8e | 0x96 => {
                    let n = match op {
                        b'C' => self.len(1)?,
                        0x42 => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let raw = self.take(n)?.to_vec();
                    self.push(Value::Bytes(Rc::from(raw)))?
                }
                b'}' => self.push(Value::Dict(Rc::new(RefCell::new(Vec::new()))))?,
                b']' => self.push(Value::List(Rc::new(RefCell::new(Vec::new()))))?,
                b')' => self.push(Value::Tuple(Rc::from(Vec::new())))?,
                0x8f => self.push(Value::Set(Rc::new(RefCell::new(Vec::new()))))?,
                b't' => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::Tuple(Rc::from(items)), d + 1)?
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    let mut items = Vec::with_capacity(n);
                    let mut depth = 0;
                    for _ in 0..n {
                        let (v, d) = self.pop_with_depth()?;
                        depth = depth.max(d);
                        items.push(v);
                    }
                    items.reverse();
                    self.push_at(Value::Tuple(Rc::from(items)), depth + 1)?
                }
                b'l' => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::List(Rc::new(RefCell::new(items))), d + 1)?
                }
                b'd' => {
                    let (items, d) = self.pop_mark()?;
                    self.push(Value::Dict(Rc::new(RefCell::new(Vec::new()))))?;
                    self.set_items(items, d)?
                }
                0x91 => {
                    let (items, d) = self.pop_mark()?;
                    self.push_at(Value::Set(Rc::new(RefCell::new(items))), d + 1)?
                }
                b'a' => {
                    let (v, d) = self.pop_with_depth()?;
                    self.append(vec![v], d)?
                }
                b'e' | 0x90 => {
                    let (items, d) = self.pop_mark()?;
                    self.append(items, d)?
                }
                b's' => {
                    let (v, dv) = self.pop_with_depth()?;
                    let (k, dk) = self.pop_with_depth()?;
                    self.set_items(vec![k, v], dv.max(dk))?
                }
                b'u' => {
                    let (items, d) = self.pop_mark()?;
                    self.set_items(items, d)?
                }
                0x94 => {
                    let index = self.memo.len();
                    self.memo_put(index)?
                }
                b'q' => {
                    let i = self.len(1)?;
                    self.memo_put(i)?
                }
                b'r' => {
                    let i = self.len(4)?;
                    self.memo_put(i)?
                }
                b'h' => {
                    let i = self.len(1)?;
                    self.memo_get(i)?
                }
                b'j' => {
                    let i = self.len(4)?;
                    self.memo_get(i)?
                }
                b'c' => {
                    // GLOBAL: "module\nname\n". Refused, naming it.
                    let end = self.bytes[self.at..]
                        .iter()
                        .take(512)
                        .enumerate()
                        .filter(|&(_, &b)| b == b'\n')
                        .nth(1)
                        .map(|(k, _)| k);
                    let name = end.map_or_else(
                        || "an unreadable name".to_string(),
                        |k| {
                            String::from_utf8_lossy(&self.bytes[self.at..self.at + k])
                                .replace('\n', ".")
                        },
                    );
                    return Err(PickleError {
                        offset: at,
                        message: format!(
                            "it refers to `{name}`: this reader builds plain values and never imports or calls anything"
                        ),
                    });
                }
                0x93 => {
                    let name = self.pop().ok();
                    let module = self.pop().ok();
                    let name = match (module, name) {
                        (Some(Value::Str(m)), Some(Value::Str(n))) => format!("{m}.{n}"),
                        _ => "a global".to_string(),
                    };
                    return Err(PickleError {
                        offset: at,
                        message: format!(
                            "it refers to `{name}`: this reader builds plain values and never imports or calls anything"
                        ),
                    });
                }
                b'R'
                | b'b'
                | 0x81
                | 0x92
                | b'i'
                | b'o'
                | b'P'
                | b'Q'
                | 0x82..=0x84
                | 0x97
                | 0x98 => {
                    return Err(PickleError {
                        offset: at,
                        message: format!(
                            "opcode 0x{op:02x} builds or calls objects: this reader builds plain values only"
                        ),
                    });
                }
                other => {
                    return Err(PickleError {
                        offset: at,
                        message: format!(
                            "opcode 0x{other:02x} is not one of pickle protocols 2 to 5"
                        ),
                    });
                }
            }
        }
    }
}

fn same_key(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::None, Value::None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_of_protocol_4() {
        // pickle.dumps({'a': [1, -2, 3.5, 'x', b'y', None, True, (1, 2)], 'big': 2**70}, 4)
        let bytes: &[u8] = b"\x80\x04\x95>\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00\x8c\x01x\x94C\x01y\x94N\x88K\x01K\x02\x86\x94e\x8c\x03big\x94\x8a\t\x00\x00\x00\x00\x00\x00\x00\x00@u.";
        let v = read(bytes).unwrap();
        let a = v.get("a").unwrap().items().unwrap();
        assert_eq!(a[0].as_int(), Some(1));
        assert_eq!(a[1].as_int(), Some(-2));
        assert!(matches!(a[2], Value::Float(f) if f == 3.5));
        assert_eq!(a[3].as_str(), Some("x"));
        assert!(matches!(&a[4], Value::Bytes(b) if &b[..] == b"y"));
        assert!(matches!(a[5], Value::None));
        assert_eq!(a[6].as_int(), Some(1));
        assert_eq!(a[7].items().unwrap().len(), 2);
        assert_eq!(v.get("big").unwrap().as_int(), Some(1i128 << 70));
    }

    #[test]
    fn globals_and_calls_are_refused_by_name() {
        // pickle.dumps(os.system, 2) style: GLOBAL 'os\nsystem\n'.
        let e = read(b"\x80\x02cos\nsystem\nq\x00.").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.to_string().contains("`os.system`"), "{e}");
        let e = read(b"\x80\x04\x8c\x02os\x8c\x06system\x93.").unwrap_err();
        assert!(e.to_string().contains("`os.system`"), "{e}");
        let e = read(b"\x80\x02N)R.").unwrap_err();
        assert!(e.to_string().contains("builds or calls objects"), "{e}");
    }

    #[test]
    fn hostile_shapes_are_errors_not_hangs_or_huge_allocations() {
        // A string claiming 2^64 - 1 bytes.
        let e = read(b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff").unwrap_err();
        assert!(
            e.to_string().contains("cut short") || e.to_string().contains("reach"),
            "{e}"
        );
        // Lists nested past the limit.
        let mut deep = b"\x80\x04".to_vec();
        deep.extend(vec![b']'; MAX_DEPTH + 5]);
        deep.extend(vec![b'a'; MAX_DEPTH + 4]);
        deep.push(b'.');
        assert!(read(&deep).unwrap_err().to_string().contains("nest deeper"));
        assert!(read(b"").is_err());
        assert!(read(b"\x80\x01N.").is_err());
        assert!(
            read(b"\x80\x04h\x05.")
                .unwrap_err()
                .to_string()
                .contains("never stored")
        );
        // A list that contains itself (through the memo) is built without looping.
        let v = read(b"\x80\x04]\x94h\x00a.").unwrap();
        assert!(matches!(v, Value::List(_)));
    }

    #[test]
    fn the_memo_shares_a_container_filled_after_it_was_stored() {
        // l = []; pickle.dumps([l, l], 4): the second element is a memo get of the first.
        let v = read(b"\x80\x04\x95\t\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94h\x01e.").unwrap();
        let outer = v.items().unwrap();
        assert_eq!(outer.len(), 2);
        let (Value::List(a), Value::List(b)) = (&outer[0], &outer[1]) else {
            panic!("{outer:?}")
        };
        assert!(Rc::ptr_eq(a, b), "one list, shared");
        // A list memoized empty and filled afterwards is seen filled through the memo.
        let v = read(b"\x80\x04]\x94K\x07a(h\x00h\x00l.").unwrap();
        assert_eq!(v.items().unwrap()[0].items().unwrap()[0].as_int(), Some(7));
    }
}
