//! Sizes as people write and read them: bytes in binary units, digits grouped in threes, and
//! a byte size parsed from `512MiB` or `1.5GB`. Pure functions of numbers and text, shared by
//! every layer that shows or reads a size (the views' axes, the CLI, the page).

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

/// A count of work (a recompute cost: FLOPs, or the dump's own unit of work) with an SI
/// prefix: `452984832` as `452.98 M`, `1500` as `1.50 k`, `999` as `999`.
pub fn si(n: u64) -> String {
    const PREFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let mut value = n as f64;
    let mut prefix = 0;
    while value >= 1000.0 && prefix + 1 < PREFIXES.len() {
        value /= 1000.0;
        prefix += 1;
    }
    if prefix == 0 {
        n.to_string()
    } else {
        format!("{value:.2} {}", PREFIXES[prefix])
    }
}

/// A recompute cost in the dump's `unit` of work (`FLOPs`) with an SI prefix, `452.98 MFLOPs`;
/// without a unit, [`si`] alone.
pub fn work(n: u64, unit: Option<&str>) -> String {
    match unit {
        None => si(n),
        Some(unit) => {
            let value = si(n);
            match value.split_once(' ') {
                Some((number, prefix)) => format!("{number} {prefix}{unit}"),
                None => format!("{value} {unit}"),
            }
        }
    }
}

/// A change of bytes (a flip's relief, which a harmful flip makes negative) in binary units,
/// with its sign when negative: `-2.00 KiB`.
pub fn signed_bytes(change: i128) -> String {
    let magnitude = u64::try_from(change.unsigned_abs()).unwrap_or(u64::MAX);
    if change < 0 {
        format!("-{}", bytes(magnitude))
    } else {
        bytes(magnitude)
    }
}

/// `1048576` as `1,048,576`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Reads a byte size as people write it: `4096`, `512MiB`, `1.5GB`, `2 GiB` (binary units
/// KiB..TiB, decimal KB..TB, and B). `None` when it is not one, or past 2^64.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "tib" | "t" => 1 << 40,
        _ => return None,
    };
    if number.is_empty() {
        return None;
    }
    match number.split_once('.') {
        None => number.parse::<u64>().ok()?.checked_mul(scale),
        Some((whole, fraction)) => {
            // Exact decimal arithmetic: whole x scale + fraction x scale / 10^digits.
            if fraction.is_empty() || fraction.len() > 18 || fraction.contains('.') {
                return None;
            }
            let whole: u64 = if whole.is_empty() {
                0
            } else {
                whole.parse().ok()?
            };
            let digits: u64 = fraction.parse().ok()?;
            let denominator = 10u128.pow(fraction.len() as u32);
            let part = u128::from(digits) * u128::from(scale) / denominator;
            let total = u128::from(whole) * u128::from(scale) + part;
            u64::try_from(total).ok()
        }
    }
}

/// The ratio of two byte counts, as `1.234`, or `-` when the denominator is 0.
///
/// Three decimals, and more where three would round a gap away: a footprint over its bound never
/// reads `1.000` (1.38 MiB over 12.99 GiB reads `1.0001`, and a gap too small even for six
/// decimals reads `> 1.000`).
pub fn ratio(peak: u64, lower_bound: u64) -> String {
    if lower_bound == 0 {
        return "-".into();
    }
    let r = peak as f64 / lower_bound as f64;
    let shown = format!("{r:.3}");
    if peak <= lower_bound || shown != "1.000" {
        return shown;
    }
    (4..=6)
        .map(|digits| format!("{r:.digits$}"))
        .find(|s| s.trim_end_matches('0') != "1.")
        .unwrap_or_else(|| "> 1.000".into())
}

#[cfg(test)]
mod tests {
    use super::{si, signed_bytes};

    #[test]
    fn changes_of_bytes_keep_their_sign() {
        assert_eq!(signed_bytes(16_777_216), "16.00 MiB");
        assert_eq!(signed_bytes(-2048), "-2.00 KiB");
        assert_eq!(signed_bytes(0), "0 B");
    }

    #[test]
    fn counts_of_work_take_si_prefixes() {
        assert_eq!(si(999), "999");
        assert_eq!(si(1500), "1.50 k");
        assert_eq!(si(452_984_832), "452.98 M");
        assert_eq!(si(u64::MAX), "18.45 E");
        assert_eq!(work(452_984_832, Some("FLOPs")), "452.98 MFLOPs");
        assert_eq!(work(999, Some("FLOPs")), "999 FLOPs");
        assert_eq!(work(452_984_832, None), "452.98 M");
    }

    use super::*;

    #[test]
    fn byte_sizes_parse_as_people_write_them() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("1.5GB"), Some(1_500_000_000));
        assert_eq!(parse_bytes(" 2 GiB "), Some(2 << 30));
        assert_eq!(parse_bytes("0.5KiB"), Some(512));
        assert_eq!(parse_bytes("16EiB"), None);
        assert_eq!(parse_bytes("99999999999TB"), None);
        assert_eq!(parse_bytes("1..5GB"), None);
        assert_eq!(parse_bytes("MiB"), None);
        assert_eq!(parse_bytes("-1"), None);
    }

    #[test]
    fn counts_group_their_digits_by_three() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_048_576), "1,048,576");
        assert_eq!(grouped(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(ratio(5, 4), "1.250");
        assert_eq!(ratio(5, 0), "-");
        assert_eq!(ratio(4, 4), "1.000");
        // A gap three decimals would hide is shown.
        let gib = 1u64 << 30;
        assert_eq!(ratio(13 * gib + (1 << 20), 13 * gib), "1.0001");
        assert_eq!(ratio(13 * gib + 1, 13 * gib), "> 1.000");
    }
}
