//! The advise panel: "what to change", the levers the dump allows ranked by how much each lowers
//! the footprint, each measured by planning it in the worker (`Session::advise`, the table of
//! `memplan advise`). "apply" makes a row's whole scenario the page's and shows the diff of the
//! plan before against the plan after, with the footprint planned beside the one claimed.

use leptos::prelude::*;
use memplan_human::{bytes, diff_counts, footprint_change, grouped, lever_cost_text, lever_text};

use crate::page::state::PageState;

/// How many of the applied diff's changed tensors are listed (the largest size changes).
const CHANGES_LISTED: usize = 8;

#[component]
pub fn AdvisePanel(state: PageState) -> impl IntoView {
    // A first look at a dump asks by itself; a stale answer about the same dump waits for
    // "advise again".
    Effect::new(move |_| {
        let Some(source) = state
            .analysis
            .with(|a| a.as_ref().map(|a| a.source.clone()))
        else {
            return;
        };
        let asked = state
            .advice
            .with(|a| a.as_ref().is_some_and(|a| a.source == source));
        if !asked && state.busy.with(Option::is_none) {
            state.applied.set(None);
            state.advice.set(None);
            state.advise();
        }
    });
    let stale = move || {
        let asked = state
            .advice
            .with(|a| a.as_ref().map(|a| a.scenario.clone()));
        // The page's scenario as planned: the analysis's, which the worker reduced to what the
        // dump knows.
        let shown = state
            .analysis
            .with(|a| a.as_ref().map(|a| a.scenario.clone()));
        asked.is_some() && asked != shown
    };
    let header = move || {
        let advice = state.advice.get()?;
        let a = &advice.answer;
        let usable = a
            .usable_bytes
            .map_or(String::new(), |u| format!(" of {} usable", bytes(u)));
        let summary = format!(
            "footprint {}{usable}: {} levers planned, {} lower it",
            bytes(a.footprint_bytes),
            a.tried,
            a.rows.len()
        );
        Some(view! {
            <span class="small" data-testid="advice-summary">{summary}</span>
            {a.left_out.iter().map(|w| view! {
                <span class="small note" data-testid="advice-left-out">{format!("not tried: {w}")}</span>
            }).collect_view()}
        })
    };
    let table = move || {
        let advice = state.advice.get()?;
        let a = advice.answer;
        if a.rows.is_empty() {
            return Some(
                view! { <p data-testid="advice-none">"No lever the dump allows lowers this footprint."</p> }
                    .into_any(),
            );
        }
        let unit = a.cost_unit.clone();
        let usable = a.usable_bytes;
        let rows = a
            .rows
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let applied = move || state.applied.with(|x| x.as_ref().is_some_and(|x| x.row == k));
                let fits = usable.map(|u| if r.footprint_bytes <= u { "yes" } else { "no" });
                view! {
                    <tr data-testid="advice-row" data-footprint=r.footprint_bytes.to_string()
                        data-saving=r.saving_bytes.to_string() class:on=applied>
                        <td class="name">{lever_text(&r.lever)}</td>
                        <td class="num" title=format!("{} B", grouped(r.footprint_bytes))>{bytes(r.footprint_bytes)}</td>
                        <td class="num" title=format!("{} B", grouped(r.saving_bytes))>{bytes(r.saving_bytes)}</td>
                        <td>{lever_cost_text(&r.lever, &r.cost, unit.as_deref())}</td>
                        {fits.map(|f| view! { <td>{f}</td> })}
                        <td><button data-testid="advice-apply" title="plan with this lever and show the diff against the plan before"
                            on:click=move |_| state.apply_advice(k)>"apply"</button></td>
                    </tr>
                }
            })
            .collect_view();
        Some(
            view! {
                <div class="table-wrap">
                    <table class="data-table" data-testid="advice-table">
                        <thead><tr><th>"lever"</th><th class="num">"footprint"</th><th class="num">"saving"</th>
                            <th>"cost"</th>{usable.map(|_| view! { <th>"fits"</th> })}<th></th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            }
            .into_any(),
        )
    };
    let applied = move || {
        let x = state.applied.get()?;
        let planned = state
            .analysis
            .with(|a| a.as_ref().map(|a| a.summary.footprint_bytes));
        let verdict = match planned {
            Some(p) if p == x.footprint_bytes => format!("planned {}, as claimed", bytes(p)),
            Some(p) => format!(
                "planned {} ({} B), the row claimed {} B",
                bytes(p),
                grouped(p),
                grouped(x.footprint_bytes)
            ),
            None => String::new(),
        };
        let diff = x.diff.map(|d| {
            let mut changed: Vec<_> = d
                .tensors
                .iter()
                .filter(|t| t.change != memplan_engine::diff::Change::Same)
                .collect();
            changed.sort_by_key(|t| std::cmp::Reverse(t.size_delta().unsigned_abs()));
            let more = changed.len().saturating_sub(CHANGES_LISTED);
            view! {
                <p class="small" data-testid="advice-diff">
                    {format!("against the plan before: {} -> {} ({}); {}",
                        bytes(d.before.footprint_bytes), bytes(d.after.footprint_bytes),
                        footprint_change(&d), diff_counts(&d))}
                </p>
                <ul class="small advice-changes">
                    {changed.into_iter().take(CHANGES_LISTED).map(|t| view! {
                        <li>{format!("{}: {}", t.tensor, memplan_human::change_text(t))}</li>
                    }).collect_view()}
                    {(more > 0).then(|| view! { <li>{format!("and {more} more (the compare panel lists them all)")}</li> })}
                </ul>
            }
        });
        Some(view! {
            <div class="advice-applied" data-testid="advice-applied">
                <p><strong>"applied: "</strong>{x.lever.clone()}{format!(" (cost: {}); {verdict}", x.cost)}</p>
                {diff}
            </div>
        })
    };
    view! {
        <div class="panel-table advise-panel" data-testid="advise-panel">
            <div class="fit-form">
                <button data-testid="advise-button" on:click=move |_| state.advise()
                    title="plan every lever the dump allows and rank them by the bytes each saves">
                    {move || if stale() { "advise again (the plan changed)" } else { "advise" }}
                </button>
                {header}
            </div>
            {applied}
            {table}
        </div>
    }
}
