//! Device budgets: how many bytes a device class leaves a plan, and the inverse questions ("the
//! largest batch that fits") answered by checked bisection.
//!
//! A class's memory terms ([`DriverTerms`]) come from its hardware file (read by
//! memplan-formats, strictly: a missing key is an error, never a default). Under a utilization
//! `util`, the util budget is `device_bytes x util`, truncated; the driver holds
//! `driver_fixed_bytes` plus `driver_budget_per_mille` of the util budget; what is left is
//! usable by the plan. A util above the class's ceiling is an error, not a clamp.
//!
//! [`largest_fitting`] assumes `fits` is monotone (true up to some value, false after), which
//! holds for a footprint that never shrinks as a dim grows; it checks what it returns.

use serde::{Deserialize, Serialize};

/// The memory terms of a device class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverTerms {
    /// The device's memory, bytes.
    pub device_bytes: u64,
    /// What the driver holds whatever the budget (context, modules, reservations), bytes.
    pub driver_fixed_bytes: u64,
    /// The driver's per-allocation bookkeeping, per mille of the util budget.
    pub driver_budget_per_mille: u64,
    /// Host memory is the device's memory (a unified-memory SoC).
    pub unified: bool,
    /// The largest utilization a run of this class may ask for, in (0, 1].
    pub util_ceiling: f64,
}

/// Why a budget cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetError {
    #[error("the memory terms are not valid: {0}")]
    Terms(String),
    #[error("util {util} is above the class's ceiling of {ceiling}")]
    OverCeiling { util: f64, ceiling: f64 },
    #[error("util {0} is not in (0, 1]")]
    BadUtil(f64),
}

/// A device class's bytes under one utilization.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub util: f64,
    pub device_bytes: u64,
    /// `device_bytes x util`, truncated.
    pub util_budget_bytes: u64,
    /// What the driver holds of it.
    pub driver_bytes: u64,
    /// What a plan may use: the util budget less the driver's bytes (0 when they exceed it).
    pub usable_bytes: u64,
}

impl Budget {
    /// How far `footprint` is under the usable bytes (`Ok`) or over them (`Err`).
    pub fn headroom(&self, footprint: u64) -> Result<u64, u64> {
        match self.usable_bytes.checked_sub(footprint) {
            Some(headroom) => Ok(headroom),
            None => Err(footprint - self.usable_bytes),
        }
    }
}

/// The util budget: `device_bytes x util`, truncated (as a serving engine computes it).
pub fn util_budget(device_bytes: u64, util: f64) -> u64 {
    (device_bytes as f64 * util) as u64
}

impl DriverTerms {
    /// Checks the terms: per mille at most 1000, util ceiling in (0, 1], a device of some bytes.
    pub fn validate(&self) -> Result<(), BudgetError> {
        if self.device_bytes == 0 {
            return Err(BudgetError::Terms("device_bytes is 0".into()));
        }
        if self.driver_budget_per_mille > 1000 {
            return Err(BudgetError::Terms(format!(
                "driver_budget_per_mille is {}, more than 1000",
                self.driver_budget_per_mille
            )));
        }
        if !(self.util_ceiling > 0.0 && self.util_ceiling <= 1.0) {
            return Err(BudgetError::Terms(format!(
                "util_ceiling is {}, not in (0, 1]",
                self.util_ceiling
            )));
        }
        Ok(())
    }

    /// The driver's bytes under a util budget of `budget_bytes`.
    pub fn driver_bytes(&self, budget_bytes: u64) -> u64 {
        self.driver_fixed_bytes
            .saturating_add(budget_bytes / 1000 * self.driver_budget_per_mille)
    }

    /// The budget at `util`; a util outside (0, 1] or above the ceiling is an error.
    pub fn budget(&self, util: f64) -> Result<Budget, BudgetError> {
        self.validate()?;
        if !(util > 0.0 && util <= 1.0) {
            return Err(BudgetError::BadUtil(util));
        }
        if util > self.util_ceiling {
            return Err(BudgetError::OverCeiling {
                util,
                ceiling: self.util_ceiling,
            });
        }
        let util_budget_bytes = util_budget(self.device_bytes, util);
        let driver_bytes = self.driver_bytes(util_budget_bytes);
        Ok(Budget {
            util,
            device_bytes: self.device_bytes,
            util_budget_bytes,
            driver_bytes,
            usable_bytes: util_budget_bytes.saturating_sub(driver_bytes),
        })
    }
}

/// The answer of [`largest_fitting`], with its witnesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Largest {
    /// The largest value in the range that fits; `None` when not even the low end does.
    pub largest: Option<u64>,
    /// How many values `fits` was asked about.
    pub probes: u32,
}

/// The largest `x` in `lo..=hi` with `fits(x)`, by bisection: `None` when `lo` does not fit,
/// `hi` when `hi` fits. `fits` must be monotone. An empty range (`lo > hi`) answers `None`
/// without asking.
pub fn largest_fitting<E>(
    lo: u64,
    hi: u64,
    fits: &mut dyn FnMut(u64) -> Result<bool, E>,
) -> Result<Largest, E> {
    let mut probes = 0;
    let mut ask = |x: u64| {
        probes += 1;
        fits(x)
    };
    if lo > hi || !ask(lo)? {
        return Ok(Largest {
            largest: None,
            probes,
        });
    }
    if ask(hi)? {
        return Ok(Largest {
            largest: Some(hi),
            probes,
        });
    }
    // `good` fits, `bad` does not; halve the gap.
    let (mut good, mut bad) = (lo, hi);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if ask(mid)? {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(Largest {
        largest: Some(good),
        probes,
    })
}

/// The largest `x >= lo` with `fits(x)`, with no top: doubling from `lo` until a value does not
/// fit (a value whose sizes overflow must answer "does not fit", so this stops within 64
/// doublings), then bisecting between the last that fits and the first that does not. `None`
/// when `lo` does not fit. `fits` must be monotone.
pub fn largest_fitting_from<E>(
    lo: u64,
    fits: &mut dyn FnMut(u64) -> Result<bool, E>,
) -> Result<Largest, E> {
    let mut probes = 0;
    if !fits(lo)? {
        return Ok(Largest {
            largest: None,
            probes: 1,
        });
    }
    probes += 1;
    let mut good = lo;
    loop {
        let next = good.max(1).saturating_mul(2);
        if next == good {
            // u64::MAX fits: there is nothing larger.
            return Ok(Largest {
                largest: Some(good),
                probes,
            });
        }
        probes += 1;
        if !fits(next)? {
            let inner = largest_fitting(good, next - 1, fits)?;
            return Ok(Largest {
                largest: inner.largest,
                probes: probes + inner.probes,
            });
        }
        good = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn l4() -> DriverTerms {
        DriverTerms {
            device_bytes: 24_000_000_000,
            driver_fixed_bytes: 500_000_000,
            driver_budget_per_mille: 10,
            unified: false,
            util_ceiling: 0.95,
        }
    }

    #[test]
    fn the_budget_is_truncated_and_the_driver_takes_its_share() {
        let b = l4().budget(0.9).unwrap();
        assert_eq!(b.util_budget_bytes, 21_600_000_000);
        assert_eq!(b.driver_bytes, 500_000_000 + 216_000_000);
        assert_eq!(b.usable_bytes, 21_600_000_000 - 716_000_000);
        assert_eq!(b.headroom(b.usable_bytes), Ok(0));
        assert_eq!(b.headroom(b.usable_bytes + 5), Err(5));
        assert_eq!(util_budget(10, 0.33), 3);
    }

    #[test]
    fn a_util_above_the_ceiling_and_bad_terms_are_errors_never_clamped() {
        assert_eq!(
            l4().budget(0.96),
            Err(BudgetError::OverCeiling {
                util: 0.96,
                ceiling: 0.95
            })
        );
        assert!(matches!(l4().budget(0.0), Err(BudgetError::BadUtil(_))));
        let mut t = l4();
        t.driver_budget_per_mille = 1001;
        assert!(matches!(t.budget(0.5), Err(BudgetError::Terms(_))));
        let mut t = l4();
        t.util_ceiling = 1.5;
        assert!(matches!(t.budget(0.5), Err(BudgetError::Terms(_))));
    }

    #[test]
    fn bisection_edges() {
        let ok = |limit: u64| move |x: u64| Ok::<_, ()>(x <= limit);
        assert_eq!(largest_fitting(1, 64, &mut ok(0)).unwrap().largest, None);
        assert_eq!(
            largest_fitting(1, 64, &mut ok(100)).unwrap().largest,
            Some(64)
        );
        assert_eq!(
            largest_fitting(1, 64, &mut ok(17)).unwrap().largest,
            Some(17)
        );
        assert_eq!(largest_fitting(5, 5, &mut ok(5)).unwrap().largest, Some(5));
        assert_eq!(largest_fitting(6, 5, &mut ok(9)).unwrap().largest, None);
        let e = largest_fitting(1, 9, &mut |x| if x > 4 { Err("boom") } else { Ok(true) });
        assert_eq!(e, Err("boom"));
    }

    proptest! {
        #[test]
        fn bisection_finds_the_threshold_with_few_probes(lo in 0u64..1000, span in 0u64..100_000, limit in 0u64..110_000) {
            let hi = lo + span;
            let r = largest_fitting(lo, hi, &mut |x| Ok::<_, ()>(x <= limit)).unwrap();
            let expected = if limit < lo { None } else { Some(limit.min(hi)) };
            prop_assert_eq!(r.largest, expected);
            prop_assert!(r.probes <= 2 + 64 - span.max(1).leading_zeros());
        }

        #[test]
        fn doubling_finds_the_threshold_past_any_range(lo in 0u64..1000, limit in 0u64..u64::MAX) {
            let r = largest_fitting_from(lo, &mut |x| Ok::<_, ()>(x <= limit)).unwrap();
            let expected = (limit >= lo).then_some(limit);
            prop_assert_eq!(r.largest, expected);
            // At most 65 doublings and a bisection of 64 halvings (and its two ends).
            prop_assert!(r.probes <= 1 + 65 + 66);
        }
    }

    #[test]
    fn doubling_ends_at_the_largest_value_there_is() {
        let r = largest_fitting_from(3, &mut |_| Ok::<_, ()>(true)).unwrap();
        assert_eq!(r.largest, Some(u64::MAX));
    }
}
