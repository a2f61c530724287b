//! The link follows the screen: a new dump, view, strategy, device or focus is a history entry
//! (Back walks them); zoom, selection, search and order replace the current one. Back and
//! Forward show what the link they land on says.

use leptos::prelude::*;
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;

use crate::page::examples::DEFAULT_EXAMPLE;
use crate::page::state::{Origin, PageState, Restore};
use crate::page::url::UrlState;

/// The part of the link that makes a history entry when it changes: what is shown, not where
/// the eye is on it.
pub(super) fn history_key(u: &UrlState) -> String {
    UrlState {
        selected: None,
        zoom: None,
        search: String::new(),
        sort: RowOrder::default(),
        color_by: ColorBy::default(),
        axis_steps: false,
        target: String::new(),
        ..u.clone()
    }
    .to_query()
}

/// Writes the page's state into its link: a history entry when what is shown changed.
pub(super) fn write_link(state: PageState, key: StoredValue<String>) {
    // A dump on its way (a load not answered yet) leaves the link as it is: it names what is
    // coming (a link followed, Back) until the plan arrives and the screen shows it.
    if state.restore.with_value(Option::is_some) {
        return;
    }
    let u = untrack(|| state.url_state());
    let query = u.to_query();
    let Some(w) = web_sys::window() else { return };
    let current = w.location().search().unwrap_or_default();
    if current.trim_start_matches('?') == query {
        return;
    }
    let path = w.location().pathname().unwrap_or_default();
    let target = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    let Ok(history) = w.history() else { return };
    let next = history_key(&u);
    let null = wasm_bindgen::JsValue::NULL;
    if next != key.get_value() && state.analysis.with_untracked(Option::is_some) {
        key.set_value(next);
        let _ = history.push_state_with_url(&null, "", Some(&target));
    } else {
        let _ = history.replace_state_with_url(&null, "", Some(&target));
    }
}

/// Shows what the link says after Back or Forward: the view, strategy, example and the rest.
pub(super) fn follow_link(state: PageState, key: StoredValue<String>) {
    let url = UrlState::parse(&super::location_search());
    key.set_value(history_key(&url));
    state.tab.set(url.tab);
    state.panel.set(url.panel);
    state.sort.set(url.sort);
    state.color_by.set(url.color_by);
    state.search.set(url.search.clone());
    state.arena_only.set(url.arena_only);
    state.axis_steps.set(url.axis_steps);
    let origin = state.origin.get_untracked();
    let restore = Restore {
        against: url.against.clone(),
        selected: url.selected.clone(),
        device: url.device.clone(),
        zoom: url.zoom,
        origin: Origin {
            example: url.example.clone(),
            src: url.src.clone(),
            file: url.file.clone(),
            posted: url.posted.clone(),
        },
        routine: url.routine.clone(),
    };
    let same_dump = origin.example == url.example
        && origin.src == url.src
        && origin.file == url.file
        && origin.posted == url.posted;
    if !same_dump {
        if let Some(e) = url
            .example
            .as_deref()
            .and_then(crate::page::examples::named)
            .or(
                (url.src.is_none() && url.file.is_none() && url.posted.is_none())
                    .then_some(DEFAULT_EXAMPLE),
            )
        {
            state.set_choices(&url.choices());
            state.target.set(url.target.clone());
            state.fit_log.set(None);
            state.util.set(url.util);
            state.device_class.set(
                url.device_class
                    .as_deref()
                    .and_then(memplan_formats::hardware::bundled)
                    .map(|c| (c.class, c.memory)),
            );
            state.forget_fits();
            state.restore.set_value(Some(restore.clone()));
            state.load_example(e, restore.origin);
            return;
        }
        // A URL or a file: load the page afresh for it.
        if let Some(w) = web_sys::window() {
            let _ = w.location().reload();
        }
        return;
    }
    // Another routine of the program shown: it opens under the scenario it kept.
    let routine = (url.routine.as_ref()).and_then(|id| {
        state
            .program
            .with_untracked(|p| p.as_ref()?.routines.iter().position(|r| &r.routine == id))
    });
    if let Some(index) = routine.filter(|&i| i != state.routine.get_untracked()) {
        state.open_routine(index, Some(restore));
        return;
    }
    let hardware = url
        .device_class
        .as_deref()
        .and_then(memplan_formats::hardware::bundled)
        .map(|c| (c.class, c.memory));
    if state.strategy.get_untracked() != url.strategy
        || state.work_limit.get_untracked() != url.work_limit
        || state.precision_classes.get_untracked() != url.precision_classes
        || state.pool_cap.get_untracked() != url.pool_cap
        || state.order.get_untracked() != url.order
        || state.flips.get_untracked() != url.flips
        || state.params.get_untracked() != url.params
        || state.util.get_untracked() != url.util
        || state.device_class.get_untracked() != hardware
    {
        state.flips.set(url.flips.clone());
        state.params.set(url.params.clone());
        state.util.set(url.util);
        state.device_class.set(hardware);
        state.work_limit.set(url.work_limit);
        state.precision_classes.set(url.precision_classes);
        state.pool_cap.set(url.pool_cap);
        state.order.set(url.order);
        state.set_strategy(url.strategy);
    }
    if let Some(a) = state.analysis.get_untracked() {
        let device = a.model.device_or_main(url.device.as_deref());
        state.device.set(device);
        state
            .selected
            .set(url.selected.as_deref().and_then(|id| a.model.buffer_of(id)));
    }
    state.window().set(url.zoom);
}
