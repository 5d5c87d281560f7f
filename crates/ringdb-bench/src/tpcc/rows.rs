//! The rows of the TPC-C tables (clause 1.3), each with its fields and their encoding
//! (`codec.rs`). Money is `i64` cents, tax and discount rates are `i32` ten-thousandths
//! (0.1234 is 1234), dates are microseconds since the Unix epoch, and a null carrier or
//! delivery date is `None`. The key fields are in the key (`keys.rs`), not repeated here;
//! NEW-ORDER and the two indexes carry empty values.

use super::codec::{Row, RowError, RowReader, RowWriter, Text};

/// The address fields WAREHOUSE, DISTRICT and CUSTOMER share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address {
    /// 10-20 characters.
    pub street_1: Text<20>,
    /// 10-20 characters.
    pub street_2: Text<20>,
    /// 10-20 characters.
    pub city: Text<20>,
    /// 2 characters.
    pub state: Text<2>,
    /// 9 characters.
    pub zip: Text<9>,
}

impl Address {
    fn write(&self, w: &mut RowWriter) {
        w.short_text(&self.street_1)
            .short_text(&self.street_2)
            .short_text(&self.city)
            .short_text(&self.state)
            .short_text(&self.zip);
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(Address {
            street_1: r.short_text()?,
            street_2: r.short_text()?,
            city: r.short_text()?,
            state: r.short_text()?,
            zip: r.short_text()?,
        })
    }
}

/// A WAREHOUSE row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warehouse {
    /// W_NAME, 6-10 characters.
    pub name: Text<10>,
    /// W_STREET_1 .. W_ZIP.
    pub address: Address,
    /// W_TAX, ten-thousandths.
    pub tax: i32,
    /// W_YTD, cents.
    pub ytd_cents: i64,
}

impl Row for Warehouse {
    const TABLE: &'static str = "WAREHOUSE";
    fn encode(&self) -> Vec<u8> {
        let mut w = RowWriter::new(96);
        w.short_text(&self.name);
        self.address.write(&mut w);
        w.i32(self.tax).i64(self.ytd_cents).finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(Warehouse {
            name: r.short_text()?,
            address: Address::read(r)?,
            tax: r.i32()?,
            ytd_cents: r.i64()?,
        })
    }
}

/// A DISTRICT row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct District {
    /// D_NAME, 6-10 characters.
    pub name: Text<10>,
    /// D_STREET_1 .. D_ZIP.
    pub address: Address,
    /// D_TAX, ten-thousandths.
    pub tax: i32,
    /// D_YTD, cents.
    pub ytd_cents: i64,
    /// D_NEXT_O_ID.
    pub next_order_id: u32,
}

impl Row for District {
    const TABLE: &'static str = "DISTRICT";
    fn encode(&self) -> Vec<u8> {
        let mut w = RowWriter::new(100);
        w.short_text(&self.name);
        self.address.write(&mut w);
        w.i32(self.tax)
            .i64(self.ytd_cents)
            .u32(self.next_order_id)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(District {
            name: r.short_text()?,
            address: Address::read(r)?,
            tax: r.i32()?,
            ytd_cents: r.i64()?,
            next_order_id: r.u32()?,
        })
    }
}

/// A CUSTOMER row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Customer {
    /// C_FIRST, 8-16 characters.
    pub first: Text<16>,
    /// C_MIDDLE, "OE".
    pub middle: Text<2>,
    /// C_LAST, from the syllables, at most 16 characters.
    pub last: Text<16>,
    /// C_STREET_1 .. C_ZIP.
    pub address: Address,
    /// C_PHONE, 16 digits.
    pub phone: Text<16>,
    /// C_SINCE, microseconds since the epoch.
    pub since_micros: u64,
    /// C_CREDIT, "GC" or "BC".
    pub credit: Text<2>,
    /// C_CREDIT_LIM, cents.
    pub credit_limit_cents: i64,
    /// C_DISCOUNT, ten-thousandths.
    pub discount: i32,
    /// C_BALANCE, cents.
    pub balance_cents: i64,
    /// C_YTD_PAYMENT, cents.
    pub ytd_payment_cents: i64,
    /// C_PAYMENT_CNT.
    pub payment_count: u32,
    /// C_DELIVERY_CNT.
    pub delivery_count: u32,
    /// C_DATA, 300-500 characters.
    pub data: Text<500>,
}

impl Row for Customer {
    const TABLE: &'static str = "CUSTOMER";
    fn encode(&self) -> Vec<u8> {
        let mut w = RowWriter::new(700);
        w.short_text(&self.first)
            .short_text(&self.middle)
            .short_text(&self.last);
        self.address.write(&mut w);
        w.short_text(&self.phone)
            .u64(self.since_micros)
            .short_text(&self.credit)
            .i64(self.credit_limit_cents)
            .i32(self.discount)
            .i64(self.balance_cents)
            .i64(self.ytd_payment_cents)
            .u32(self.payment_count)
            .u32(self.delivery_count)
            .long_text(&self.data)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(Customer {
            first: r.short_text()?,
            middle: r.short_text()?,
            last: r.short_text()?,
            address: Address::read(r)?,
            phone: r.short_text()?,
            since_micros: r.u64()?,
            credit: r.short_text()?,
            credit_limit_cents: r.i64()?,
            discount: r.i32()?,
            balance_cents: r.i64()?,
            ytd_payment_cents: r.i64()?,
            payment_count: r.u32()?,
            delivery_count: r.u32()?,
            data: r.long_text()?,
        })
    }
}

/// A HISTORY row (the customer's ids are in the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// H_D_ID: the district paid at.
    pub district: u32,
    /// H_W_ID: the warehouse paid at.
    pub warehouse: u32,
    /// H_DATE, microseconds since the epoch.
    pub date_micros: u64,
    /// H_AMOUNT, cents.
    pub amount_cents: i64,
    /// H_DATA, 12-24 characters.
    pub data: Text<24>,
}

impl Row for History {
    const TABLE: &'static str = "HISTORY";
    fn encode(&self) -> Vec<u8> {
        RowWriter::new(48)
            .u32(self.district)
            .u32(self.warehouse)
            .u64(self.date_micros)
            .i64(self.amount_cents)
            .short_text(&self.data)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(History {
            district: r.u32()?,
            warehouse: r.u32()?,
            date_micros: r.u64()?,
            amount_cents: r.i64()?,
            data: r.short_text()?,
        })
    }
}

/// An ORDER row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// O_C_ID.
    pub customer: u32,
    /// O_ENTRY_D, microseconds since the epoch.
    pub entry_micros: u64,
    /// O_CARRIER_ID, 1-10, or null (`None`) until delivered.
    pub carrier: Option<u8>,
    /// O_OL_CNT, 5-15.
    pub line_count: u8,
    /// O_ALL_LOCAL.
    pub all_local: bool,
}

impl Row for Order {
    const TABLE: &'static str = "ORDER";
    fn encode(&self) -> Vec<u8> {
        RowWriter::new(15)
            .u32(self.customer)
            .u64(self.entry_micros)
            .u8(self.carrier.unwrap_or(0))
            .u8(self.line_count)
            .u8(self.all_local.into())
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(Order {
            customer: r.u32()?,
            entry_micros: r.u64()?,
            carrier: Some(r.u8()?).filter(|&c| c != 0),
            line_count: r.u8()?,
            all_local: r.u8()? != 0,
        })
    }
}

/// An ORDER-LINE row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderLine {
    /// OL_I_ID.
    pub item: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_warehouse: u32,
    /// OL_DELIVERY_D, microseconds since the epoch, or null (`None`) until delivered.
    pub delivery_micros: Option<u64>,
    /// OL_QUANTITY.
    pub quantity: u8,
    /// OL_AMOUNT, cents.
    pub amount_cents: i64,
    /// OL_DIST_INFO, 24 characters.
    pub dist_info: Text<24>,
}

impl Row for OrderLine {
    const TABLE: &'static str = "ORDER-LINE";
    fn encode(&self) -> Vec<u8> {
        RowWriter::new(56)
            .u32(self.item)
            .u32(self.supply_warehouse)
            .u64(self.delivery_micros.unwrap_or(0))
            .u8(self.quantity)
            .i64(self.amount_cents)
            .short_text(&self.dist_info)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(OrderLine {
            item: r.u32()?,
            supply_warehouse: r.u32()?,
            delivery_micros: Some(r.u64()?).filter(|&d| d != 0),
            quantity: r.u8()?,
            amount_cents: r.i64()?,
            dist_info: r.short_text()?,
        })
    }
}

/// An ITEM row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// I_IM_ID, 1-10,000.
    pub image_id: u32,
    /// I_NAME, 14-24 characters.
    pub name: Text<24>,
    /// I_PRICE, cents (1.00-100.00).
    pub price_cents: i64,
    /// I_DATA, 26-50 characters, "ORIGINAL" in 10% of them.
    pub data: Text<50>,
}

impl Row for Item {
    const TABLE: &'static str = "ITEM";
    fn encode(&self) -> Vec<u8> {
        RowWriter::new(90)
            .u32(self.image_id)
            .short_text(&self.name)
            .i64(self.price_cents)
            .short_text(&self.data)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        Ok(Item {
            image_id: r.u32()?,
            name: r.short_text()?,
            price_cents: r.i64()?,
            data: r.short_text()?,
        })
    }
}

impl Stock {
    /// S_QUANTITY alone (the row's first field), without decoding the rest: what StockLevel
    /// reads of each of its two hundred rows.
    pub fn quantity_of(bytes: &[u8]) -> Result<i32, RowError> {
        RowReader::new(Self::TABLE, bytes).i32()
    }
}

impl OrderLine {
    /// OL_I_ID alone (the row's first field): what StockLevel reads of each line.
    pub fn item_of(bytes: &[u8]) -> Result<u32, RowError> {
        RowReader::new(Self::TABLE, bytes).u32()
    }
}

/// A STOCK row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stock {
    /// S_QUANTITY, 10-100 at load.
    pub quantity: i32,
    /// S_DIST_01 .. S_DIST_10, 24 characters each.
    pub dist: [Text<24>; 10],
    /// S_YTD.
    pub ytd: u64,
    /// S_ORDER_CNT.
    pub order_count: u32,
    /// S_REMOTE_CNT.
    pub remote_count: u32,
    /// S_DATA, 26-50 characters, "ORIGINAL" in 10% of them.
    pub data: Text<50>,
}

impl Row for Stock {
    const TABLE: &'static str = "STOCK";
    fn encode(&self) -> Vec<u8> {
        let mut w = RowWriter::new(330);
        w.i32(self.quantity);
        for d in &self.dist {
            w.short_text(d);
        }
        w.u64(self.ytd)
            .u32(self.order_count)
            .u32(self.remote_count)
            .short_text(&self.data)
            .finish()
    }
    fn read(r: &mut RowReader<'_>) -> Result<Self, RowError> {
        let quantity = r.i32()?;
        let mut dist: [Text<24>; 10] = [Text::default(); 10];
        for d in &mut dist {
            *d = r.short_text()?;
        }
        Ok(Stock {
            quantity,
            dist,
            ytd: r.u64()?,
            order_count: r.u32()?,
            remote_count: r.u32()?,
            data: r.short_text()?,
        })
    }
}
