//! What the CLI prints goes through [`write`]: a reader that stops reading (`memplan plan x
//! --json | head`) ends the process quietly with exit code 0, as it would a C tool's, where
//! `print!` panicked on the broken pipe and printed a stack trace.

use std::io::{ErrorKind, Write as _};

/// `print!`, quiet on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

/// `println!`, quiet on a closed pipe.
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes `text` to standard output: a closed pipe exits 0, any other failure says so and
/// exits 1.
pub fn write(text: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("memplan: cannot write the output: {e}");
        std::process::exit(1);
    }
}
