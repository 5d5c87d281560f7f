//! The TPC-C tables of a database: nine tables and two indexes, each a table (B+tree) of the
//! engine, and a meta table that records the scale and C_LOAD, which is how a database is
//! recognised as loaded (and with which scale).

use super::codec::{Row, RowError, RowReader, RowWriter};
use super::random::Constants;
use super::scale::TpccScale;
use crate::error::{BenchError, Result};
use ringdb::{DbHandle, LocalDb, TableId};

/// The key of the meta row.
pub(crate) const META_KEY: &[u8] = b"tpcc";
/// The meta row's format version.
const META_VERSION: u8 = 1;

/// Every table's name, in the order [`TpccTables`] holds them.
pub const TABLE_NAMES: [&str; 12] = [
    "tpcc.warehouse",
    "tpcc.district",
    "tpcc.customer",
    "tpcc.customer_by_name",
    "tpcc.history",
    "tpcc.new_order",
    "tpcc.order",
    "tpcc.order_by_customer",
    "tpcc.order_line",
    "tpcc.item",
    "tpcc.stock",
    "tpcc.meta",
];

/// The ids of the TPC-C tables of one database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TpccTables {
    /// WAREHOUSE.
    pub warehouse: TableId,
    /// DISTRICT.
    pub district: TableId,
    /// CUSTOMER.
    pub customer: TableId,
    /// The index of customers by (warehouse, district, last name, first name).
    pub customer_by_name: TableId,
    /// HISTORY.
    pub history: TableId,
    /// NEW-ORDER.
    pub new_order: TableId,
    /// ORDER.
    pub order: TableId,
    /// The index of orders by (warehouse, district, customer, order).
    pub order_by_customer: TableId,
    /// ORDER-LINE.
    pub order_line: TableId,
    /// ITEM.
    pub item: TableId,
    /// STOCK.
    pub stock: TableId,
    /// The scale and C_LOAD the database was loaded with.
    pub meta: TableId,
}

impl TpccTables {
    /// Builds the set from one id per name of [`TABLE_NAMES`], in that order.
    pub(crate) fn from_ids(ids: [TableId; 12]) -> Self {
        let [warehouse, district, customer, customer_by_name, history, new_order, order, order_by_customer, order_line, item, stock, meta] =
            ids;
        TpccTables {
            warehouse,
            district,
            customer,
            customer_by_name,
            history,
            new_order,
            order,
            order_by_customer,
            order_line,
            item,
            stock,
            meta,
        }
    }

    /// The name of table `id` (one of [`TABLE_NAMES`]), "another table" for any other id.
    pub(crate) fn name_of(&self, id: TableId) -> &'static str {
        let ids = [
            self.warehouse,
            self.district,
            self.customer,
            self.customer_by_name,
            self.history,
            self.new_order,
            self.order,
            self.order_by_customer,
            self.order_line,
            self.item,
            self.stock,
            self.meta,
        ];
        ids.iter()
            .position(|&t| t == id)
            .map_or("another table", |i| TABLE_NAMES[i])
    }

    /// Creates the tables (or finds them: creating is idempotent).
    pub(crate) fn create(db: &mut LocalDb) -> Result<Self> {
        let mut ids = [TableId::DEFAULT; 12];
        for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
            *id = db.create_table(name)?;
        }
        Ok(Self::from_ids(ids))
    }

    /// The tables of a database that has them all; the first name missing otherwise.
    pub(crate) fn find(db: &LocalDb) -> std::result::Result<Self, &'static str> {
        let mut ids = [TableId::DEFAULT; 12];
        for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
            *id = db.table_id(name).ok_or(name)?;
        }
        Ok(Self::from_ids(ids))
    }
}

/// What the meta row records: the scale and the load's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoadedMeta {
    pub(crate) scale: TpccScale,
    pub(crate) constants: Constants,
}

impl Row for LoadedMeta {
    const TABLE: &'static str = "tpcc.meta";
    fn encode(&self) -> Vec<u8> {
        let s = &self.scale;
        let c = &self.constants;
        RowWriter::new(41)
            .u8(META_VERSION)
            .u32(s.warehouses)
            .u32(s.items)
            .u32(s.districts)
            .u32(s.customers_per_district)
            .u32(s.orders_per_district)
            .u32(s.new_orders_per_district)
            .u32(c.last_name_load)
            .u32(c.last_name_run)
            .u32(c.customer_id)
            .u32(c.item_id)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> std::result::Result<Self, RowError> {
        if r.u8()? != META_VERSION {
            return Err(RowError {
                table: Self::TABLE,
                len_bytes: 0,
                offset: 0,
                what: "format version 1",
            });
        }
        let scale = TpccScale {
            warehouses: r.u32()?,
            items: r.u32()?,
            districts: r.u32()?,
            customers_per_district: r.u32()?,
            orders_per_district: r.u32()?,
            new_orders_per_district: r.u32()?,
        };
        let constants = Constants {
            last_name_load: r.u32()?,
            last_name_run: r.u32()?,
            customer_id: r.u32()?,
            item_id: r.u32()?,
        };
        Ok(LoadedMeta { scale, constants })
    }
}

/// The meta row of `db`, if it was loaded.
pub(crate) fn read_meta(db: &mut LocalDb, tables: &TpccTables) -> Result<Option<LoadedMeta>> {
    let Some(bytes) = db.in_table(tables.meta).get(META_KEY)? else {
        return Ok(None);
    };
    let meta = LoadedMeta::decode(&bytes).map_err(|source| BenchError::TpccRow { source })?;
    Ok(Some(meta))
}

/// The meta row through `h` (a shard's own database), if it was loaded.
pub(crate) async fn read_meta_in(h: &DbHandle, tables: &TpccTables) -> Result<Option<LoadedMeta>> {
    let Some(bytes) = h.in_table(tables.meta).get(META_KEY).await? else {
        return Ok(None);
    };
    let meta = LoadedMeta::decode(&bytes).map_err(|source| BenchError::TpccRow { source })?;
    Ok(Some(meta))
}

/// Records that `db` holds a complete population of `meta.scale`.
pub(crate) fn write_meta(db: &mut LocalDb, tables: &TpccTables, meta: &LoadedMeta) -> Result<()> {
    db.in_table(tables.meta).insert(META_KEY, &meta.encode())?;
    Ok(())
}
