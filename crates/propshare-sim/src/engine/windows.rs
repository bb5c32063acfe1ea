//! Measurement windows: each client's CPU time inside fixed time windows
//! ([`Engine::windows`](super::Engine::windows)), and its lag over the
//! windows `[k·t, (k+1)·t)` of given lengths t
//! ([`Engine::lag_windows`](super::Engine::lag_windows)).

use propshare::{Scheduler, Time};

use super::events::Event;
use super::lag::ns_of_fixed;
use super::stats::WindowLag;
use super::Engine;
use crate::fluid::{Service, FRAC};

/// One client's windowed lag for one window length, during the run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WindowState {
    /// Ideal and received service at the last edge, if the client was present then.
    edge: Option<(Service, Time)>,
    windows: u64,
    /// Extremes and sum of the window lags, fixed point.
    min: i128,
    max: i128,
    total: i128,
    max_rel: Option<f64>,
}

impl WindowState {
    /// The client is at an edge with `ideal` and `received` service
    /// (`None`: absent): close the window that ends here, open the next.
    pub(super) fn edge(&mut self, now: Option<(Service, Time)>) {
        if let (Some((i0, r0)), Some((i1, r1))) = (self.edge, now) {
            let ideal = i1 - i0;
            let lag = ideal as i128 - (((r1 - r0) as i128) << FRAC);
            if self.windows == 0 {
                (self.min, self.max) = (lag, lag);
            } else {
                (self.min, self.max) = (self.min.min(lag), self.max.max(lag));
            }
            self.windows += 1;
            self.total += lag;
            if ideal > 0 {
                let rel = (lag as f64 / ideal as f64).abs();
                self.max_rel = Some(self.max_rel.map_or(rel, |m| m.max(rel)));
            }
        }
        self.edge = now;
    }

    pub(super) fn stats(&self, length: Time) -> WindowLag {
        WindowLag {
            length,
            windows: self.windows,
            min_lag: ns_of_fixed(self.min),
            max_lag: ns_of_fixed(self.max),
            max_rel_error: self.max_rel,
            total_lag: ns_of_fixed(self.total),
        }
    }
}

impl<S: Scheduler> Engine<S> {
    /// Measure every client's lag over the windows `[k·t, (k+1)·t)` for each
    /// window length t in `lengths` (each at least 1 ns), up to the horizon:
    /// O(N) work at every window edge.
    pub fn lag_windows(&mut self, lengths: &[Time]) {
        self.lag_windows = lengths.iter().map(|&t| t.max(1)).collect();
        self.window_lag = vec![WindowState::default(); lengths.len() * self.clients.len()];
        for j in 0..lengths.len() {
            self.push(0, Event::WindowEdge(j as u32));
        }
    }

    /// Also measure each client's CPU time inside these time windows `[start, end)`.
    pub fn windows(&mut self, windows: &[(Time, Time)]) {
        self.windows = windows.to_vec();
        self.window_received = vec![0; windows.len() * self.clients.len()];
    }

    /// An edge of the windows of length `lag_windows[j]`: close every client's window, open the next.
    pub(super) fn window_edge(&mut self, j: u32) {
        let now = self.now;
        let j = j as usize;
        let lengths = self.lag_windows.len();
        for i in 0..self.clients.len() {
            let now_service = self.service_now(i).map(|r| (self.fluid.ideal(now, Self::id(i)), r));
            self.window_lag[i * lengths + j].edge(now_service);
        }
        let next = now.saturating_add(self.lag_windows[j]);
        if next <= self.cfg.horizon {
            self.push(next, Event::WindowEdge(j as u32));
        }
    }
}
