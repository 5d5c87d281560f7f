//! Means of time-stamp samples without the ones a preemption or an interrupt spans.
//!
//! A time-stamp counter measures wall time: on a shared machine (this one runs several builds
//! on two cores) a thread is descheduled for whole milliseconds, and the one sample that spans
//! the switch grows by a million cycles while every other sample is untouched. A plain mean
//! would spread that over all of them (under load it can come out several times the true cost);
//! dropping the samples far above the median keeps the mean of what the code itself cost.

/// Samples above this many times the median are taken to span a preemption or an interrupt.
const OUTLIER_FACTOR: u64 = 8;

/// The largest sample kept from `samples`: `OUTLIER_FACTOR` times their median.
pub(crate) fn cutoff(samples: &[u64]) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
        .max(1)
        .saturating_mul(OUTLIER_FACTOR)
}

/// The mean of `samples` without those above [`cutoff`], and how many were dropped.
pub(crate) fn mean(samples: &[u64]) -> (f64, usize) {
    let limit = cutoff(samples);
    let kept: Vec<u64> = samples.iter().copied().filter(|&s| s <= limit).collect();
    let mean = kept.iter().sum::<u64>() as f64 / kept.len().max(1) as f64;
    (mean, samples.len() - kept.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_preempted_sample_does_not_move_the_mean() {
        let mut samples = vec![100u64; 999];
        samples.push(3_000_000);
        let (m, dropped) = mean(&samples);
        assert_eq!(m, 100.0);
        assert_eq!(dropped, 1);
        // Ordinary spread stays in.
        let (m, dropped) = mean(&[80, 100, 120, 300]);
        assert_eq!((m, dropped), (150.0, 0));
        assert_eq!(mean(&[]), (0.0, 0));
    }
}
