//! The memory-spaces panel: where each slot lives (`memplan spaces`), the counts, and the
//! diagnostics, all from the engine's classification in the [`Analysis`](crate::analysis::Analysis).

use leptos::prelude::*;
use memplan_human::space_counts;

use crate::analysis::MOST_SPACE_ROWS;

use crate::page::state::PageState;

#[component]
pub fn SpacesPanel(state: PageState) -> impl IntoView {
    move || {
        let a = state.analysis.get()?;
        let Some(spaces) = a.spaces.clone() else {
            return Some(
                view! {
                    <div class="panel-table" data-testid="spaces-panel">
                        <p>"The memory spaces need every param bound: set them and plan again."</p>
                    </div>
                }
                .into_any(),
            );
        };
        // A slot is its root tensor's id; where the dump names tensors otherwise (a snapshot's
        // allocations by their line of code), the name leads and the id follows. One pass over
        // the buffers for the listed rows (a buffer lookup per row would scan them per row).
        let mut names: std::collections::HashMap<&str, Option<&str>> = spaces
            .rows
            .iter()
            .map(|r| (r.tensor.as_str(), None))
            .collect();
        for b in a.model.buffers.iter() {
            if let Some(name) = names.get_mut(&*b.tensor.id) {
                name.get_or_insert(b.tensor.display_name());
            }
        }
        let slot = |id: &str| {
            let name = names.get(id).copied().flatten().filter(|&name| name != id);
            let after =
                name.map(|_| view! { <span class="muted small">{format!(" · {id}")}</span> });
            view! { <td class="name">{name.unwrap_or(id).to_string()}{after}</td> }
        };
        Some(view! {
            <div class="panel-table" data-testid="spaces-panel">
                <p class="small" data-testid="space-counts">{space_counts(&spaces.counts)}</p>
                {(!spaces.diagnostics.is_empty()).then(|| view! {
                    <ul class="warning small" data-testid="space-diagnostics">
                        {spaces.diagnostics.iter().map(|d| view! { <li>{d.clone()}</li> }).collect_view()}
                    </ul>
                })}
                <div class="table-wrap">
                    <table class="data-table" data-testid="spaces-table">
                        <thead><tr><th>"slot"</th><th>"space"</th><th>"access"</th><th>"transfer"</th><th class="num">"bytes"</th><th>"output"</th></tr></thead>
                        <tbody>
                            {spaces.rows.iter().map(|r| view! {
                                <tr data-testid="space-row" data-tensor=r.tensor.clone()>
                                    {slot(&r.tensor)}
                                    <td>{r.space.clone()}</td>
                                    <td>{r.access.clone()}</td>
                                    <td>{r.transfer.clone()}</td>
                                    <td class="num">{r.size()}</td>
                                    <td>{r.source.clone()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    {(spaces.unlisted > 0).then(|| view! {
                        <p class="small" data-testid="spaces-more">
                            {format!("+ {} smaller slots not listed (the largest {MOST_SPACE_ROWS} and every one with an output are)", spaces.unlisted)}
                        </p>
                    })}
                </div>
            </div>
        }.into_any())
    }
}
