//! Backing off: the shadow steps aside while the API server is under load, and comes back by
//! itself.
//!
//! Three signals pause it (docs/engine.md, "Backing off"):
//! - a shadow request answered 429 Too Many Requests (API Priority and Fairness rejected it, or
//!   `--max-requests-inflight` was reached): the comparison it belonged to is dropped, counted as
//!   paused;
//! - a control request answered 429 (after its client's own retries);
//! - the control's requests slowing down: over each window of [`LatencyRule::window`] control
//!   requests (watches excluded), the median latency is above [`LatencyRule::factor`] times the
//!   baseline *and* above the baseline plus [`LatencyRule::floor`]. The baseline is the first
//!   window's median, then follows each window that is not slow (four fifths the old, one fifth
//!   the new), so a slow drift moves it and a sudden rise does not.
//!
//! A pause lasts [`Backoff::initial`], doubled for each pause that follows the previous one within
//! its own length after it ended, up to [`Backoff::max`]; a `Retry-After` longer than that is
//! honoured (up to `max`). Signals during a pause do not lengthen it. While paused, no comparison
//! starts: the control runs alone and the reconcile is counted as skipped (`paused`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the shadow stays away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first pause (default 1 s).
    pub initial: Duration,
    /// The longest pause (default 5 min).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_mins(5),
        }
    }
}

/// When the control's requests count as slowed down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyRule {
    /// Control requests per judged window (default 32).
    pub window: usize,
    /// A window is slow above this many times the baseline (default 3) ...
    pub factor: f64,
    /// ... and above the baseline plus this (default 100 ms), so a fast server's jitter is no
    /// signal.
    pub floor: Duration,
}

impl Default for LatencyRule {
    fn default() -> Self {
        Self {
            window: 32,
            factor: 3.0,
            floor: Duration::from_millis(100),
        }
    }
}

/// What paused the shadow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A shadow request was answered 429.
    ShadowThrottled,
    /// A control request was answered 429.
    ControlThrottled,
    /// The control's requests slowed down ([`LatencyRule`]).
    ControlSlow,
}

impl Signal {
    /// Every signal.
    pub const ALL: [Self; 3] = [
        Self::ShadowThrottled,
        Self::ControlThrottled,
        Self::ControlSlow,
    ];

    /// Its name in metrics (`reason`).
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::ShadowThrottled => "shadow-throttled",
            Self::ControlThrottled => "control-throttled",
            Self::ControlSlow => "control-slow",
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::ShadowThrottled => "a shadow request was answered 429 Too Many Requests",
            Self::ControlThrottled => "a control request was answered 429 Too Many Requests",
            Self::ControlSlow => "the control's requests slowed down",
        }
    }
}

/// The pause state of one process's shadow (held by its shadow's budget,
/// `engine::budget::ShadowBudget`).
#[derive(Debug)]
pub struct Pressure {
    /// `false`: never pauses (signals are ignored).
    enabled: bool,
    backoff: Backoff,
    rule: LatencyRule,
    state: Mutex<State>,
    pauses: AtomicU64,
    /// Pauses begun, by [`Signal`] (in `Signal::ALL`'s order).
    by_signal: [AtomicU64; 3],
    refused: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// The end of the current (or last) pause.
    until: Option<Instant>,
    /// The length of the last pause.
    last: Duration,
    /// Pauses in a row (each within its predecessor's length after it ended).
    streak: u32,
    window: Vec<Duration>,
    baseline: Option<Duration>,
}

impl Default for Pressure {
    fn default() -> Self {
        Self::new(Backoff::default(), LatencyRule::default())
    }
}

impl Pressure {
    /// A pause state with these rules, not paused.
    #[must_use]
    pub fn new(backoff: Backoff, rule: LatencyRule) -> Self {
        Self {
            enabled: true,
            backoff,
            rule: LatencyRule {
                window: rule.window.max(1),
                ..rule
            },
            state: Mutex::new(State::default()),
            pauses: AtomicU64::new(0),
            by_signal: Default::default(),
            refused: AtomicU64::new(0),
        }
    }

    /// Never pauses: every signal is ignored (an unlimited budget's default, for the embedded
    /// simulator, whose injected faults and latencies must not make a run's data depend on the
    /// machine's speed).
    #[must_use]
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Whether it pauses at all.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Its backoff.
    #[must_use]
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the shadow is paused at `now`; a refused comparison is counted.
    pub fn refuses_at(&self, now: Instant) -> bool {
        let paused = self.state().until.is_some_and(|until| now < until);
        if paused {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        paused
    }

    /// Whether the shadow is paused at `now` (nothing counted).
    #[must_use]
    pub fn paused_at(&self, now: Instant) -> bool {
        self.state().until.is_some_and(|until| now < until)
    }

    /// A signal at `now`, with the server's `Retry-After` if it gave one: pauses the shadow
    /// unless it already is. Returns the pause begun, if any.
    pub fn signal(
        &self,
        now: Instant,
        signal: Signal,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        let mut state = self.state();
        Self::pause(&mut state, self.backoff, now, signal, retry_after)
            .inspect(|_| self.count(signal))
    }

    fn pause(
        state: &mut State,
        backoff: Backoff,
        now: Instant,
        signal: Signal,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        if state.until.is_some_and(|until| now < until) {
            return None;
        }
        state.streak = match state.until {
            Some(until) if now < until + state.last => state.streak.saturating_add(1),
            _ => 0,
        };
        let doubled = backoff
            .initial
            .saturating_mul(1u32.checked_shl(state.streak.min(31)).unwrap_or(u32::MAX));
        let length = doubled
            .max(retry_after.unwrap_or_default())
            .min(backoff.max);
        state.until = Some(now + length);
        state.last = length;
        tracing::warn!(
            reason = signal.as_str(),
            pause_seconds = length.as_secs_f64(),
            in_a_row = state.streak + 1,
            "the shadow pauses: the control runs alone until the pause ends, each skipped comparison counted as paused"
        );
        Some(length)
    }

    /// A control request (not a watch) answered after `latency`, at `now`: judged with its
    /// window ([`LatencyRule`]). Returns the pause begun, if any.
    pub fn control_latency(&self, now: Instant, latency: Duration) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        let mut state = self.state();
        state.window.push(latency);
        if state.window.len() < self.rule.window {
            return None;
        }
        let mut window = std::mem::take(&mut state.window);
        window.sort_unstable();
        let median = window[window.len() / 2];
        let Some(baseline) = state.baseline else {
            state.baseline = Some(median);
            return None;
        };
        let slow = median.as_secs_f64() > self.rule.factor * baseline.as_secs_f64()
            && median > baseline + self.rule.floor;
        if slow {
            return Self::pause(&mut state, self.backoff, now, Signal::ControlSlow, None)
                .inspect(|_| self.count(Signal::ControlSlow));
        }
        state.baseline = Some((baseline * 4 + median) / 5);
        None
    }

    fn count(&self, signal: Signal) {
        self.pauses.fetch_add(1, Ordering::Relaxed);
        let i = Signal::ALL.iter().position(|s| *s == signal).unwrap_or(0);
        self.by_signal[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Pauses begun by `signal`.
    #[must_use]
    pub fn pauses_by(&self, signal: Signal) -> u64 {
        let i = Signal::ALL.iter().position(|s| *s == signal).unwrap_or(0);
        self.by_signal[i].load(Ordering::Relaxed)
    }

    /// Pauses begun.
    #[must_use]
    pub fn pauses(&self) -> u64 {
        self.pauses.load(Ordering::Relaxed)
    }

    /// Comparisons refused while paused.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The seconds of a `Retry-After` header, if it has them (the API server sends whole seconds).
#[must_use]
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// The control's client, watched: each answer's latency (watches excluded) and every 429 go to
/// the shadow's [`Pressure`]. Nothing about the request or its answer changes. A pressure that
/// never pauses ([`Pressure::disabled`]) watches nothing: the client is returned as it is.
#[must_use]
pub fn watched(control: kube::Client, pressure: std::sync::Arc<Pressure>) -> kube::Client {
    if !pressure.enabled() {
        return control;
    }
    let namespace = control.default_namespace().to_owned();
    kube::Client::new(
        ControlWatch {
            inner: control,
            pressure,
        },
        namespace,
    )
}

#[derive(Clone)]
struct ControlWatch {
    inner: kube::Client,
    pressure: std::sync::Arc<Pressure>,
}

impl tower::Service<http::Request<kube::client::Body>> for ControlWatch {
    type Response = http::Response<kube::client::Body>;
    type Error = tower::BoxError;
    type Future = futures_util::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let watch = request
                .uri()
                .query()
                .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
            let started = Instant::now();
            let response = this.inner.send(request).await?;
            let now = Instant::now();
            let pressure = &this.pressure;
            if response.status() == http::StatusCode::TOO_MANY_REQUESTS {
                pressure.signal(
                    now,
                    Signal::ControlThrottled,
                    retry_after(response.headers()),
                );
            }
            if !watch {
                pressure.control_latency(now, now - started);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_throttle_pauses_doubling_in_a_row_and_resets_after_a_quiet_spell() {
        let p = Pressure::new(
            Backoff {
                initial: ms(100),
                max: ms(1000),
            },
            LatencyRule::default(),
        );
        let t0 = Instant::now();
        assert_eq!(p.signal(t0, Signal::ShadowThrottled, None), Some(ms(100)));
        // During the pause: refused, and a second signal does not lengthen it.
        assert!(p.refuses_at(t0 + ms(99)));
        assert_eq!(p.signal(t0 + ms(50), Signal::ControlThrottled, None), None);
        assert!(!p.refuses_at(t0 + ms(100)));
        // Right after it ended: twice as long, then four times, capped at max.
        assert_eq!(
            p.signal(t0 + ms(150), Signal::ShadowThrottled, None),
            Some(ms(200))
        );
        assert_eq!(
            p.signal(t0 + ms(400), Signal::ShadowThrottled, None),
            Some(ms(400))
        );
        assert_eq!(
            p.signal(t0 + ms(900), Signal::ShadowThrottled, None),
            Some(ms(800))
        );
        assert_eq!(
            p.signal(t0 + ms(1800), Signal::ShadowThrottled, None),
            Some(ms(1000))
        );
        // Quiet for longer than the last pause after it ended: back to the first length.
        assert_eq!(
            p.signal(t0 + ms(4000), Signal::ShadowThrottled, None),
            Some(ms(100))
        );
        assert_eq!((p.pauses(), p.refused()), (6, 1));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_longest_pause() {
        let p = Pressure::new(
            Backoff {
                initial: ms(100),
                max: Duration::from_secs(10),
            },
            LatencyRule::default(),
        );
        let t0 = Instant::now();
        assert_eq!(
            p.signal(t0, Signal::ShadowThrottled, Some(Duration::from_secs(3))),
            Some(Duration::from_secs(3))
        );
        let t1 = t0 + Duration::from_mins(1);
        assert_eq!(
            p.signal(t1, Signal::ShadowThrottled, Some(Duration::from_mins(1))),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn the_control_slowing_down_pauses_and_jitter_does_not() {
        let rule = LatencyRule {
            window: 4,
            factor: 3.0,
            floor: ms(100),
        };
        let p = Pressure::new(Backoff::default(), rule);
        let t0 = Instant::now();
        let feed = |latencies: &[u64]| {
            latencies
                .iter()
                .filter_map(|&l| p.control_latency(t0, ms(l)))
                .next_back()
        };
        // Baseline 10 ms; a window of 30-60 ms is 4x the baseline but within the floor: no pause.
        assert_eq!(feed(&[10, 10, 10, 10]), None);
        assert_eq!(feed(&[60, 60, 60, 60]), None);
        // The baseline followed (20 ms); one slow request in a window is no signal either.
        assert_eq!(feed(&[18, 18, 18, 900]), None);
        // A window whose median is 500 ms: paused.
        assert_eq!(feed(&[500, 500, 500, 10]), Some(Duration::from_secs(1)));
        assert!(p.paused_at(t0));
    }

    #[test]
    fn disabled_never_pauses() {
        let p = Pressure::disabled();
        let t0 = Instant::now();
        assert_eq!(p.signal(t0, Signal::ShadowThrottled, None), None);
        assert!(!p.refuses_at(t0));
        assert_eq!(p.pauses(), 0);
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
