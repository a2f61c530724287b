//! The workspace: the tabs of the two views and the panels, the toolbar (sort, color, axis,
//! fit, exports), the view itself with its legend and selection, and the keys' help.

use crate::analysis::ExportKind;
use crate::error::WebError;
use crate::page::state::PageState;
use crate::page::url::{Panel, Tab};
use crate::views::canvas::PlotCanvas;
use crate::views::export;
use leptos::html::Input;
use leptos::prelude::*;
use memplan_human::bytes;
use memplan_render::color::{ColorBy, legend};
use memplan_render::model::RowOrder;

#[component]
pub(super) fn Views(state: PageState, search_input: NodeRef<Input>) -> impl IntoView {
    let tab_button = move |tab: Tab, label: &'static str| {
        view! {
            <button
                role="tab"
                data-testid=format!("tab-{}", tab.name())
                class:active=move || state.tab.get() == tab
                aria-selected=move || (state.tab.get() == tab).to_string()
                on:click=move |_| state.tab.set(tab)
            >
                {label}
            </button>
        }
    };
    let export_svg = move |_| {
        let Some(a) = state.analysis.get_untracked() else {
            return;
        };
        let tab = state.tab.get_untracked();
        let device = a.model.clamp_device(state.device.get_untracked());
        let arena_only = state.arena_only_untracked();
        let rows = a.model.rows(
            device,
            &state.search.get_untracked(),
            state.sort.get_untracked(),
            arena_only,
        );
        let result = export::view_svg(
            &a.model,
            tab,
            device,
            &rows,
            state.window().get_untracked(),
            state.color_by.get_untracked(),
            arena_only,
        )
        .and_then(|svg| {
            export::download_text(
                &crate::analysis::file_name(&a.source, &format!("{}.svg", tab.name())),
                "image/svg+xml",
                &svg,
            )
        });
        if let Err(e) = result {
            state.error.set(Some(WebError::Export(Box::new(e))));
        }
    };
    let export_png = move |_| {
        let Some(a) = state.analysis.get_untracked() else {
            return;
        };
        let tab = state.tab.get_untracked();
        let result = export::view_png(
            &a,
            tab,
            state.color_by.get_untracked(),
            state.device.get_untracked(),
        )
        .and_then(|url| {
            export::download_url(
                &crate::analysis::file_name(&a.source, &format!("{}.png", tab.name())),
                &url,
            )
        });
        if let Err(e) = result {
            state.error.set(Some(WebError::Export(Box::new(e))));
        }
    };
    let export_plan = move |kind| state.export(kind);
    let has_stacks = Memo::new(move |_| {
        state
            .analysis
            .with(|a| a.as_ref().is_some_and(|a| !a.model.stacks.is_empty()))
    });
    // What the arena map can show besides memplan's plan: the allocator's layout, or the plan
    // the dump came with.
    let source_layout = Memo::new(move |_| {
        state
            .analysis
            .with(|a| a.as_ref().and_then(|a| a.model.layout_source()))
            .map(|source| (source.name(), source.key()))
    });
    let panel_button = move |panel: Panel, label: &'static str, title: &'static str| {
        view! {
            <button
                data-testid=format!("tab-{}", panel.name())
                title=title
                class:active=move || state.panel.get() == panel
                aria-pressed=move || (state.panel.get() == panel).to_string()
                on:click=move |_| state.panel.update(|p| *p = if *p == panel { Panel::None } else { panel })
            >
                {label}
            </button>
        }
    };

    view! {
        <section class="views" class:embed=state.embed>
            <Show when=move || !state.embed>
                <div class="toolbar">
                    <div class="tabs" role="tablist">
                        {tab_button(Tab::Timeline, "Live spans")}
                        {tab_button(Tab::Arena, "Arena map")}
                        {panel_button(Panel::Flips, "Flips", "recompute tensors at their uses; fit a target")}
                        {panel_button(Panel::Sweep, "Sweep", "fit at many targets: footprint against recompute cost, the Pareto frontier")}
                        {panel_button(Panel::Devices, "Devices", "what fits a device: its usable memory, the headroom, the largest batch")}
                        {panel_button(Panel::Spaces, "Spaces", "where each slot lives: device, host, constant, shared")}
                        {panel_button(Panel::Compare, "Compare", "this plan against another strategy, flip set or dump, tensor by tensor")}
                        {panel_button(Panel::Advise, "Advise", "what to change: every lever the dump allows, planned and ranked by the bytes it saves")}
                        {move || has_stacks.get().then(|| panel_button(Panel::Sites, "Sites", "the live bytes over time by the line of code that allocated them"))}
                    </div>
                    <input
                        node_ref=search_input
                        class="search"
                        type="search"
                        // A dump with stacks is searched by its frames too (file, line, function).
                        placeholder=move || if has_stacks.get() { "search tensors, stacks (/)" } else { "search tensors, ops (/)" }
                        data-testid="search"
                        prop:value=move || state.search.get()
                        on:input=move |ev| {
                            state.search.set(event_target_value(&ev));
                            state.timeline_window.update(|w| if let Some(w) = w { w.y0 = 0.0 });
                        }
                    />
                    <Show when=move || state.tab.get() == Tab::Timeline>
                        <label class="control">
                            "sort "
                            <select data-testid="sort-select" on:change=move |ev| {
                                if let Some(o) = RowOrder::parse(&event_target_value(&ev)) {
                                    state.sort.set(o);
                                }
                            }>
                                {RowOrder::ALL.iter().map(|o| view! {
                                    <option value=o.name() selected=move || state.sort.get() == *o>{o.name()}</option>
                                }).collect_view()}
                            </select>
                        </label>
                    </Show>
                    <label class="control">
                        "color "
                        <select data-testid="color-select" on:change=move |ev| {
                            if let Some(c) = ColorBy::parse(&event_target_value(&ev)) {
                                state.color_by.set(c);
                            }
                        }>
                            {ColorBy::ALL.iter().map(|c| view! {
                                <option value=c.name() selected=move || state.color_by.get() == *c>{c.name()}</option>
                            }).collect_view()}
                        </select>
                    </label>
                    <label class="control" title="label the time axis with positions or step names">
                        "axis "
                        <select data-testid="axis-select" on:change=move |ev| state.axis_steps.set(event_target_value(&ev) == "steps")>
                            <option value="positions" selected=move || !state.axis_steps.get()>"positions"</option>
                            <option value="steps" selected=move || state.axis_steps.get()>"steps"</option>
                        </select>
                    </label>
                    {move || state.analysis.get().filter(|a| a.model.devices.len() > 1).map(|a| view! {
                        <label class="control">
                            "device "
                            <select data-testid="device-select" on:change=move |ev| {
                                if let Ok(d) = event_target_value(&ev).parse::<usize>() {
                                    state.device.set(d);
                                    state.arena_window.set(None);
                                    state.timeline_window.set(None);
                                }
                            }>
                                {a.model.devices.iter().enumerate().map(|(i, d)| view! {
                                    <option value=i.to_string() selected=move || state.device.get() == i>{d.id.clone()}</option>
                                }).collect_view()}
                            </select>
                        </label>
                    })}
                    {move || source_layout.get().filter(|_| state.tab.get() == Tab::Arena).map(|(name, value)| view! {
                        <label class="control" title="memplan's plan, or where the source put each buffer: its allocator's real addresses, or the plan the dump came with">
                            "layout "
                            <select data-testid="layout-select" on:change=move |ev| {
                                state.source_layout.set(event_target_value(&ev) != "plan");
                                state.arena_window.set(None);
                            }>
                                <option value="plan" selected=move || !state.source_layout.get()>"memplan's plan"</option>
                                <option value=value selected=move || state.source_layout.get()>{name}</option>
                            </select>
                        </label>
                    })}
                    <button on:click=move |_| state.window().set(None) title="F">"fit"</button>
                    <div class="exports">
                        <button data-testid="export-svg" on:click=export_svg>"SVG"</button>
                        <button data-testid="export-png" on:click=export_png>"PNG"</button>
                        <button data-testid="export-plan-json" on:click=move |_| export_plan(ExportKind::PlanJson)>"plan JSON"</button>
                        <button data-testid="export-plan-csv" on:click=move |_| export_plan(ExportKind::MinimallocCsv)>"minimalloc CSV"</button>
                    </div>
                </div>
                <div class="legend-line"><Legend state=state /><Selected state=state /></div>
                {move || match state.panel.get() {
                    Panel::Flips => Some(view! { <crate::views::flips::FlipsPanel state=state /> }.into_any()),
                    Panel::Sweep => Some(view! { <crate::views::sweep::SweepPanel state=state /> }.into_any()),
                    Panel::Devices => Some(view! { <crate::views::devices::DevicesPanel state=state /> }.into_any()),
                    Panel::Spaces => Some(view! { <crate::views::spaces::SpacesPanel state=state /> }.into_any()),
                    Panel::Compare => Some(view! { <crate::views::compare::ComparePanel state=state /> }.into_any()),
                    Panel::Sites => Some(view! { <crate::views::sites::SitesPanel state=state /> }.into_any()),
                    Panel::Advise => Some(view! { <crate::views::advise::AdvisePanel state=state /> }.into_any()),
                    Panel::None => None,
                }}
            </Show>
            {move || match state.tab.get() {
                Tab::Timeline => view! { <PlotCanvas state=state tab=Tab::Timeline /> }.into_any(),
                Tab::Arena => view! { <PlotCanvas state=state tab=Tab::Arena /> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn Legend(state: PageState) -> impl IntoView {
    move || {
        state.analysis.get().map(|a| {
            legend(&a.model, state.color_by.get())
                .into_iter()
                .map(|(label, color)| view! {
                    <span class="legend-item"><span class="swatch" style=format!("background: {}", color.css())></span>{label}</span>
                })
                .collect_view()
        })
    }
}

#[component]
fn Selected(state: PageState) -> impl IntoView {
    view! {
        <div class="selected-line">
            "selected: "
            <span data-testid="selected">
                {move || {
                    let a = state.analysis.get()?;
                    let b = a.model.buffers.get(state.selected.get()?)?;
                    Some(b.tensor.id.to_string())
                }}
            </span>
            {move || {
                let a = state.analysis.get()?;
                let b = a.model.buffers.get(state.selected.get()?)?;
                Some(format!("  ·  {}", bytes(b.size)))
            }}
            {move || state.selected.get().is_none().then(|| view! {
                <span class="muted">"none (click a tensor)"</span>
            })}
        </div>
    }
}

#[component]
pub(super) fn Help(state: PageState) -> impl IntoView {
    view! {
        <div class="help" data-testid="help" role="dialog" aria-label="Keyboard">
            <h3>"Keys"</h3>
            <table>
                <tr><td><kbd>"W"</kbd>" / "<kbd>"S"</kbd></td><td>"zoom in / out in time"</td></tr>
                <tr><td><kbd>"A"</kbd>" / "<kbd>"D"</kbd></td><td>"pan left / right"</td></tr>
                <tr><td><kbd>"F"</kbd></td><td>"fit everything"</td></tr>
                <tr><td><kbd>"Esc"</kbd></td><td>"clear the selection"</td></tr>
                <tr><td><kbd>"/"</kbd></td><td>"search tensors"</td></tr>
                <tr><td><kbd>"?"</kbd></td><td>"this help"</td></tr>
                <tr><td>"wheel, drag"</td><td>"arena map: zoom to the cursor, pan"</td></tr>
                <tr><td>"wheel, drag"</td><td>"live spans: scroll the rows, pan; ctrl-wheel zooms time"</td></tr>
                <tr><td>"click"</td><td>"select the smallest buffer under the cursor"</td></tr>
            </table>
            <button on:click=move |_| state.help.set(false)>"close"</button>
        </div>
    }
}
