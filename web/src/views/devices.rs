//! The devices panel: what fits a device. A hardware class (bundled, or a TOML file of the
//! user's) and a utilization give the usable bytes, with the driver's terms broken down; each
//! device's headroom or overflow follows from the plan. For a dump with params, a slider per
//! param re-plans as it moves, and "largest that fits" bisects a param against the device with
//! both witnesses. Every figure comes from the engine's budget and report.

use leptos::prelude::*;
use memplan_formats::hardware;

use crate::error::WebError;
use memplan_human::{bytes, bytes_against, range_text};
use wasm_bindgen_futures::JsFuture;

use crate::page::state::PageState;

/// The top of a param's slider: room above its value to find the limit.
fn slider_top(value: u64) -> u64 {
    value.saturating_mul(4).max(64)
}

#[component]
pub fn DevicesPanel(state: PageState) -> impl IntoView {
    let pick = move |name: String| {
        state.change_device(|| {
            state
                .device_class
                .set(hardware::bundled(&name).map(|c| (c.class, c.memory)))
        })
    };
    let load_toml = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|f| f.get(0)) else {
            return;
        };
        let name = file.name();
        let class = name.trim_end_matches(".toml").to_string();
        leptos::task::spawn_local(async move {
            let text = JsFuture::from(file.text())
                .await
                .ok()
                .and_then(|t| t.as_string());
            match text {
                Some(text) => state.read_hardware(class, text),
                None => state.error.set(Some(WebError::FileUnreadable { name })),
            }
        });
    };
    let budget = move || {
        let a = state.analysis.get()?;
        let b = a.summary.budget.clone()?;
        let rows = a
            .summary
            .devices
            .iter()
            .map(|d| {
                let (what, amount, class) = match (d.headroom_bytes, d.overflow_bytes) {
                    (_, Some(o)) => ("overflow", o, "bad"),
                    (Some(h), _) => ("headroom", h, "good"),
                    _ => ("", 0, ""),
                };
                view! {
                    <li data-testid="headroom" class=class data-bytes=amount.to_string() data-what=what>
                        {format!("{}: footprint {}, {what} {}", d.device, bytes(d.footprint_bytes), bytes(amount))}
                    </li>
                }
            })
            .collect_view();
        Some(view! {
            <dl class="budget">
                <div><dt>"device memory"</dt><dd>{bytes(b.device_bytes)}</dd></div>
                <div><dt>{format!("x util {:.2}", b.util)}</dt><dd>{bytes(b.util_budget_bytes)}</dd></div>
                <div><dt>"- driver"</dt><dd data-testid="driver-bytes" data-bytes=b.driver_bytes.to_string()>{bytes(b.driver_bytes)}</dd></div>
                <div class="key"><dt>"= usable"</dt><dd data-testid="usable-bytes" data-bytes=b.usable_bytes.to_string()>{bytes(b.usable_bytes)}</dd></div>
            </dl>
            <ul class="headrooms">{rows}</ul>
        })
    };
    // The param boxes are rebuilt only when the params themselves change, and each shows its
    // value through a memo: a plan arriving while one is being typed in (after another box
    // changed) neither replaces the box nor writes its unchanged value over the typing.
    let param_names = Memo::new(move |_| {
        state.analysis.with(|a| {
            a.as_ref()
                .map(|a| a.params.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        })
    });
    let params = move || {
        let names = param_names.get();
        if names.is_empty() {
            return None;
        }
        Some(names.into_iter().map(|name| {
            let value = Memo::new({
                let name = name.clone();
                move |_| {
                    state.analysis.with(|a| {
                        a.as_ref().and_then(|a| a.params.get(&name).copied()).unwrap_or(1)
                    })
                }
            });
            let has_device = move || state.device_class.get().is_some();
            let (slider_name, set_name, fits_name) = (name.clone(), name.clone(), name.clone());
            view! {
                <div class="param">
                    <label>
                        {format!("{name} ")}
                        <input type="range" min="1" max=move || slider_top(value.get()).to_string() step="1" data-testid=format!("param-{name}")
                            prop:value=move || value.get().to_string()
                            on:change=move |ev| {
                                if let Ok(v) = event_target_value(&ev).parse::<u64>() {
                                    let name = slider_name.clone();
                                    state.change_device(|| state.params.update(|p| { p.insert(name, v); }));
                                }
                            } />
                        <input type="number" min="1" class="param-value" data-testid=format!("param-value-{name}")
                            prop:value=move || value.get().to_string()
                            on:change=move |ev| {
                                if let Ok(v) = event_target_value(&ev).parse::<u64>() {
                                    let name = set_name.clone();
                                    state.change_device(|| state.params.update(|p| { p.insert(name, v); }));
                                }
                            } />
                    </label>
                    <button data-testid=format!("fits-button-{name}") disabled=move || !has_device()
                        title=move || if has_device() { "the largest value whose plan fits the device, over the param's whole range (not the slider's)" } else { "choose a device class first" }
                        on:click=move |_| state.find_largest(fits_name.clone(), 1, None)>
                        {format!("largest {name} that fits")}
                    </button>
                </div>
            }
        }).collect_view())
    };
    let fits = move || {
        let f = state.fits.get()?;
        let usable = f.budget.usable_bytes;
        let shown = |footprint: u64| bytes_against(footprint, usable);
        let text = match (f.largest, f.footprint_at_largest, f.footprint_at_next) {
            (Some(n), Some(at), Some(next)) => format!(
                "largest {} that fits: {n} (footprint {} <= {} usable); at {}: {} > {} does not fit; {} plans",
                f.param,
                shown(at),
                bytes_against(usable, at),
                n + 1,
                shown(next),
                bytes_against(usable, next),
                f.probes
            ),
            (Some(n), Some(at), None) => format!(
                "largest {} that fits: {n}, the top of the range {} (footprint {} <= {} usable); {} plans",
                f.param,
                range_text(f.lo, f.hi),
                shown(at),
                bytes_against(usable, at),
                f.probes
            ),
            _ => format!(
                "no value of {} fits {}{}",
                f.param,
                bytes(usable),
                f.footprint_at_next
                    .map_or(String::new(), |b| format!(": the least needs {}", bytes(b)))
            ),
        };
        let current = state.params.with(|p| p.get(&f.param).copied());
        let apply = f.largest.filter(|&n| Some(n) != current).map(|n| {
            let name = f.param.clone();
            view! {
                <button data-testid="fits-apply" title="set the param to it and plan"
                    on:click=move |_| {
                        let name = name.clone();
                        state.change_device(|| state.params.update(|p| { p.insert(name, n); }));
                    }>
                    {format!("apply {}={n}", f.param)}
                </button>
            }
        });
        Some(view! {
            <p data-testid="fits-result" data-largest=f.largest.map(|n| n.to_string()).unwrap_or_default()>
                {text}" "{apply}
            </p>
        })
    };
    view! {
        <div class="panel-table devices-panel" data-testid="devices-panel">
            <div class="fit-form">
                <label>
                    "device class "
                    <select data-testid="hardware-select" on:change=move |ev| pick(event_target_value(&ev))>
                        <option value="" selected=move || state.device_class.get().is_none()>"none"</option>
                        {hardware::bundled_names().into_iter().map(|n| view! {
                            <option value=n selected=move || state.device_class.get().is_some_and(|(c, _)| c == n)>{n}</option>
                        }).collect_view()}
                        {move || state.device_class.get().filter(|(c, _)| hardware::bundled(c).is_none()).map(|(c, _)| view! {
                            <option value=c.clone() selected=true>{format!("{c} (your file)")}</option>
                        })}
                    </select>
                </label>
                <label class="file-label">
                    "or a TOML file "
                    <input type="file" accept=".toml" data-testid="hardware-file" on:change=load_toml />
                </label>
                <label>
                    "util "
                    <input type="range" min="0.5" max=move || state.device_class.get().map_or(1.0, |(_, t)| t.util_ceiling).to_string() step="0.01"
                        data-testid="util-slider" prop:value=move || state.util.get().to_string()
                        on:change=move |ev| {
                            if let Ok(u) = event_target_value(&ev).parse::<f64>() {
                                state.change_device(|| state.util.set(u));
                            }
                        } />
                    <span data-testid="util-value">{move || format!("{:.2}", state.util.get())}</span>
                </label>
            </div>
            {move || if state.device_class.get().is_some() { budget().into_any() } else {
                view! { <p class="small">"Choose a device class to see what fits: the usable memory, each device's headroom, the largest batch."</p> }.into_any()
            }}
            <div class="params">{params}</div>
            {fits}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slider_leaves_room_above_the_value() {
        assert_eq!(slider_top(1), 64);
        assert_eq!(slider_top(100), 400);
        assert_eq!(slider_top(u64::MAX), u64::MAX);
    }
}
