//! The allocation-sites panel: the live bytes over the schedule by the line of the user's code
//! that allocated them, stacked, so "which line of my model holds the memory, and when" reads at
//! a glance. From the view model alone (`ViewModel::site_series`); shown for dumps whose tensors
//! carry stacks (PyTorch snapshots and traces).

use leptos::prelude::*;
use memplan_human::bytes;

use crate::page::state::PageState;

/// How many sites the chart draws before it sums the rest.
const SITES_DRAWN: usize = 9;
/// The chart's size, pixels (scaled to the panel's width).
const SITES_CHART: (u32, u32) = (1000, 260);

#[component]
pub fn SitesPanel(state: PageState) -> impl IntoView {
    move || {
        let a = state.analysis.get()?;
        let m = &a.model;
        let device = m.clamp_device(state.device.get());
        let Some(series) = m.site_series(device, SITES_DRAWN, SITES_CHART.0 as usize) else {
            return Some(
                view! {
                    <div class="panel-table" data-testid="sites-panel">
                        <p>"This dump records no allocation stacks: a PyTorch memory snapshot or profiler trace does."</p>
                    </div>
                }
                .into_any(),
            );
        };
        let svg = memplan_render::svg::sites_svg(&series, SITES_CHART.0, SITES_CHART.1)
            .unwrap_or_else(|e| e.to_string());
        let peak = m.devices.get(device).map_or(0, |d| d.lower_bound);
        let summary = format!(
            "{} live at the peak of {} from {} allocation sites; the {} largest drawn, largest at the bottom",
            bytes(peak),
            m.devices.get(device).map_or("", |d| d.id.as_str()),
            m.peak_sites(device).len(),
            series.sites.len().min(SITES_DRAWN),
        );
        Some(
            view! {
                <div class="panel-table sites-panel" data-testid="sites-panel">
                    <p class="small" data-testid="sites-summary">{summary}</p>
                    <div class="sites-chart" data-testid="sites-chart"
                        data-sites=series.sites.len().to_string() inner_html=svg></div>
                </div>
            }
            .into_any(),
        )
    }
}
