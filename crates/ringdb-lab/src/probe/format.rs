//! Values as people read them in the report: byte counts in binary units, errnos by name.

use std::io;

/// "EINVAL: Invalid argument (os error 22)".
pub(super) fn describe_errno(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EFAULT) => "EFAULT",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::EEXIST) => "EEXIST",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENXIO) => "ENXIO",
        _ => return e.to_string(),
    };
    format!("{name}: {e}")
}

/// `8 MiB` for an exact multiple of a unit, `1.5 KiB` otherwise, `12 B` below 1 KiB.
pub(super) fn human_bytes(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{} {unit}", b / size);
        }
    }
    for (unit, size) in UNITS {
        if b >= size {
            return format!("{:.1} {unit}", b as f64 / size as f64);
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_errnos() {
        assert_eq!(human_bytes(8 << 20), "8 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12), "12 B");
        let e = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(describe_errno(&e).starts_with("EINVAL: "), "{e}");
    }
}
