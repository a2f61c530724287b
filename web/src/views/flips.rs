//! The flips panel: the remat candidates with a toggle each, the footprint against the plan
//! without flips, and a target to fit with its plan log. Every number comes from the engine
//! (the candidates and the baseline from the [`Analysis`](crate::analysis::Analysis), the log
//! from [`fit`](crate::analysis::fit)); toggling re-plans where the dump lives.
//!
//! The table's rows are keyed by candidate: a toggle changes a row's state and the figures, not
//! the rows, so a re-plan does not rebuild (and re-lay out) a table of hundreds of rows.

use std::collections::{HashMap, HashSet};

use leptos::prelude::*;
use memplan_engine::CandidateRow;
use memplan_engine::answers::TargetAnswer;
use memplan_human::bytes;

use crate::page::state::PageState;

/// The change of `now` against `baseline`, signed, in words.
fn delta(now: u64, baseline: u64) -> String {
    if now == baseline {
        "no change".into()
    } else if now < baseline {
        format!("-{}", bytes(baseline - now))
    } else {
        format!("+{}", bytes(now - baseline))
    }
}

/// The most candidates the table lists besides the recomputed ones.
const MOST_ROWS: usize = 200;

/// Whether the loaded dump lists no remat candidates: the flips and sweep panels then say why
/// there is nothing to flip, fit or sweep, in place of controls that could only answer the
/// baseline.
pub fn no_candidates(state: PageState) -> Memo<bool> {
    Memo::new(move |_| {
        state
            .analysis
            .with(|a| a.as_ref().is_some_and(|a| a.candidates.is_empty()))
    })
}

/// What the flips and sweep panels say in place of their controls for a dump with no remat
/// candidates.
pub fn why_no_candidates() -> impl IntoView {
    view! {
        <p class="muted" data-testid="no-candidates">
            "This dump has no remat candidates: nothing in it can be recomputed, so there is nothing to flip, fit or sweep. "
            "A PyTorch snapshot or profiler trace, a minimalloc CSV, an XLA buffer assignment and a TFLite model give buffers without the ops that would compute them again; "
            "a memplan JSON dump lists its candidates in "<code>"remat_candidates"</code>" (or, without that list, has one derived from its steps, as an ONNX model does)."
        </p>
    }
}

#[component]
pub fn FlipsPanel(state: PageState) -> impl IntoView {
    let summary = move || {
        let a = state.analysis.get()?;
        let recomputed = a.candidates.iter().filter(|c| c.flipped).count();
        let footprint = a.summary.footprint_bytes;
        Some(view! {
            <p class="flips-head">
                {format!("{} candidates, {recomputed} recomputed. Footprint {}", a.candidates.len(), bytes(footprint))}
                {a.baseline.as_ref().map(|b| b.footprint_bytes).map(|b| view! {
                    " against "
                    <span data-testid="baseline-bytes" data-bytes=b.to_string()>{bytes(b)}</span>
                    " without flips: "
                    <strong data-testid="flip-delta" data-bytes=(i128::from(footprint) - i128::from(b)).to_string()>{delta(footprint, b)}</strong>
                })}
            </p>
        })
    };
    let fit = move || state.fit();
    // What a row shows that a plan does not change: its key. The largest MOST_ROWS candidates
    // and every recomputed one are listed, in the dump's order; the rest are counted (a dump of
    // fifty thousand candidates would otherwise build as many rows).
    let rows = Memo::new(move |_| {
        state.analysis.with(|a| {
            let Some(a) = a else {
                return (Vec::new(), 0);
            };
            let mut by_size: Vec<&CandidateRow> = a.candidates.iter().collect();
            by_size.sort_by(|x, y| y.bytes.cmp(&x.bytes).then_with(|| x.tensor.cmp(&y.tensor)));
            let mut listed: HashSet<&str> = (by_size.iter().take(MOST_ROWS))
                .map(|c| c.tensor.as_str())
                .collect();
            listed.extend((a.candidates.iter().filter(|c| c.flipped)).map(|c| c.tensor.as_str()));
            let rows: Vec<_> = (a.candidates.iter())
                .filter(|c| listed.contains(c.tensor.as_str()))
                .map(|c| (c.tensor.clone(), c.bytes, c.recompute_cost))
                .collect();
            let unlisted = a.candidates.len() - rows.len();
            (rows, unlisted)
        })
    });
    let inlined = Memo::new(move |_| {
        state.analysis.with(|a| {
            a.iter()
                .flat_map(|a| &a.candidates)
                .filter(|c| c.flipped)
                .map(|c| c.tensor.clone())
                .collect::<HashSet<_>>()
        })
    });
    // Each row's state is a signal of its own that one effect sets when it changes: a toggle
    // then updates one row, not a memo per row re-run over hundreds of rows.
    let row_states = StoredValue::new(HashMap::<String, RwSignal<bool>>::new());
    Effect::new(move |_| {
        inlined.with(|set| {
            row_states.with_value(|rows| {
                for (tensor, on) in rows {
                    let now = set.contains(tensor);
                    if on.get_untracked() != now {
                        on.set(now);
                    }
                }
            })
        })
    });
    let none = no_candidates(state);
    let shown = move || if none.get() { "none" } else { "" };
    view! {
        <div class="flips" data-testid="flips-panel">
            {move || if none.get() { why_no_candidates().into_any() } else { summary().into_any() }}
            <form class="fit-form" style:display=shown on:submit=move |ev| { ev.prevent_default(); fit(); }>
                <label>
                    "target "
                    // `budget-input` is an earlier issue's name for the target field.
                    <input data-testid="budget-input" class="search" placeholder="512MiB, 1.5GB, bytes or minimize"
                        prop:value=move || state.target.get()
                        on:input=move |ev| state.target.set(event_target_value(&ev)) />
                </label>
                <button type="submit" data-testid="fit-button"
                    title="from no flips, recompute the candidates that relieve the most per cost until the footprint fits the target">"fit to target"</button>
                {move || (!state.flips.get().is_empty()).then(|| view! {
                    <button type="button" data-testid="clear-flips" on:click=move |_| {
                        state.flips.set(Vec::new());
                        state.set_strategy(state.strategy.get_untracked());
                    }>"clear flips"</button>
                })}
            </form>
            <FitLogView state=state />
            <div class="table-wrap" style:display=shown>
                <table class="data-table flips-grid" data-testid="flips-table">
                    <thead><tr><th>"recompute"</th><th>"tensor"</th><th class="num">"size"</th><th class="num" title="the work of recomputing it at its uses">"cost"</th>
                        <th class="num" title="the bytes it relieves alone, scored by the last fit's first round">"solo relief"</th>
                        <th class="num" title="solo relief per unit of recompute cost">"relief / cost"</th><th>"state"</th></tr></thead>
                    <tbody>
                        <For each=move || rows.get().0 key=Clone::clone children=move |(tensor, size, cost)| {
                            let unit = state.analysis.with_untracked(|a| a.as_ref().and_then(|a| a.cost_unit.clone()));
                            let on = RwSignal::new(inlined.with_untracked(|set| set.contains(&tensor)));
                            row_states.update_value(|rows| {
                                rows.insert(tensor.clone(), on);
                            });
                            let gone = tensor.clone();
                            // The panel may go first: then there is nothing to remove from.
                            on_cleanup(move || {
                                row_states.try_update_value(|rows| rows.remove(&gone));
                            });
                            let solo = {
                                let tensor = tensor.clone();
                                Memo::new(move |_| state.fit_log.with(|log| {
                                    log.as_ref()?.solo.iter().find(|s| s.tensor == tensor).map(|s| (s.relief_bytes, s.recompute_cost))
                                }))
                            };
                            let relief = move || solo.get().map_or_else(|| "-".to_string(), |(r, _)| memplan_human::signed_bytes(r));
                            let relief_exact = move || solo.get().map_or_else(String::new, |(r, _)| r.to_string());
                            let per_cost = move || solo.get().map_or_else(
                                || "-".to_string(),
                                |(r, cost)| format!("{:.4} B per unit", r as f64 / cost.max(1) as f64),
                            );
                            let toggled = tensor.clone();
                            view! {
                                <tr class:on=on>
                                    <td><input type="checkbox" data-testid=format!("flip-{tensor}")
                                        prop:checked=on
                                        on:change=move |_| state.toggle_flip(&toggled) /></td>
                                    <td class="name">{tensor.clone()}</td>
                                    <td class="num">{bytes(size)}</td>
                                    <td class="num" title=format!("{} {}", memplan_human::grouped(cost), unit.as_deref().unwrap_or("(the dump's unit of work)"))>{memplan_human::work(cost, unit.as_deref())}</td>
                                    <td class="num" data-testid=format!("solo-{tensor}") data-bytes=relief_exact title=move || format!("{} B", relief_exact())>{relief}</td>
                                    <td class="num">{per_cost}</td>
                                    <td>{move || if on.get() { "recomputed" } else { "stored" }}</td>
                                </tr>
                            }
                        } />
                    </tbody>
                </table>
                {move || {
                    let unlisted = rows.with(|r| r.1);
                    (unlisted > 0).then(|| view! {
                        <p class="small" data-testid="flips-more">
                            {format!("+ {unlisted} smaller candidates not listed (the largest {MOST_ROWS} and every recomputed one are)")}
                        </p>
                    })
                }}
            </div>
        </div>
    }
}

#[component]
fn FitLogView(state: PageState) -> impl IntoView {
    move || {
        state.fit_log.get().map(|log| {
            let verdict = if log.within_target {
                "within target"
            } else {
                "over target: no more flips help"
            };
            // Exact: two fits a byte apart differ here too.
            let target = match log.target {
                TargetAnswer::Bytes(b) => format!("{} B ({})", memplan_human::grouped(b), bytes(b)),
                TargetAnswer::Minimize(_) => "the least footprint".into(),
            };
            view! {
                <details class="fit-log" data-testid="fit-log" open>
                    <summary>
                        {format!("fit to {target}: {} -> {} for a recompute cost of {}; {verdict}; {} scored, {} cut",
                            bytes(log.baseline_bytes), bytes(log.final_bytes), memplan_human::work(log.recompute_cost, log.cost_unit.as_deref()), log.considered, log.dropped)}
                    </summary>
                    <ol class="fit-flips">
                        {log.flips.iter().map(|f| view! {
                            <li data-testid="fit-flip" title=format!("relieves {} B, cost {}", f.relief_bytes, memplan_human::grouped(f.recompute_cost))>
                                {format!("{}: relieves {}, cost {}", f.tensor, memplan_human::signed_bytes(f.relief_bytes), memplan_human::work(f.recompute_cost, log.cost_unit.as_deref()))}
                            </li>
                        }).collect_view()}
                    </ol>
                    <ul class="fit-events small">
                        {log.log.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view()}
                    </ul>
                </details>
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_signed() {
        assert_eq!(delta(100, 300), "-200 B");
        assert_eq!(delta(300, 100), "+200 B");
        assert_eq!(delta(5, 5), "no change");
    }
}
