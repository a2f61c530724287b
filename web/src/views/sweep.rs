//! The sweep panel: fit at evenly spaced targets from the minimized footprint to the baseline,
//! drawn (footprint and recompute cost against target, Pareto points filled, the exhaustive
//! optimum dashed where it was computed) and listed; a point's row applies its flips. The chart
//! is plotters' SVG from memplan-render, made from numbers only.

use leptos::prelude::*;
use memplan_human::bytes;

use wasm_bindgen::JsCast;

use crate::analysis::SWEEP_CHART;
use crate::page::state::PageState;

/// A click on the chart: the nearest budget's flips, planned. The SVG keeps its aspect inside
/// its box (centred), so the click is mapped back to the chart's own pixels first.
fn pick(state: PageState, ev: &leptos::ev::MouseEvent) {
    let Some(view) = state.sweep.get_untracked() else {
        return;
    };
    let Some(svg) = ev
        .current_target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .and_then(|d| d.query_selector("svg").ok().flatten())
    else {
        return;
    };
    let rect = svg.get_bounding_client_rect();
    let (w, h) = (f64::from(SWEEP_CHART.0), f64::from(SWEEP_CHART.1));
    let scale = (rect.width() / w).min(rect.height() / h);
    if scale <= 0.0 {
        return;
    }
    let left = rect.left() + (rect.width() - w * scale) / 2.0;
    let x = (f64::from(ev.client_x()) - left) / scale;
    if let Some(k) = view.point_at(x) {
        state.apply_flips(view.answer.points[k].flips.clone());
    }
}

#[component]
pub fn SweepPanel(state: PageState) -> impl IntoView {
    let result = move || {
        let s = state.sweep.get()?;
        let summary = format!(
            "{} targets over {} candidates{}{}",
            s.answer.points.len(),
            s.answer.candidates,
            if s.answer.exhaustive {
                ", with the exhaustive optimum"
            } else {
                ""
            },
            if s.cancelled {
                "; cancelled: the targets fitted before it"
            } else {
                ""
            }
        );
        let exhaustive = s.answer.exhaustive;
        let rows = s
            .answer.points
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let flips = p.flips.clone();
                let unit = s.answer.cost_unit.as_deref();
                let optimum = exhaustive.then(|| {
                    let cost = p.exhaustive_cost.map_or_else(|| "-".to_string(), |c| memplan_human::work(c, unit));
                    view! { <td class="num">{cost}</td> }
                });
                view! {
                    <tr class:on=p.pareto>
                        <td><button data-testid=format!("sweep-point-{k}") title="plan with this point's flips"
                            on:click=move |_| state.apply_flips(flips.clone())>"apply"</button></td>
                        <td class="num" title=format!("{} B", memplan_human::grouped(p.target_bytes))>{bytes(p.target_bytes)}</td>
                        <td class="num" data-bytes=p.footprint_bytes.to_string() title=format!("{} B", memplan_human::grouped(p.footprint_bytes))>{bytes(p.footprint_bytes)}</td>
                        <td class="num" title=memplan_human::grouped(p.recompute_cost)>{memplan_human::work(p.recompute_cost, unit)}</td>
                        {optimum}
                        <td class="num">{p.flips.len()}</td>
                        <td class:bad=!p.within_target title=if p.within_target { "" } else { "its footprint is over its target: no flips the fit found reach it" }>
                            {if p.pareto { "yes" } else if !p.within_target { "missed" } else { "" }}
                        </td>
                    </tr>
                }
            })
            .collect_view();
        let fronts = (s.answer.given_order.as_deref())
            .map(|given| memplan_human::front_sentence(&s.answer.points, given));
        Some(view! {
            <p class="small" data-testid="sweep-summary">{summary}</p>
            {fronts.map(|f| view! { <p class="small" data-testid="sweep-given-order">{f}</p> })}
            <div class="sweep-body">
            <div class="sweep-chart" data-testid="sweep-chart" title="click a target to plan with its flips"
                on:click=move |ev| pick(state, &ev)
                inner_html=s.svg().unwrap_or_else(|e| e.to_string())></div>
            <div class="table-wrap">
                <table class="data-table" data-testid="sweep-table">
                    <thead><tr><th></th><th class="num">"target"</th><th class="num">"footprint"</th>
                        <th class="num">"cost"</th>
                        {exhaustive.then(|| view! { <th class="num" title="the exhaustive optimum's recompute cost">"optimum"</th> })}
                        <th class="num">"flips"</th><th>"Pareto"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            </div>
        })
    };
    let none = crate::views::flips::no_candidates(state);
    view! {
        <div class="panel-table sweep-panel" data-testid="sweep-panel">
            {move || none.get().then(crate::views::flips::why_no_candidates)}
            <form class="fit-form" style:display=move || if none.get() { "none" } else { "" } on:submit=move |ev| { ev.prevent_default(); state.run_sweep(); }>
                <label>
                    "targets "
                    <input type="number" min="2" max="256" data-testid="sweep-points" class="param-value"
                        prop:value=move || state.sweep_points.get().to_string()
                        on:change=move |ev| {
                            if let Ok(n) = event_target_value(&ev).parse::<usize>() {
                                state.sweep_points.set(n.clamp(2, 256));
                            }
                        } />
                </label>
                <button type="submit" data-testid="sweep-button"
                    title="fit at evenly spaced targets from the least footprint any flips reach to the footprint without flips">"sweep"</button>
            </form>
            {result}
        </div>
    }
}
