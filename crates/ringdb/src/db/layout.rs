//! The database's three files (data, write-ahead log, double-write area) and where each lives.
//!
//! Every database has the same three files, whatever holds them: a directory holds them as
//! `data.ringdb`, `wal.ringdb` and `dw.ringdb`; a raw device holds them as three regions of
//! itself ([`DeviceLayout`]); a test's simulated disk holds them as its files 0, 1 and 2. The
//! runtime knows them by [`FILE_IDS`]. [`FileSet`] names them, so that code says `log`, not
//! `[1]`: a length, an id or a region per file.
//!
//! A database without a log (durability `off`) uses only the data file; the other two lengths
//! are 0.

use super::Options;
use crate::error::LayoutError;
use ringdb_io::FileId;
use ringdb_io::Region;

/// The data file's name when `Db::open` is given a directory.
pub const DATA_FILE: &str = "data.ringdb";
/// The write-ahead log's file, beside the data file.
pub const WAL_FILE: &str = "wal.ringdb";
/// The double-write file of checkpoints, beside the data file.
pub const DW_FILE: &str = "dw.ringdb";

/// One value per file of a database: its length, its id in the runtime, its region on a
/// device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileSet<T> {
    /// The data file: page `p` at byte `p * page_size`; page 0 is the meta page.
    pub data: T,
    /// The circular write-ahead log.
    pub log: T,
    /// Where a checkpoint writes its pages before it writes them in place.
    pub double_write: T,
}

impl<T> FileSet<T> {
    /// The three values in the runtime's file order (the order of `FILE_IDS`: data, log,
    /// double-write), for APIs that take a list of files.
    pub fn into_file_order(self) -> [T; 3] {
        [self.data, self.log, self.double_write]
    }

    /// Applies `f` to each file's value.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> FileSet<U> {
        FileSet {
            data: f(self.data),
            log: f(self.log),
            double_write: f(self.double_write),
        }
    }
}

/// The files' ids in the runtime's file table (and a simulated disk's file numbers).
pub const FILE_IDS: FileSet<FileId> = FileSet {
    data: FileId(0),
    log: FileId(1),
    double_write: FileId(2),
};

/// The regions of a raw device that holds a database with a log: data first (so page 0 is at
/// offset 0, as on a file), then the log, then the double-write area, each of the last two
/// `wal_bytes` long (rounded up to a page). The layout depends only on the device's size, the
/// page size and the log size, which the meta page records. See [`DeviceLayout::plan`].
pub type DeviceLayout = FileSet<Region>;

/// Bytes of the double-write header before its page ids (see `checkpoint.rs`).
const DOUBLE_WRITE_HEADER_BYTES: u64 = 40;
/// Bytes per page id in the double-write header.
const DOUBLE_WRITE_ID_BYTES: u64 = 8;
/// The fewest data pages a device must leave for the data region.
const MIN_DATA_PAGES: u64 = 16;

impl FileSet<Region> {
    /// Plans the layout of a device of `capacity` bytes with `block`-byte blocks for pages of
    /// `ps` bytes and the log size and pool of `opts`; says why when it cannot hold one.
    pub fn plan(capacity: u64, ps: u64, block: u64, opts: &Options) -> Result<Self, LayoutError> {
        if !ps.is_multiple_of(block) {
            return Err(LayoutError::BlockAlignment {
                page_size: ps,
                block_bytes: block,
            });
        }
        let wal_bytes = opts.log_bytes_for_new(true);
        let w = wal_bytes.next_multiple_of(ps);
        if w != wal_bytes {
            return Err(LayoutError::LogAlignment {
                wal_bytes,
                page_size: ps,
            });
        }
        check_double_write_room(opts.pool_pages as u64, ps, w)?;
        let min_data = MIN_DATA_PAGES * ps;
        let usable = capacity / ps * ps;
        if usable < 2 * w + min_data {
            return Err(LayoutError::DeviceTooSmall {
                capacity_bytes: capacity,
                log_bytes: w,
                min_data_bytes: min_data,
            });
        }
        let data_len = usable - 2 * w;
        let layout = DeviceLayout {
            data: Region {
                base: 0,
                len: data_len,
            },
            log: Region {
                base: data_len,
                len: w,
            },
            double_write: Region {
                base: data_len + w,
                len: w,
            },
        };
        layout.assert_fits(capacity);
        Ok(layout)
    }

    /// Asserts that the regions lie inside a device of `capacity` bytes, in the order data,
    /// log, double-write, without overlapping: checked where the layout is planned and again
    /// where a device is opened with it.
    pub fn assert_fits(&self, capacity: u64) {
        let end = |r: &Region| r.base.checked_add(r.len).expect("region end overflows");
        assert_eq!(self.data.base, 0, "the data region starts the device");
        assert!(
            end(&self.data) <= self.log.base
                && end(&self.log) <= self.double_write.base
                && end(&self.double_write) <= capacity,
            "device regions overlap or pass the end of {capacity} bytes: {self:?}"
        );
    }
}

/// Fails unless a checkpoint of a pool of `pool_pages` fits a double-write area of
/// `area_bytes`: at most every frame plus the meta page, behind a header of 40 bytes plus 8
/// per page.
fn check_double_write_room(pool_pages: u64, ps: u64, area_bytes: u64) -> Result<(), LayoutError> {
    let pages = pool_pages + 1;
    let need = (DOUBLE_WRITE_HEADER_BYTES + DOUBLE_WRITE_ID_BYTES * pages).next_multiple_of(ps)
        + pages * ps;
    if need > area_bytes {
        return Err(LayoutError::DoubleWriteTooSmall {
            pool_pages,
            needed_bytes: need,
            area_bytes,
        });
    }
    Ok(())
}

/// How a log on a raw device is written.
#[derive(Clone, Copy, Debug)]
pub(super) struct DeviceLog {
    /// The device's block size: log records are padded to it.
    pub(super) block_bytes: usize,
    /// A fresh database: the log and double-write regions still hold what was there before.
    pub(super) wipe: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_order_matches_the_ids() {
        let order = FILE_IDS.into_file_order();
        for (i, id) in order.iter().enumerate() {
            assert_eq!(id.0 as usize, i);
        }
        let lens = FileSet {
            data: 1u64,
            log: 2,
            double_write: 3,
        };
        assert_eq!(lens.map(|l| l * 10).into_file_order(), [10, 20, 30]);
    }

    #[test]
    #[should_panic(expected = "overlap")]
    fn overlapping_regions_are_caught() {
        let r = |base, len| Region { base, len };
        let layout = DeviceLayout {
            data: r(0, 100),
            log: r(50, 100),
            double_write: r(150, 10),
        };
        layout.assert_fits(1000);
    }
}
