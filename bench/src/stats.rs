//! Latency samples, percentiles, and the median and spread over runs.

use std::time::Duration;

/// Latencies of one measurement.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples(Vec<Duration>);

impl Samples {
    /// Room for `n` samples.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// Adds one.
    pub(crate) fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    /// Adds all of another's.
    pub(crate) fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The `q` quantile (0..=1) in microseconds, nearest rank.
    pub(crate) fn quantile_us(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.0.clone();
        sorted.sort();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1].as_secs_f64() * 1e6
    }

    /// p50, p99 and max, in microseconds.
    pub(crate) fn summary(&self) -> [f64; 3] {
        [
            self.quantile_us(0.5),
            self.quantile_us(0.99),
            self.quantile_us(1.0),
        ]
    }
}

/// One figure over several runs.
#[derive(Debug, Clone)]
pub(crate) struct Figure {
    /// What it measures, e.g. `handshake auto p50`.
    pub(crate) name: String,
    /// The unit, e.g. `us`, `/s`, `MiB`, `ms`.
    pub(crate) unit: &'static str,
    /// One value per run.
    pub(crate) runs: Vec<f64>,
}

impl Figure {
    /// The median of the runs.
    pub(crate) fn median(&self) -> f64 {
        let mut v = self.runs.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    /// Smallest and largest run.
    pub(crate) fn spread(&self) -> (f64, f64) {
        let min = self.runs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    }
}

/// Figures gathered as runs repeat, in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// The figures.
    pub(crate) figures: Vec<Figure>,
}

impl Report {
    /// Records one run's value of figure `name`.
    pub(crate) fn add(&mut self, name: &str, unit: &'static str, value: f64) {
        match self.figures.iter_mut().find(|f| f.name == name) {
            Some(figure) => figure.runs.push(value),
            None => self.figures.push(Figure {
                name: name.to_owned(),
                unit,
                runs: vec![value],
            }),
        }
    }

    /// The median of figure `name`.
    pub(crate) fn median(&self, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|f| f.name == name)
            .map(Figure::median)
    }

    /// The table: figure, median, spread over runs.
    pub(crate) fn table(&self) -> String {
        let width = self
            .figures
            .iter()
            .map(|f| f.name.len())
            .max()
            .unwrap_or(10);
        let mut out = format!(
            "{:<width$}  {:>12}  {:>25}  runs\n",
            "figure", "median", "spread (min .. max)"
        );
        for f in &self.figures {
            let (min, max) = f.spread();
            out.push_str(&format!(
                "{:<width$}  {:>12}  {:>25}  {}\n",
                f.name,
                format!("{} {}", fmt(f.median()), f.unit),
                format!("{} .. {}", fmt(min), fmt(max)),
                f.runs.len()
            ));
        }
        out
    }

    /// The figures as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.figures
                .iter()
                .map(|f| {
                    let (min, max) = f.spread();
                    serde_json::json!({
                        "figure": f.name, "unit": f.unit, "median": f.median(),
                        "min": min, "max": max, "runs": f.runs,
                    })
                })
                .collect(),
        )
    }
}

/// A number with sensible precision.
fn fmt(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        let mut s = Samples::default();
        for us in 1..=100 {
            s.push(Duration::from_micros(us));
        }
        assert_eq!(s.summary(), [50.0, 99.0, 100.0]);
        let mut r = Report::default();
        for v in [3.0, 1.0, 2.0] {
            r.add("x", "us", v);
        }
        assert_eq!(r.median("x"), Some(2.0));
        assert_eq!(r.figures[0].spread(), (1.0, 3.0));
        assert!(r.table().contains("x"));
    }
}
