//! The rows of the initial population (clause 4.3.3.1), one generator per table. `load.rs`
//! decides the order they are written in; here is only what each row holds.

use super::codec::Text;
use super::random::{self, a_string, data_with_original, n_string, nurand, Constants};
use super::rows::{Address, Customer, District, History, Item, Order, OrderLine, Stock, Warehouse};
use super::scale::TpccScale;
use rand::{Rng, RngExt};

/// C_BALANCE at load: -10.00.
pub const CUSTOMER_BALANCE_CENTS: i64 = -1_000;
/// C_YTD_PAYMENT and H_AMOUNT at load: 10.00.
pub const FIRST_PAYMENT_CENTS: i64 = 1_000;
/// C_CREDIT_LIM: 50,000.00.
pub const CREDIT_LIMIT_CENTS: i64 = 5_000_000;
/// W_TAX and D_TAX at most 0.2000.
const TAX_MAX: i32 = 2_000;
/// C_DISCOUNT at most 0.5000.
const DISCOUNT_MAX: i32 = 5_000;

/// D_YTD at load: the customers' first payments (30,000.00 in the standard).
pub fn district_ytd_cents(scale: &TpccScale) -> i64 {
    i64::from(scale.customers_per_district) * FIRST_PAYMENT_CENTS
}

/// W_YTD at load: its districts' D_YTD (300,000.00 in the standard).
pub fn warehouse_ytd_cents(scale: &TpccScale) -> i64 {
    i64::from(scale.districts) * district_ytd_cents(scale)
}

fn address(rng: &mut impl Rng) -> Address {
    Address {
        street_1: Text::of(&a_string(rng, 10, 20)),
        street_2: Text::of(&a_string(rng, 10, 20)),
        city: Text::of(&a_string(rng, 10, 20)),
        state: Text::of(&a_string(rng, 2, 2)),
        zip: Text::of(&random::zip(rng)),
    }
}

/// A WAREHOUSE row.
pub fn warehouse(rng: &mut impl Rng, scale: &TpccScale) -> Warehouse {
    Warehouse {
        name: Text::of(&a_string(rng, 6, 10)),
        address: address(rng),
        tax: random::rate(rng, TAX_MAX),
        ytd_cents: warehouse_ytd_cents(scale),
    }
}

/// A DISTRICT row.
pub fn district(rng: &mut impl Rng, scale: &TpccScale) -> District {
    District {
        name: Text::of(&a_string(rng, 6, 10)),
        address: address(rng),
        tax: random::rate(rng, TAX_MAX),
        ytd_cents: district_ytd_cents(scale),
        next_order_id: scale.orders_per_district + 1,
    }
}

/// C_LAST of customer `c` at load: by number for the first 1,000, else NURand with C_LOAD.
pub fn customer_last_name(rng: &mut impl Rng, constants: &Constants, c: u32) -> String {
    if c <= 1_000 {
        return random::last_name(c - 1);
    }
    let n = nurand(rng, random::A_LAST_NAME, constants.last_name_load, 0, 999);
    random::last_name(n)
}

/// A CUSTOMER row for customer `c`, in the database since `now_micros`.
pub fn customer(rng: &mut impl Rng, constants: &Constants, c: u32, now_micros: u64) -> Customer {
    Customer {
        first: Text::of(&a_string(rng, 8, 16)),
        middle: Text::of("OE"),
        last: Text::of(&customer_last_name(rng, constants, c)),
        address: address(rng),
        phone: Text::of(&n_string(rng, 16, 16)),
        since_micros: now_micros,
        credit: Text::of(if rng.random_range(0..10) == 0 {
            "BC"
        } else {
            "GC"
        }),
        credit_limit_cents: CREDIT_LIMIT_CENTS,
        discount: random::rate(rng, DISCOUNT_MAX),
        balance_cents: CUSTOMER_BALANCE_CENTS,
        ytd_payment_cents: FIRST_PAYMENT_CENTS,
        payment_count: 1,
        delivery_count: 0,
        data: Text::of(&a_string(rng, 300, 500)),
    }
}

/// The HISTORY row of a customer's first payment, at its own district.
pub fn history(rng: &mut impl Rng, w: u32, d: u32, now_micros: u64) -> History {
    History {
        district: d,
        warehouse: w,
        date_micros: now_micros,
        amount_cents: FIRST_PAYMENT_CENTS,
        data: Text::of(&a_string(rng, 12, 24)),
    }
}

/// An ORDER row for customer `c`; delivered (a carrier set) unless `undelivered`.
pub fn order(rng: &mut impl Rng, c: u32, undelivered: bool, now_micros: u64) -> Order {
    Order {
        customer: c,
        entry_micros: now_micros,
        carrier: (!undelivered).then(|| rng.random_range(1..=10)),
        line_count: rng.random_range(5..=15),
        all_local: true,
    }
}

/// An ORDER-LINE row of `order`, supplied by warehouse `w`.
pub fn order_line(rng: &mut impl Rng, scale: &TpccScale, w: u32, order: &Order) -> OrderLine {
    let delivered = order.carrier.is_some();
    OrderLine {
        item: rng.random_range(1..=scale.items),
        supply_warehouse: w,
        delivery_micros: delivered.then_some(order.entry_micros),
        quantity: 5,
        amount_cents: if delivered {
            0
        } else {
            rng.random_range(1..=999_999)
        },
        dist_info: Text::of(&a_string(rng, 24, 24)),
    }
}

/// An ITEM row.
pub fn item(rng: &mut impl Rng) -> Item {
    Item {
        image_id: rng.random_range(1..=10_000),
        name: Text::of(&a_string(rng, 14, 24)),
        price_cents: rng.random_range(100..=10_000),
        data: Text::of(&data_with_original(rng)),
    }
}

/// A STOCK row.
pub fn stock(rng: &mut impl Rng) -> Stock {
    Stock {
        quantity: rng.random_range(10..=100),
        dist: std::array::from_fn(|_| Text::of(&a_string(rng, 24, 24))),
        ytd: 0,
        order_count: 0,
        remote_count: 0,
        data: Text::of(&data_with_original(rng)),
    }
}

/// The customers of a district in a random order: who placed orders 1, 2, ... at load.
pub fn customer_permutation(rng: &mut impl Rng, customers: u32) -> Vec<u32> {
    let mut ids: Vec<u32> = (1..=customers).collect();
    for i in (1..ids.len()).rev() {
        let j = rng.random_range(0..=i);
        ids.swap(i, j);
    }
    ids
}

/// Microseconds since the Unix epoch now (dates of rows and transactions).
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
}
