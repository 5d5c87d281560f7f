//! The line under a report's title: which machine, when, on what. A report is read away from
//! the machine that made it, so it says where its numbers come from.

use std::time::{SystemTime, UNIX_EPOCH};

/// The machine line: `host vm, Linux 6.18.44, 2 CPUs available, 2026-01-01 12:00 UTC, target /path`.
pub fn machine_line(target: &str) -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let cpus = match std::thread::available_parallelism().map_or(0, |n| n.get()) {
        1 => "1 CPU".to_string(),
        n => format!("{n} CPUs"),
    };
    format!(
        "host {}, Linux {}, {cpus} available, {} UTC, target {target}",
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/osrelease"),
        utc_now()
    )
}

/// The current time as `YYYY-MM-DD HH:MM`, in UTC.
fn utc_now() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    let minute_of_day = seconds % 86_400 / 60;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        minute_of_day / 60,
        minute_of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_map_to_calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
    }
}
