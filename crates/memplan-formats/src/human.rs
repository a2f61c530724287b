//! Human-readable text: byte sizes in binary units, ratios, and the short plan table. Shared by
//! the CLI and the web app so that both print the same strings.

use std::fmt::Write;

use crate::report::PlanReport;

/// `bytes` in the largest binary unit that keeps it at least 1 (B, KiB, MiB, GiB, TiB).
pub fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// The ratio of two byte counts, as `1.234`, or `-` when the denominator is 0.
pub fn ratio(peak: u64, lower_bound: u64) -> String {
    if lower_bound == 0 {
        "-".into()
    } else {
        format!("{:.3}", peak as f64 / lower_bound as f64)
    }
}

pub fn plan_table(report: &PlanReport) -> String {
    let mut out = String::new();
    let verdict = if report.valid { "valid" } else { "INVALID" };
    let _ = writeln!(
        out,
        "strategy {}  peak {}  lower bound {}  peak/LB {}  checker: {verdict}",
        report.strategy,
        bytes(report.peak_bytes),
        bytes(report.lower_bound_bytes),
        ratio(report.peak_bytes, report.lower_bound_bytes)
    );
    let _ = writeln!(
        out,
        "{:<16} {:<10} {:>12} {:>12} {:>8} {:>12} {:>12} {:>6}",
        "device", "strategy", "peak", "lower bound", "peak/LB", "arena", "always-live", "pools"
    );
    for d in &report.devices {
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:>12} {:>12} {:>8} {:>12} {:>12} {:>6}",
            d.device,
            d.strategy,
            bytes(d.peak_bytes),
            bytes(d.lower_bound_bytes),
            ratio(d.peak_bytes, d.lower_bound_bytes),
            bytes(d.arena_bytes),
            bytes(d.always_live_bytes),
            d.pools.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(ratio(5, 4), "1.250");
        assert_eq!(ratio(5, 0), "-");
    }
}
