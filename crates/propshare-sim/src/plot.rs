//! SVG plots for reports (plotters, SVG backend: no fonts or system
//! libraries needed), each written to a [`Pending`] file: whole or not at
//! all. Every chart is 900 px of plot with its legend in a column of its
//! own to the right ([`side_legend`]), so a legend never covers data.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::output::Pending;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of the plot part of a chart, px.
const PLOT_WIDTH: u32 = 900;
/// Width of the legend column right of it, px.
const LEGEND_WIDTH: u32 = 180;

/// How a legend entry is drawn: a filled box (bars) or a line (series).
#[derive(Clone, Copy, PartialEq)]
enum Mark {
    Box,
    Line,
}

/// The legend, in its own column `area` right of the plot: one entry per
/// name, as many as fit, then how many more there are.
fn side_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBAColor)],
    mark: Mark,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    let style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let (_, height) = area.dim_in_pixel();
    let fit = ((height as i32 - 50) / 18).max(1) as usize;
    let shown = if entries.len() > fit { fit - 1 } else { entries.len() };
    for (k, (name, color)) in entries.iter().take(shown).enumerate() {
        let y = 44 + 18 * k as i32;
        match mark {
            Mark::Box => area.draw(&Rectangle::new([(6, y - 5), (18, y + 5)], color.filled()))?,
            Mark::Line => area.draw(&PathElement::new(vec![(4, y), (20, y)], color.stroke_width(2)))?,
        }
        let label: String = if name.chars().count() > 24 {
            name.chars().take(23).chain(std::iter::once('…')).collect()
        } else {
            name.clone()
        };
        area.draw(&Text::new(label, (26, y), style.clone()))?;
    }
    if shown < entries.len() {
        let y = 44 + 18 * shown as i32;
        area.draw(&Text::new(format!("… {} more", entries.len() - shown), (26, y), style))?;
    }
    Ok(())
}

/// The chart area of a plot (left of its legend column).
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draw a chart `height` px tall into `path`, whole or not at all: `draw`
/// draws on the plot area and returns the legend's entries, drawn with
/// `mark` in the column to its right.
fn svg_chart(
    path: &Path,
    height: u32,
    mark: Mark,
    draw: impl FnOnce(&Area<'_>) -> Result<Vec<(String, RGBAColor)>, Box<dyn std::error::Error>>,
) -> PlotResult {
    let file = Pending::new(path)?;
    let target = file.tmp_path().to_path_buf();
    let root = SVGBackend::new(&target, (PLOT_WIDTH + LEGEND_WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(PLOT_WIDTH);
    let entries = draw(&plot)?;
    side_legend(&legend, &entries, mark)?;
    root.present()?;
    file.keep()?;
    Ok(())
}

/// Legend entries: each name in its series' palette colour.
fn palette_entries<'a>(names: impl Iterator<Item = &'a String>) -> Vec<(String, RGBAColor)> {
    names.enumerate().map(|(k, name)| (name.clone(), Palette99::pick(k).to_rgba())).collect()
}

/// A named series of (x, y) points.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// Axis scaling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic (values must be positive).
    Log,
}

/// What drawing a plot returns.
pub type PlotResult = Result<(), Box<dyn std::error::Error>>;

fn bounds(series: &[Series], axis: impl Fn(&(f64, f64)) -> f64, scale: Scale) -> (f64, f64) {
    let vals = series.iter().flat_map(|s| s.points.iter().map(&axis)).filter(|v| v.is_finite());
    let vals: Vec<f64> = match scale {
        Scale::Log => vals.filter(|v| *v > 0.0).collect(),
        Scale::Linear => vals.collect(),
    };
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return if scale == Scale::Log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    match scale {
        Scale::Log if hi / lo < 10.0 => (lo / 2.0, hi * 2.0),
        Scale::Log => (lo * 0.9, hi * 1.1),
        Scale::Linear if hi - lo < 1e-9 => (lo - 1.0, hi + 1.0),
        Scale::Linear => {
            let pad = (hi - lo) * 0.05;
            (lo - pad, hi + pad)
        }
    }
}

/// At most about `2 · buckets` points that draw like `points` (in x order):
/// the x range is cut into `buckets` equal slices and each keeps its lowest
/// and highest point, in x order, so every extreme survives. A lag series
/// of a long run has millions of points; an SVG needs a few thousand.
pub fn envelope(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else { return Vec::new() };
    if points.len() <= 2 * buckets.max(1) {
        return points.to_vec();
    }
    let span = (last.0 - first.0).max(f64::MIN_POSITIVE);
    let slice_of = |x: f64| (((x - first.0) / span * buckets as f64) as usize).min(buckets - 1);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut k = 0;
    while k < points.len() {
        let b = slice_of(points[k].0);
        let (mut lo, mut hi) = (k, k);
        let mut end = k;
        while end < points.len() && slice_of(points[end].0) == b {
            if points[end].1 < points[lo].1 {
                lo = end;
            }
            if points[end].1 > points[hi].1 {
                hi = end;
            }
            end += 1;
        }
        out.push(points[lo.min(hi)]);
        if lo != hi {
            out.push(points[lo.max(hi)]);
        }
        k = end;
    }
    out
}

/// A line chart of several series.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    scales: (Scale, Scale),
) -> PlotResult {
    svg_chart(path, 480, Mark::Line, |plot| {
        let (x0, x1) = bounds(series, |p| p.0, scales.0);
        let (y0, y1) = bounds(series, |p| p.1, scales.1);
        let mut builder = ChartBuilder::on(plot);
        builder.caption(title, ("sans-serif", 20)).margin(12).x_label_area_size(40).y_label_area_size(70);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
                for (k, s) in series.iter().enumerate() {
                    let color = Palette99::pick(k).to_rgba();
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|p| {
                            (scales.0 == Scale::Linear || p.0 > 0.0) && (scales.1 == Scale::Linear || p.1 > 0.0)
                        })
                        .collect();
                    chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
                    if pts.len() <= 40 {
                        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
                    }
                }
            }};
        }
        match scales {
            (Scale::Linear, Scale::Linear) => draw!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
            (Scale::Log, Scale::Linear) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
            (Scale::Linear, Scale::Log) => draw!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
            (Scale::Log, Scale::Log) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?),
        }
        Ok(palette_entries(series.iter().map(|s| &s.name)))
    })
}

/// One run interval for a Gantt chart.
#[derive(Clone, Debug)]
pub struct Bar {
    /// CPU.
    pub cpu: usize,
    /// Client index (colour).
    pub client: usize,
    /// Start, in the chart's x unit.
    pub start: f64,
    /// End.
    pub end: f64,
}

/// A per-CPU Gantt chart: one row per CPU, one colour per client.
pub fn gantt(path: &Path, title: &str, x_label: &str, cpus: usize, bars: &[Bar], names: &[String]) -> PlotResult {
    // Legend: one entry per client seen, at most 12; the chart is tall enough to hold it.
    let mut seen: Vec<usize> = bars.iter().map(|b| b.client).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.truncate(12);
    let height = (120 + 40 * cpus.min(32)).max(110 + 19 * seen.len());
    svg_chart(path, height as u32, Mark::Box, |plot| {
        let x0 = bars.iter().map(|b| b.start).fold(f64::INFINITY, f64::min);
        let x1 = bars.iter().map(|b| b.end).fold(f64::NEG_INFINITY, f64::max);
        let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0, x1) } else { (0.0, 1.0) };
        let rows = cpus.min(32);
        let mut chart = ChartBuilder::on(plot)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, 0f64..rows as f64)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_labels(rows)
            .y_label_formatter(&|y| format!("cpu {}", (*y as usize).min(rows.saturating_sub(1))))
            .disable_y_mesh()
            .draw()?;
        chart.draw_series(bars.iter().filter(|b| b.cpu < rows).map(|b| {
            let color = Palette99::pick(b.client).to_rgba();
            Rectangle::new([(b.start, b.cpu as f64 + 0.1), (b.end, b.cpu as f64 + 0.9)], color.filled())
        }))?;
        Ok(seen
            .iter()
            .map(|&c| (names.get(c).cloned().unwrap_or_else(|| format!("#{c}")), Palette99::pick(c).to_rgba()))
            .collect())
    })
}

/// A histogram of values (one series per label), `bins` equal-width bins.
pub fn histogram(path: &Path, title: &str, x_label: &str, series: &[Series], bins: usize) -> PlotResult {
    svg_chart(path, 480, Mark::Box, |plot| {
        let (lo, hi) = bounds(series, |p| p.0, Scale::Linear);
        let width = (hi - lo) / bins.max(1) as f64;
        let counts: Vec<Vec<u32>> = series
            .iter()
            .map(|s| {
                let mut c = vec![0u32; bins.max(1)];
                for p in &s.points {
                    let b = (((p.0 - lo) / width) as usize).min(bins.max(1) - 1);
                    c[b] += 1;
                }
                c
            })
            .collect();
        let top = counts.iter().flatten().copied().max().unwrap_or(1).max(1) as f64;
        let mut chart = ChartBuilder::on(plot)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(lo..hi, 0f64..top * 1.1)?;
        chart.configure_mesh().x_desc(x_label).y_desc("count").draw()?;
        let k = series.len().max(1) as f64;
        for (si, count) in counts.iter().enumerate() {
            let color = Palette99::pick(si).to_rgba();
            chart.draw_series(count.iter().enumerate().filter(|(_, &n)| n > 0).map(|(b, &n)| {
                let x = lo + b as f64 * width + si as f64 * width / k;
                Rectangle::new([(x, 0.0), (x + width / k, n as f64)], color.filled())
            }))?;
        }
        Ok(palette_entries(series.iter().map(|s| &s.name)))
    })
}

/// A tick value with at most three significant digits and no float noise.
fn tick(v: &f64) -> String {
    let decimals = if *v == 0.0 || v.abs() >= 100.0 { 0 } else { (2.0 - v.abs().log10().floor()) as usize };
    format!("{v:.decimals$}")
}

/// One series of a grouped bar chart: a value (or none) and a label to write
/// above the bar, per group.
pub struct BarSeries {
    /// Legend label.
    pub name: String,
    /// One value per group.
    pub values: Vec<Option<f64>>,
    /// One label per group (may be empty).
    pub labels: Vec<String>,
}

/// A grouped bar chart: one group per entry of `groups` along x, in each
/// group one bar per series, its label written above it. On a log y axis
/// (values must be positive) bars rise from below the smallest value.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    groups: &[String],
    series: &[BarSeries],
    y_scale: Scale,
) -> PlotResult {
    svg_chart(path, 480, Mark::Box, |plot| {
        let n = groups.len().max(1);
        let values = || series.iter().flat_map(|s| s.values.iter().flatten()).copied().filter(|v| v.is_finite());
        let hi = values().fold(0.0, f64::max);
        let lo = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        // Group k is centred on x = k, its bars share [k - 0.4, k + 0.4].
        let x = -0.5f64..n as f64 - 0.5;
        let mut builder = ChartBuilder::on(plot);
        builder.caption(title, ("sans-serif", 20)).margin(12).x_label_area_size(40).y_label_area_size(70);
        let name_at = |x: &f64| {
            let k = x.round();
            if (x - k).abs() < 1e-6 && k >= 0.0 {
                groups.get(k as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let width = 0.8 / series.len().max(1) as f64;
        let above = TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        macro_rules! draw {
            ($chart:expr, $floor:expr) => {{
                let mut chart = $chart;
                let floor: f64 = $floor;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(n)
                    .x_label_formatter(&name_at)
                    .y_label_formatter(&tick)
                    .x_desc(x_label)
                    .y_desc(y_label)
                    .draw()?;
                for (si, s) in series.iter().enumerate() {
                    let color = Palette99::pick(si).to_rgba();
                    let left = |g: usize| g as f64 - 0.4 + si as f64 * width;
                    let shown = |v: &Option<f64>| v.filter(|v| v.is_finite()).map(|v| v.max(floor));
                    chart.draw_series(s.values.iter().enumerate().filter_map(|(g, v)| {
                        let v = shown(v).filter(|&v| v > floor)?;
                        Some(Rectangle::new([(left(g), floor), (left(g) + width * 0.9, v)], color.filled()))
                    }))?;
                    chart.draw_series(s.values.iter().zip(&s.labels).enumerate().filter_map(|(g, (v, l))| {
                        let v = shown(v).filter(|_| !l.is_empty())?;
                        Some(Text::new(l.clone(), (left(g) + width * 0.45, v), above.clone()))
                    }))?;
                }
            }};
        }
        // Headroom above the tallest bar for its label.
        match y_scale {
            Scale::Log if lo.is_finite() => {
                // At most five decades: smaller values sit on the floor.
                let floor = lo.max(hi * 1e-5) / 2.0;
                draw!(builder.build_cartesian_2d(x, (floor..hi * 40.0).log_scale())?, floor)
            }
            _ => draw!(builder.build_cartesian_2d(x, 0f64..if hi > 0.0 { hi * 1.4 } else { 1.0 })?, 0.0),
        }
        Ok(palette_entries(series.iter().map(|s| &s.name)))
    })
}

#[cfg(test)]
mod tests {
    use super::envelope;

    /// The envelope keeps at most two points per slice, in x order, and
    /// every slice's lowest and highest point.
    #[test]
    fn envelope_keeps_every_extreme() {
        let points: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, ((i * 7919) % 1000) as f64 - 500.0)).collect();
        let e = envelope(&points, 100);
        assert!(e.len() <= 200 && e.len() >= 100, "{} points", e.len());
        assert!(e.windows(2).all(|w| w[0].0 < w[1].0));
        for slice in points.chunks(100) {
            let lo = slice.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let hi = slice.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
            let inside: Vec<f64> = e.iter().filter(|p| p.0 >= slice[0].0 && p.0 <= slice[99].0).map(|p| p.1).collect();
            assert!(inside.contains(&lo) && inside.contains(&hi));
        }
        assert_eq!(envelope(&points[..150], 100), points[..150].to_vec());
    }
}
