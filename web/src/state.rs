//! The page's state: what is loaded and planned, and everything the user chose. Signals are
//! `Copy`, so views take the whole state and read what they need.

use std::sync::Arc;

use leptos::prelude::*;
use memplan_core::Strategy;
use memplan_render::color::ColorBy;
use memplan_render::model::RowOrder;
use memplan_render::scene::Viewport;

use crate::analysis::{Analysis, Session};
use crate::url_state::{Tab, UrlState};

#[derive(Clone, Copy)]
pub struct PageState {
    pub analysis: RwSignal<Option<Arc<Analysis>>>,
    pub error: RwSignal<Option<String>>,
    pub strategy: RwSignal<Strategy>,
    pub tab: RwSignal<Tab>,
    /// The selected buffer (index into the view model's buffers).
    pub selected: RwSignal<Option<usize>>,
    pub device: RwSignal<usize>,
    pub sort: RwSignal<RowOrder>,
    pub color_by: RwSignal<ColorBy>,
    pub search: RwSignal<String>,
    /// The window of each view; `None` shows everything.
    pub arena_window: RwSignal<Option<Viewport>>,
    pub timeline_window: RwSignal<Option<Viewport>>,
    pub help: RwSignal<bool>,
    pub embed: bool,
    /// What is being loaded, while it is.
    pub busy: RwSignal<Option<String>>,
}

impl PageState {
    pub fn new(url: &UrlState) -> Self {
        PageState {
            analysis: RwSignal::new(None),
            error: RwSignal::new(None),
            strategy: RwSignal::new(url.strategy),
            tab: RwSignal::new(url.tab),
            selected: RwSignal::new(None),
            device: RwSignal::new(0),
            sort: RwSignal::new(url.sort),
            color_by: RwSignal::new(url.color_by),
            search: RwSignal::new(url.search.clone()),
            arena_window: RwSignal::new(None),
            timeline_window: RwSignal::new(None),
            help: RwSignal::new(false),
            embed: url.embed,
            busy: RwSignal::new(None),
        }
    }

    /// Loads `bytes` and plans them; on success the new dump replaces the one shown (selection
    /// and zoom reset), on failure the old one stays and the banner says why.
    pub fn load(self, bytes: &[u8], source: &str) -> bool {
        match Session::load(bytes, source)
            .and_then(|s| Arc::new(s).plan(self.strategy.get_untracked()))
        {
            Ok(a) => {
                self.selected.set(None);
                self.device.set(0);
                self.arena_window.set(None);
                self.timeline_window.set(None);
                self.analysis.set(Some(Arc::new(a)));
                self.error.set(None);
                true
            }
            Err(message) => {
                self.error.set(Some(message));
                false
            }
        }
    }

    /// Re-plans the loaded dump with another strategy, keeping selection and zoom.
    pub fn set_strategy(self, strategy: Strategy) {
        self.strategy.set(strategy);
        let Some(current) = self.analysis.get_untracked() else {
            return;
        };
        match current.session.plan(strategy) {
            Ok(a) => self.analysis.set(Some(Arc::new(a))),
            Err(message) => self.error.set(Some(message)),
        }
    }

    /// The window of the current view.
    pub fn window(self) -> RwSignal<Option<Viewport>> {
        match self.tab.get_untracked() {
            Tab::Timeline => self.timeline_window,
            Tab::Arena => self.arena_window,
        }
    }

    /// The URL state of the screen.
    pub fn url_state(self, source: Option<(Option<String>, Option<String>)>) -> UrlState {
        let analysis = self.analysis.get();
        let tab = self.tab.get();
        let selected = self
            .selected
            .get()
            .and_then(|b| analysis.as_ref().map(|a| a.model.buffers[b].tensor.clone()));
        let device = analysis
            .as_ref()
            .filter(|a| a.model.devices.len() > 1)
            .map(|a| {
                a.model.devices[self.device.get().min(a.model.devices.len() - 1)]
                    .id
                    .clone()
            });
        let zoom = match tab {
            Tab::Timeline => self.timeline_window.get(),
            Tab::Arena => self.arena_window.get(),
        };
        let (example, src) = source.unwrap_or_default();
        UrlState {
            tab,
            strategy: self.strategy.get(),
            selected,
            zoom,
            device,
            sort: self.sort.get(),
            color_by: self.color_by.get(),
            search: self.search.get(),
            example,
            src,
            embed: self.embed,
        }
    }
}
