//! How big a TPC-C database is: clause 4.3's cardinalities, scaled by the warehouse count, with
//! a small variant for tests (the same shape, fewer rows per district).

use crate::error::{check_range, BenchError, BenchSetting, Result};
use serde::Serialize;
use std::fmt;

/// The most warehouses a database may hold (keys hold the id in 4 bytes; the bound only keeps
/// a typo from starting a load that cannot finish).
pub const WAREHOUSES_MAX: u32 = 100_000;
/// Districts per warehouse in the standard (clause 4.3.3.1), and the most a warehouse may
/// have: a STOCK row holds one S_DIST_xx per district.
pub const DISTRICTS_STANDARD: u32 = 10;

/// The cardinalities of a TPC-C database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TpccScale {
    /// Warehouses (W).
    pub warehouses: u32,
    /// Rows of ITEM (100,000), and of STOCK per warehouse.
    pub items: u32,
    /// Districts per warehouse (10).
    pub districts: u32,
    /// Customers per district (3,000).
    pub customers_per_district: u32,
    /// Orders per district at load (3,000: one per customer).
    pub orders_per_district: u32,
    /// Undelivered orders per district at load, the last ones (900).
    pub new_orders_per_district: u32,
}

impl TpccScale {
    /// The standard population of clause 4.3.3.1 with `warehouses` warehouses.
    pub fn standard(warehouses: u32) -> Self {
        TpccScale {
            warehouses,
            items: 100_000,
            districts: DISTRICTS_STANDARD,
            customers_per_district: 3_000,
            orders_per_district: 3_000,
            new_orders_per_district: 900,
        }
    }

    /// A small population of the same shape, for tests and quick runs: 1,000 items, 30
    /// customers and orders per district, the last 9 of them undelivered.
    pub fn small(warehouses: u32) -> Self {
        TpccScale {
            warehouses,
            items: 1_000,
            districts: DISTRICTS_STANDARD,
            customers_per_district: 30,
            orders_per_district: 30,
            new_orders_per_district: 9,
        }
    }

    /// Refuses cardinalities the population and the transactions cannot run with.
    pub fn validate(&self) -> Result<()> {
        check_range(
            BenchSetting::Warehouses,
            self.warehouses.into(),
            1,
            WAREHOUSES_MAX.into(),
        )?;
        check_range(
            BenchSetting::Records,
            self.items.into(),
            1,
            u32::MAX as u64 - 1,
        )?;
        check_range(
            BenchSetting::Districts,
            self.districts.into(),
            1,
            DISTRICTS_STANDARD.into(),
        )?;
        let customers = self.customers_per_district.into();
        check_range(BenchSetting::Records, customers, 1, u32::MAX.into())?;
        if self.orders_per_district != self.customers_per_district {
            return Err(BenchError::TpccShape {
                scale: *self,
                rule: "one order per customer at load (orders = customers)",
            });
        }
        if self.new_orders_per_district > self.orders_per_district {
            return Err(BenchError::TpccShape {
                scale: *self,
                rule: "undelivered orders are some of the orders (new orders <= orders)",
            });
        }
        Ok(())
    }

    /// Distinct last names the customers of a district use: the first 1,000 customers take
    /// names 0..999 by number (clause 4.3.2.3), so a smaller district has fewer.
    pub fn last_names(&self) -> u32 {
        self.customers_per_district.min(1_000)
    }

    /// Rows the population writes, every table and index counted (order lines estimated at
    /// their mean of 10 per order).
    pub fn rows_estimate(&self) -> u64 {
        let w = u64::from(self.warehouses);
        let per_district = u64::from(self.customers_per_district) * 3
            + u64::from(self.orders_per_district) * 12
            + u64::from(self.new_orders_per_district);
        let per_warehouse =
            1 + u64::from(self.items) + u64::from(self.districts) * (1 + per_district);
        u64::from(self.items) + w * per_warehouse
    }
}

impl fmt::Display for TpccScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} warehouses ({} items, {} districts, {} customers and {} orders per district, {} undelivered)",
            self.warehouses,
            self.items,
            self.districts,
            self.customers_per_district,
            self.orders_per_district,
            self.new_orders_per_district
        )
    }
}
