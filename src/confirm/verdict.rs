//! From two measurements (as flagged, as fixed) to a verdict: the arithmetic, with no
//! libtorch in sight, so the plain `cargo test` covers it.
//!
//! Figures are compared within one run, flagged against fixed, never against an
//! absolute: a difference counts when it clears a floor and the noise of the samples.

use super::{
    Confirmation, DeviceInfo, Measurement, Metric, Scenario, Sizes, VariantFigures, Verdict, WARMUP,
};

/// Below this many bytes per iteration a growth is not counted (allocator rounding,
/// caches of the runtime).
pub const GROWTH_FLOOR: f64 = 1024.0;
/// Below this many bytes a peak or retained difference is not counted...
pub const BYTES_FLOOR: f64 = 64.0 * 1024.0;
/// ...nor below this share of the model's parameter bytes.
pub const BYTES_SHARE: f64 = 0.02;
/// Under this growth per iteration, a confirmed leak is called slow.
pub const SLOW_LEAK: f64 = 64.0 * 1024.0;
/// No-zero-grad: the flagged gradient norm must grow at least this much, and this
/// many times more than the fixed one.
pub const GRAD_GROWTH: f64 = 2.0;

/// Least-squares slope of `samples` against their index (bytes per iteration).
pub fn slope(samples: &[i64]) -> f64 {
    let n = samples.len();
    if n < 2 {
        return 0.0;
    }
    let mean_x = (n as f64 - 1.0) / 2.0;
    let mean_y = samples.iter().map(|&y| y as f64).sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, &y) in samples.iter().enumerate() {
        let dx = i as f64 - mean_x;
        sxy += dx * (y as f64 - mean_y);
        sxx += dx * dx;
    }
    sxy / sxx
}

/// Standard error of [`slope`]: how far the slope could be off from the scatter of the
/// samples around the fitted line.
pub fn slope_stderr(samples: &[i64]) -> f64 {
    let n = samples.len();
    if n < 3 {
        return 0.0;
    }
    let b = slope(samples);
    let mean_x = (n as f64 - 1.0) / 2.0;
    let mean_y = samples.iter().map(|&y| y as f64).sum::<f64>() / n as f64;
    let (mut sse, mut sxx) = (0.0, 0.0);
    for (i, &y) in samples.iter().enumerate() {
        let dx = i as f64 - mean_x;
        let fit = mean_y + b * dx;
        sse += (y as f64 - fit).powi(2);
        sxx += dx * dx;
    }
    (sse / (n as f64 - 2.0) / sxx).sqrt()
}

/// `8.0 KiB`, `96.0 MiB`, `512 B` (binary units; negative values keep their sign).
pub fn format_bytes(b: f64) -> String {
    let sign = if b < 0.0 { "-" } else { "" };
    let a = b.abs();
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if a < 1024.0 {
        return format!("{sign}{a:.0} B");
    }
    let mut v = a / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{sign}{v:.1} {unit}")
}

/// `format_bytes` with a `+` on positive values.
fn signed(b: f64) -> String {
    if b > 0.0 {
        format!("+{}", format_bytes(b))
    } else {
        format_bytes(b)
    }
}

/// The figure a metric compares, for one variant.
pub fn value(metric: Metric, m: &Measurement) -> f64 {
    match metric {
        Metric::RetainedPerIteration => slope(&m.samples),
        Metric::ExtraPeak => (m.peak_bytes - m.baseline_bytes) as f64,
        Metric::ExtraRetained => (m.final_bytes - m.baseline_bytes) as f64,
    }
}

/// Last gradient norm over the first (how much the gradients piled up).
pub fn grad_growth(m: &Measurement) -> Option<f64> {
    let first = *m.grad_norms.first()?;
    let last = *m.grad_norms.last()?;
    (first > 0.0 && first.is_finite() && last.is_finite()).then(|| last / first)
}

/// The verdict on one scenario from its two measurements.
pub fn judge(
    scenario: Scenario,
    sizes: Sizes,
    iterations: u32,
    device: &DeviceInfo,
    flagged: Measurement,
    fixed: Measurement,
) -> Confirmation {
    let metric = scenario.metric();
    let (runs_flagged, runs_fixed) = scenario.variants();
    let vf = value(metric, &flagged);
    let vx = value(metric, &fixed);
    let diff = vf - vx;
    let param_bytes = flagged.param_bytes.max(fixed.param_bytes) as f64;
    let threshold = match metric {
        Metric::RetainedPerIteration => {
            let noise = slope_stderr(&flagged.samples).max(slope_stderr(&fixed.samples));
            (4.0 * noise).max(GROWTH_FLOOR)
        }
        Metric::ExtraPeak | Metric::ExtraRetained => (BYTES_SHARE * param_bytes).max(BYTES_FLOOR),
    };
    let gf = grad_growth(&flagged);
    let gx = grad_growth(&fixed);
    let cuda_free = device
        .free_bytes
        .filter(|_| device.device.starts_with("cuda"));
    let total_iterations = WARMUP + iterations;

    let mut oom_after = None;
    let (verdict, summary) = match (flagged.oom_at_iteration, fixed.oom_at_iteration) {
        (Some(_), Some(_)) => (
            Verdict::Skipped,
            "both variants ran out of memory: the sizes are too large for this device".to_owned(),
        ),
        (None, Some(k)) => (
            Verdict::Skipped,
            format!("the fixed variant ran out of memory at iteration {k} but the flagged one did not: the sizes are too close to this device's limit"),
        ),
        (Some(k), None) => (
            Verdict::Confirmed,
            format!(
                "ran out of memory at iteration {k} as flagged; fixed, all {total_iterations} iterations ran"
            ),
        ),
        (None, None) => match metric {
            Metric::RetainedPerIteration => {
                let figures = format!(
                    "{}/iteration as flagged, {}/iteration fixed",
                    signed(vf),
                    signed(vx)
                );
                // On a GPU, say what the host keeps too (the graph's nodes live there).
                let host = slope(&flagged.host_samples) - slope(&fixed.host_samples);
                let host = if host > GROWTH_FLOOR {
                    format!("; host memory {} per iteration", signed(host))
                } else {
                    String::new()
                };
                if diff > threshold {
                    let mut s = format!("{} retained per iteration ({figures})", signed(diff));
                    match cuda_free {
                        Some(free) if vf > 0.0 => {
                            let n = (free as f64 / vf).floor() as u64;
                            oom_after = Some(n);
                            s.push_str(&format!(
                                "; out of memory after ~{n} iterations ({} free)",
                                format_bytes(free as f64)
                            ));
                        }
                        _ => s.push_str(&format!(
                            "; 1 GiB after ~{} iterations",
                            (1024.0 * 1024.0 * 1024.0 / diff).round() as u64
                        )),
                    }
                    if diff < SLOW_LEAK {
                        s.push_str(": a slow leak (the graph's nodes, not its activations)");
                    }
                    s.push_str(&host);
                    (Verdict::Confirmed, s)
                } else {
                    (
                        Verdict::NotConfirmed,
                        format!(
                            "no growth beyond noise: {figures} (threshold {}/iteration){host}",
                            format_bytes(threshold)
                        ),
                    )
                }
            }
            Metric::ExtraPeak => {
                let grads = match (gf, gx) {
                    (Some(gf), Some(gx)) => format!(
                        "gradient norm grew x{gf:.1} over {total_iterations} steps (x{gx:.1} fixed)"
                    ),
                    _ => String::new(),
                };
                let grads_grew = matches!((gf, gx), (Some(gf), Some(gx)) if gf >= GRAD_GROWTH && gf >= GRAD_GROWTH * gx.max(1.0));
                let peak = format!(
                    "peak {} ({} as flagged, {} fixed, above the live bytes before the steps)",
                    signed(diff),
                    format_bytes(vf),
                    format_bytes(vx)
                );
                let s = if grads.is_empty() {
                    peak
                } else {
                    format!("{grads}; {peak}")
                };
                if grads_grew || diff > threshold {
                    (Verdict::Confirmed, s)
                } else {
                    (
                        Verdict::NotConfirmed,
                        format!(
                            "no difference beyond noise: {s} (threshold {})",
                            format_bytes(threshold)
                        ),
                    )
                }
            }
            Metric::ExtraRetained => {
                let figures = format!(
                    "{} as flagged, {} fixed; the weights take {}",
                    signed(vf),
                    signed(vx),
                    format_bytes(param_bytes)
                );
                if diff > threshold {
                    let mut s = format!("{} kept after the conversion ({figures})", signed(diff));
                    if let Some(free) = cuda_free {
                        s.push_str(&format!(" of {} free", format_bytes(free as f64)));
                    }
                    (Verdict::Confirmed, s)
                } else {
                    (
                        Verdict::NotConfirmed,
                        format!(
                            "no memory cost beyond noise: {figures} (threshold {})",
                            format_bytes(threshold)
                        ),
                    )
                }
            }
        },
    };

    let figures = |m: Measurement, runs: &'static str, v: f64, g: Option<f64>| VariantFigures {
        runs,
        value_bytes: v,
        measurement: m,
        grad_norm_growth: g,
    };
    Confirmation {
        verdict,
        summary,
        scenario: scenario.name(),
        metric: Some(metric),
        device: device.name.clone(),
        memory: device.memory.clone(),
        sizes,
        warmup_iterations: WARMUP,
        iterations,
        flagged: Some(figures(flagged, runs_flagged, vf, gf)),
        fixed: Some(figures(fixed, runs_fixed, vx, gx)),
        difference_bytes: Some(diff),
        threshold_bytes: Some(threshold),
        device_free_bytes: device.free_bytes,
        device_total_bytes: device.total_bytes,
        oom_after_iterations: oom_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn growth(start: i64, per: i64, n: usize) -> Measurement {
        let samples: Vec<i64> = (0..n as i64)
            .map(|i| start + per * i + (i % 3) * 50)
            .collect();
        Measurement {
            baseline_bytes: start,
            final_bytes: *samples.last().unwrap(),
            peak_bytes: *samples.iter().max().unwrap(),
            samples,
            param_bytes: 6 << 20,
            ..Default::default()
        }
    }

    fn cpu() -> DeviceInfo {
        DeviceInfo {
            device: "cpu".into(),
            name: "CPU".into(),
            memory: "live heap (mallinfo2)".into(),
            ..Default::default()
        }
    }

    fn sizes() -> Sizes {
        Sizes::Builtin {
            batch: 16,
            seq: 64,
            hidden: 256,
            layers: 2,
        }
    }

    #[test]
    fn arithmetic() {
        assert_eq!(slope(&[10, 20, 30, 40]), 10.0);
        assert_eq!(slope(&[5]), 0.0);
        assert_eq!(slope_stderr(&[10, 20, 30, 40]), 0.0);
        assert!(slope_stderr(&[0, 100, 0, 100, 0]) > 0.0);
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(8192.0), "8.0 KiB");
        assert_eq!(format_bytes(96.0 * 1024.0 * 1024.0), "96.0 MiB");
        assert_eq!(format_bytes(-1536.0), "-1.5 KiB");
        assert_eq!(format_bytes(3.0 * 1024f64.powi(3)), "3.0 GiB");
    }

    #[test]
    fn slow_leak_confirmed_on_cpu() {
        let c = judge(
            Scenario::KeepLoss,
            sizes(),
            20,
            &cpu(),
            growth(1 << 20, 8192, 20),
            growth(1 << 20, 0, 20),
        );
        assert_eq!(c.verdict, Verdict::Confirmed, "{}", c.summary);
        assert!(
            c.summary.starts_with("+8.0 KiB retained per iteration"),
            "{}",
            c.summary
        );
        assert!(
            c.summary.contains("1 GiB after ~131072 iterations"),
            "{}",
            c.summary
        );
        assert!(c.summary.contains("slow leak"), "{}", c.summary);
        assert_eq!(c.line(), format!("confirmed on CPU: {}", c.summary));
    }

    #[test]
    fn gpu_projection_and_noise() {
        let gpu = DeviceInfo {
            device: "cuda:0".into(),
            name: "NVIDIA H100 80GB HBM3".into(),
            free_bytes: Some(80 << 30),
            total_bytes: Some(80 << 30),
            ..Default::default()
        };
        let c = judge(
            Scenario::EvalGrad,
            sizes(),
            20,
            &gpu,
            growth(1 << 30, 96 << 20, 20),
            growth(1 << 30, 0, 20),
        );
        assert_eq!(c.verdict, Verdict::Confirmed);
        assert_eq!(c.oom_after_iterations, Some(853));
        assert!(
            c.summary.contains("out of memory after ~853 iterations"),
            "{}",
            c.summary
        );
        assert!(!c.summary.contains("slow leak"));

        // Keeping the loss on a GPU: 512 B of device memory per step (the scalar), the
        // graph's nodes in host memory.
        let mut f = growth(1 << 30, 512, 20);
        f.host_samples = growth(1 << 20, 53 << 10, 20).samples;
        let mut x = growth(1 << 30, 0, 20);
        x.host_samples = growth(1 << 20, 0, 20).samples;
        let c = judge(Scenario::KeepLoss, sizes(), 20, &gpu, f, x);
        assert_eq!(c.verdict, Verdict::NotConfirmed, "{}", c.summary);
        assert!(
            c.summary.starts_with("no growth beyond noise"),
            "{}",
            c.summary
        );
        assert!(
            c.summary.ends_with("; host memory +53.0 KiB per iteration"),
            "{}",
            c.summary
        );
    }

    #[test]
    fn oom_in_the_flagged_variant_is_a_confirmation() {
        let mut f = growth(1 << 20, 8192, 5);
        f.oom_at_iteration = Some(4);
        let c = judge(
            Scenario::KeepOutput,
            sizes(),
            20,
            &cpu(),
            f,
            growth(1 << 20, 0, 20),
        );
        assert_eq!(c.verdict, Verdict::Confirmed);
        assert!(c.summary.contains("ran out of memory at iteration 4"));
        let mut f = growth(1 << 20, 0, 5);
        f.oom_at_iteration = Some(1);
        let mut x = f.clone();
        x.oom_at_iteration = Some(2);
        let c = judge(Scenario::KeepOutput, sizes(), 20, &cpu(), f, x);
        assert_eq!(c.verdict, Verdict::Skipped);
    }

    #[test]
    fn conversions_and_gradients() {
        let conv = |extra: i64| Measurement {
            baseline_bytes: 10 << 20,
            final_bytes: (10 << 20) + extra,
            peak_bytes: (10 << 20) + extra,
            param_bytes: 6 << 20,
            ..Default::default()
        };
        let c = judge(
            Scenario::DtypeCopy,
            sizes(),
            20,
            &cpu(),
            conv(9 << 20),
            conv(3 << 20),
        );
        assert_eq!(c.verdict, Verdict::Confirmed);
        assert!(
            c.summary.starts_with("+6.0 MiB kept after the conversion"),
            "{}",
            c.summary
        );
        let c = judge(
            Scenario::DtypeRedundant,
            sizes(),
            20,
            &cpu(),
            conv(100),
            conv(0),
        );
        assert_eq!(c.verdict, Verdict::NotConfirmed);
        assert!(
            c.summary.starts_with("no memory cost beyond noise"),
            "{}",
            c.summary
        );

        let steps = |norms: Vec<f64>, peak: i64| Measurement {
            baseline_bytes: 1 << 20,
            peak_bytes: (1 << 20) + peak,
            param_bytes: 6 << 20,
            grad_norms: norms,
            ..Default::default()
        };
        let c = judge(
            Scenario::NoZeroGrad,
            sizes(),
            20,
            &cpu(),
            steps(vec![1.0, 15.0, 30.0], 12 << 20),
            steps(vec![1.0, 1.0, 1.1], 6 << 20),
        );
        assert_eq!(c.verdict, Verdict::Confirmed);
        assert!(
            c.summary
                .starts_with("gradient norm grew x30.0 over 30 steps (x1.1 fixed); peak +6.0 MiB"),
            "{}",
            c.summary
        );
    }
}
